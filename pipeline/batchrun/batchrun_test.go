package batchrun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// fakeSource serves n rooms under query id "q-1", or fails with err after
// serving them, or (hang) waits for ctx to end as a running query would.
type fakeSource struct {
	n       int
	err     error
	hang    bool
	started chan struct{} // closed when Rooms is called
	once    sync.Once
	mu      sync.Mutex
	stopped error // ctx's cause when Rooms gave up
}

func (s *fakeSource) Rooms(ctx context.Context, start, end time.Time, onStart func(string), out chan<- pipeline.ActiveRoom) (pipeline.RoomQuery, error) {
	s.once.Do(func() { close(s.started) })
	q := pipeline.RoomQuery{QueryExecutionID: "q-1"}
	onStart(q.QueryExecutionID)
	stop := func() (pipeline.RoomQuery, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.stopped = context.Cause(ctx)
		return q, fmt.Errorf("fake: query stopped: %w", context.Cause(ctx))
	}
	if s.hang {
		<-ctx.Done()
		return stop()
	}
	for i := range s.n {
		select {
		case out <- pipeline.ActiveRoom{RoomID: fmt.Sprintf("room-%05d", i), FirstMessageAt: start, LastMessageAt: end, MessageCount: 1}:
			q.Rows++
		case <-ctx.Done():
			return stop()
		}
	}
	return q, s.err
}

// fakePublisher accepts every event in calls of up to ten, or fails every
// event with err.
type fakePublisher struct {
	err error

	mu     sync.Mutex
	events []pipeline.ReviewEvent
	st     pipeline.PublishStats
}

func (p *fakePublisher) Run(ctx context.Context, in <-chan pipeline.ReviewEvent) error {
	pending := 0
	for ev := range in {
		p.mu.Lock()
		if p.err != nil {
			p.st.Failed++
		} else {
			p.events = append(p.events, ev)
			p.st.Published++
		}
		if pending++; pending == 10 {
			p.st.Calls, pending = p.st.Calls+1, 0
		}
		p.mu.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pending > 0 {
		p.st.Calls++
	}
	if p.err != nil && p.st.Failed > 0 {
		return fmt.Errorf("fake: %d not published: %w", p.st.Failed, p.err)
	}
	return context.Cause(ctx)
}

func (p *fakePublisher) Stats() pipeline.PublishStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st
}

type fakeStore struct {
	finishErr error

	mu   sync.Mutex
	runs []pipeline.BatchRun
}

func (s *fakeStore) Begin(_ context.Context, runID string, start, end time.Time) (pipeline.BatchRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	attempt := 1
	for _, r := range s.runs {
		if r.RunID == runID {
			attempt = max(attempt, r.Attempt+1)
		}
	}
	r := pipeline.BatchRun{ID: int64(len(s.runs) + 1), RunID: runID, Attempt: attempt, WindowStart: start, WindowEnd: end, Status: pipeline.BatchRunRunning}
	s.runs = append(s.runs, r)
	return r, nil
}

func (s *fakeStore) Finish(ctx context.Context, r pipeline.BatchRun) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if s.finishErr != nil {
		return s.finishErr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs[r.ID-1] = r
	return nil
}

func (s *fakeStore) all() []pipeline.BatchRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]pipeline.BatchRun(nil), s.runs...)
}

// syncBuffer is a strings.Builder safe to read while the run writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var (
	winStart = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	winEnd   = winStart.Add(time.Hour)
)

type fixture struct {
	src      *fakeSource
	pub      *fakePublisher
	store    *fakeStore
	progress syncBuffer
}

func setup(rooms int, mutate func(*Config)) (*fixture, *Runner) {
	f := &fixture{src: &fakeSource{n: rooms, started: make(chan struct{})}, pub: &fakePublisher{}, store: &fakeStore{}}
	cfg := Config{WindowStart: winStart, WindowEnd: winEnd, RunID: "run-1", ProgressInterval: time.Millisecond, RoomBuffer: 100, EventBuffer: 80}
	if mutate != nil {
		mutate(&cfg)
	}
	return f, &Runner{Config: cfg, Source: f.src, Publisher: f.pub, Store: f.store, Progress: &f.progress}
}

func TestRunPublishesEveryRoomAndRecordsTheAttempt(t *testing.T) {
	t.Parallel()
	f, r := setup(2345, nil)
	sum, err := r.Run(context.Background())
	require.NoError(t, err)
	require.Len(t, f.pub.events, 2345)
	seen := map[string]bool{}
	for _, ev := range f.pub.events {
		require.Equal(t, "run-1", ev.RunID)
		require.Equal(t, pipeline.ReviewSchemaVersion, ev.SchemaVersion)
		require.True(t, ev.WindowStart.Equal(winStart) && ev.WindowEnd.Equal(winEnd))
		seen[ev.RoomID] = true
	}
	require.Len(t, seen, 2345)
	require.Equal(t, Summary{WindowStart: winStart, WindowEnd: winEnd, RunID: "run-1", Attempt: 1, Status: "succeeded",
		QueryExecutionID: "q-1", Rows: 2345, Published: 2345, Calls: 235, MessagesPerCall: 2345.0 / 235,
		DurationSeconds: sum.DurationSeconds}, sum)
	runs := f.store.all()
	require.Len(t, runs, 1)
	require.Equal(t, pipeline.BatchRunSucceeded, runs[0].Status)
	require.Equal(t, int64(2345), runs[0].Rows)
	require.Equal(t, int64(2345), runs[0].Published)
	require.Equal(t, "q-1", runs[0].QueryExecutionID)
	require.Empty(t, runs[0].Error)

	// A rerun of the window keeps the run id and adds an attempt.
	f.pub = &fakePublisher{}
	r.Publisher = f.pub
	sum, err = r.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, sum.Attempt)
	require.Len(t, f.store.all(), 2)
}

func TestRunModes(t *testing.T) {
	t.Parallel()
	boom := errors.New("throttled")
	tests := []struct {
		name          string
		mutate        func(*Config)
		fake          func(*fixture)
		wantErr       string
		wantRows      int64 // -1: whatever was read before the failure stopped the run
		wantPublished int   // -1: whatever got out before the failure stopped the publisher
		wantFailed    int64
		wantRecords   int
	}{
		{name: "dry run publishes and records nothing", mutate: func(c *Config) { c.DryRun = true }, wantRows: 500},
		{name: "max events cuts the source short", mutate: func(c *Config) { c.MaxEvents = 42 }, wantRows: 42, wantPublished: 42, wantRecords: 1},
		{name: "max events above the rows", mutate: func(c *Config) { c.MaxEvents = 501 }, wantRows: 500, wantPublished: 500, wantRecords: 1},
		{name: "source failure", fake: func(f *fixture) { f.src.err = errors.New("SYNTAX_ERROR: line 1:8") },
			wantErr: "SYNTAX_ERROR: line 1:8", wantRows: -1, wantPublished: -1, wantRecords: 1},
		{name: "publisher failure", fake: func(f *fixture) { f.pub.err = boom },
			wantErr: "500 not published: throttled", wantRows: 500, wantFailed: 500, wantRecords: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, r := setup(500, tc.mutate)
			if tc.fake != nil {
				tc.fake(f)
			}
			sum, err := r.Run(context.Background())
			if tc.wantRows >= 0 {
				require.Equal(t, tc.wantRows, sum.Rows)
			}
			if tc.wantPublished >= 0 {
				require.Len(t, f.pub.events, tc.wantPublished)
				require.Equal(t, int64(tc.wantPublished), sum.Published)
			}
			require.Equal(t, tc.wantFailed, sum.Failed)
			runs := f.store.all()
			require.Len(t, runs, tc.wantRecords)
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.Equal(t, "succeeded", sum.Status)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
			require.Equal(t, "failed", sum.Status)
			require.Contains(t, sum.Error, tc.wantErr)
			require.Equal(t, pipeline.BatchRunFailed, runs[0].Status)
			require.Contains(t, runs[0].Error, tc.wantErr)
			require.Equal(t, tc.wantFailed, runs[0].Failed)
			require.Equal(t, sum.Published, runs[0].Published)
			require.Equal(t, sum.Rows, runs[0].Rows)
		})
	}
}

func TestCancelStopsTheSourceAndRecordsFailure(t *testing.T) {
	t.Parallel()
	f, r := setup(10, nil)
	f.src.hang = true
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { _, err := r.Run(ctx); done <- err }()
	<-f.src.started
	require.Eventually(t, func() bool { return strings.Contains(f.progress.String(), "rows read 0, published 0") }, 5*time.Second, time.Millisecond,
		"progress is printed while the query runs")
	cause := errors.New("received terminated")
	cancel(cause)
	err := <-done
	require.ErrorIs(t, err, cause)
	f.src.mu.Lock()
	require.ErrorIs(t, f.src.stopped, cause)
	f.src.mu.Unlock()
	runs := f.store.all()
	require.Equal(t, pipeline.BatchRunFailed, runs[0].Status)
	require.Contains(t, runs[0].Error, "received terminated")
}

func TestFinishFailureFailsTheRun(t *testing.T) {
	t.Parallel()
	f, r := setup(3, nil)
	f.store.finishErr = errors.New("mysql gone")
	sum, err := r.Run(context.Background())
	require.ErrorContains(t, err, "mysql gone")
	require.Equal(t, "failed", sum.Status)
	require.Contains(t, sum.Error, "mysql gone")
	require.Equal(t, int64(3), sum.Published, "the events went out; only the record failed")
}

func TestMissingCollaboratorsFailBeforeAnything(t *testing.T) {
	t.Parallel()
	r := &Runner{Config: Config{WindowStart: winEnd, WindowEnd: winStart, MaxEvents: -1}}
	sum, err := r.Run(context.Background())
	for _, want := range []string{"window", "run id", "max events", "progress interval", "no room source", "no review publisher", "no run store"} {
		require.ErrorContains(t, err, want)
	}
	require.Equal(t, "failed", sum.Status)

	// A dry run needs only the source.
	f, r := setup(5, func(c *Config) { c.DryRun = true })
	r.Publisher, r.Store = nil, nil
	sum, err = r.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(5), sum.Rows)
	require.Empty(t, f.store.all())
}

func TestFailedSummary(t *testing.T) {
	t.Parallel()
	s := Failed(Config{WindowStart: winStart, WindowEnd: winEnd, RunID: "r", DryRun: true}, errors.New("no database"), 1500*time.Millisecond)
	require.Equal(t, Summary{WindowStart: winStart, WindowEnd: winEnd, RunID: "r", DryRun: true, Status: "failed", Error: "no database", DurationSeconds: 1.5}, s)
}
