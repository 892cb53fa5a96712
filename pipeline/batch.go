package pipeline

import (
	"context"
	"time"
)

// ActiveRoom is a chat room that had messages in a time window: one row of
// the batch's rooms query.
type ActiveRoom struct {
	RoomID         string
	FirstMessageAt time.Time
	LastMessageAt  time.Time
	MessageCount   int64
	HasImages      bool
	// ActiveSeconds are the whole seconds, counted from the window start,
	// in which the room had messages, ascending and distinct. Only the
	// sweep's query fills them (at most 3600 for its hour); nil means
	// unknown, and a sweep then takes the room as active from its first
	// message to its last.
	ActiveSeconds []int32
}

// CoveredWindow is the window of a committed verdict of a room: the
// messages sent in [Start, End) were reviewed under PipelineVersion.
type CoveredWindow struct {
	RoomID          string
	Start, End      time.Time
	PipelineVersion string
}

// CoverageSource reads which parts of a window committed done verdicts
// already cover (storage/mysql in production), for the batch in sweep mode.
type CoverageSource interface {
	// Covered returns the windows of the done verdicts of rooms that
	// overlap [start, end), under every pipeline version (the caller picks
	// its own and counts the others), in no particular order. A verdict
	// whose window is longer than DefaultMaxWindow may be missed, which
	// makes the sweep publish more, never less. It fails on a storage
	// error or when ctx ends.
	Covered(ctx context.Context, rooms []string, start, end time.Time) ([]CoveredWindow, error)
}

// RoomQuery describes the query behind one RoomSource.Rooms call.
type RoomQuery struct {
	// QueryExecutionID is empty when the query never started.
	QueryExecutionID string
	// Rows counts the rooms handed to the channel.
	Rows int64
}

// RoomSource lists the rooms that had messages in a window (storage/athena
// in production).
type RoomSource interface {
	// Rooms sends every room with messages in [start, end) to out, blocking
	// while out is full; it never closes out. onStart, when not nil, learns
	// the query's id as soon as it has one. When ctx ends Rooms stops the
	// query and fails with an error wrapping ctx's cause. The returned
	// RoomQuery is valid on failure too.
	Rooms(ctx context.Context, start, end time.Time, onStart func(queryID string), out chan<- ActiveRoom) (RoomQuery, error)
}

// PublishStats is a snapshot of a ReviewPublisher's counters.
type PublishStats struct {
	// Published counts messages the queue accepted.
	Published int64
	// Failed counts messages given up on: still failing after the last
	// attempt, failing for a sender fault, invalid, or cut off by
	// cancellation.
	Failed int64
	// Calls counts send calls, retries included.
	Calls int64
	// Retried counts entry re-sends after a failure.
	Retried int64
}

// MessagesPerCall is the average number of accepted messages per call.
func (s PublishStats) MessagesPerCall() float64 {
	if s.Calls == 0 {
		return 0
	}
	return float64(s.Published) / float64(s.Calls)
}

// ReviewPublisher publishes review events to the review queue
// (storage/sqs.ReviewPublisher in production).
type ReviewPublisher interface {
	// Run publishes every event from in until in is closed and waits for
	// every send. It fails when any event was not published; the others
	// are still sent. When ctx ends it stops reading in, gives up on unsent
	// events (counted as failed) and returns ctx's cause.
	Run(ctx context.Context, in <-chan ReviewEvent) error
	// Stats returns the counters so far; safe to call while Run runs.
	Stats() PublishStats
}

// BatchRunStatus is the state of one attempt of a batch run.
type BatchRunStatus string

// The statuses an attempt moves through: running, then succeeded or failed.
// An attempt left running had its process killed before it could finish.
const (
	BatchRunRunning   BatchRunStatus = "running"
	BatchRunSucceeded BatchRunStatus = "succeeded"
	BatchRunFailed    BatchRunStatus = "failed"
)

// BatchRun is one attempt of a batch run over a window.
type BatchRun struct {
	ID               int64
	RunID            string
	Attempt          int
	WindowStart      time.Time
	WindowEnd        time.Time
	Status           BatchRunStatus
	QueryExecutionID string
	Rows             int64
	Published        int64
	Failed           int64
	Error            string
	StartedAt        time.Time
	FinishedAt       time.Time // zero while running
}

// BatchRunStore records the attempts of batch runs (storage/batchruns in
// production), so that an operator can see which windows were published,
// by which attempt, and why an attempt failed.
type BatchRunStore interface {
	// Begin records a new running attempt of runID over [start, end) and
	// returns it with its attempt number, one more than the last recorded.
	// It fails on a storage error or when ctx ends.
	Begin(ctx context.Context, runID string, start, end time.Time) (BatchRun, error)
	// Finish records the final status, counts and error of attempt r.ID.
	// Callers pass a context that outlives a cancelled run, so that a run
	// stopped by a signal is still recorded as failed.
	Finish(ctx context.Context, r BatchRun) error
}
