package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// StopScope is what an operator's stop signal covers.
type StopScope string

// The stop scopes.
const (
	// StopScopeReview stops one review: a room and a window.
	StopScopeReview StopScope = "review"
	// StopScopeRoom stops every review of a room, whatever the window.
	StopScopeRoom StopScope = "room"
	// StopScopeRun stops every review published by one batch run.
	StopScopeRun StopScope = "run"
)

// MaxStopTTL bounds how long a signal lives, so the in-process set and the
// shared store stay small.
const MaxStopTTL = 7 * 24 * time.Hour

// DefaultStopTTL is how long a stop lives when the operator gives no TTL:
// long enough to outlast the redeliveries of an hourly batch's messages.
const DefaultStopTTL = 24 * time.Hour

// StopSignal is one operator stop. Its JSON form is what a StopPublisher
// stores and broadcasts.
type StopSignal struct {
	Scope       StopScope `json:"scope"`
	RoomID      string    `json:"room_id,omitempty"`
	WindowStart time.Time `json:"window_start,omitzero"`
	WindowEnd   time.Time `json:"window_end,omitzero"`
	RunID       string    `json:"run_id,omitempty"`
	Reason      string    `json:"reason"`
	PublishedAt time.Time `json:"published_at"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// Validate reports every problem with the signal, joined.
func (s StopSignal) Validate() error {
	var errs []error
	switch s.Scope {
	case StopScopeReview:
		if s.RoomID == "" || s.WindowStart.IsZero() || s.WindowEnd.IsZero() {
			errs = append(errs, errors.New("a review stop needs room_id, window_start and window_end"))
		} else if !s.WindowEnd.After(s.WindowStart) {
			errs = append(errs, errors.New("window_end is not after window_start"))
		}
	case StopScopeRoom:
		if s.RoomID == "" {
			errs = append(errs, errors.New("a room stop needs room_id"))
		}
	case StopScopeRun:
		if s.RunID == "" {
			errs = append(errs, errors.New("a run stop needs run_id"))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown scope %q", s.Scope))
	}
	if s.ExpiresAt.IsZero() || !s.ExpiresAt.After(s.PublishedAt) {
		errs = append(errs, errors.New("expires_at must be after published_at"))
	} else if s.ExpiresAt.Sub(s.PublishedAt) > MaxStopTTL {
		errs = append(errs, fmt.Errorf("ttl is longer than %s", MaxStopTTL))
	}
	if len(s.Reason) > 500 {
		errs = append(errs, errors.New("reason is longer than 500 bytes"))
	}
	return errors.Join(errs...)
}

// Key is the signal's identity: the same scope and target always give the
// same key, so a repeated stop replaces the earlier one.
func (s StopSignal) Key() string {
	switch s.Scope {
	case StopScopeReview:
		return reviewStopKey(s.RoomID, s.WindowStart, s.WindowEnd)
	case StopScopeRoom:
		return roomStopKey(s.RoomID)
	default:
		return runStopKey(s.RunID)
	}
}

func reviewStopKey(room string, start, end time.Time) string {
	return "review:" + room + ":" + start.UTC().Format(time.RFC3339) + ":" + end.UTC().Format(time.RFC3339)
}
func roomStopKey(room string) string { return "room:" + room }
func runStopKey(run string) string   { return "run:" + run }

// Matches reports whether the signal stops a job running as t.
func (s StopSignal) Matches(t StopTarget) bool {
	switch s.Scope {
	case StopScopeReview:
		return s.RoomID == t.RoomID && s.WindowStart.Equal(t.WindowStart) && s.WindowEnd.Equal(t.WindowEnd)
	case StopScopeRoom:
		return s.RoomID == t.RoomID
	case StopScopeRun:
		return s.RunID != "" && s.RunID == t.RunID
	}
	return false
}

// Err returns the cancellation cause for a job stopped by s.
func (s StopSignal) Err() error {
	reason := s.Reason
	if reason == "" {
		reason = "stopped by operator"
	}
	return &StoppedError{Reason: fmt.Sprintf("%s stop: %s", s.Scope, reason)}
}

// DecodeStopSignal parses and validates a signal's JSON form.
func DecodeStopSignal(b []byte) (StopSignal, error) {
	var s StopSignal
	if err := json.Unmarshal(b, &s); err != nil {
		return StopSignal{}, fmt.Errorf("stop: decode signal: %w", err)
	}
	if err := s.Validate(); err != nil {
		return StopSignal{}, fmt.Errorf("stop: invalid signal: %w", err)
	}
	return s, nil
}

// StopTarget is what a running job is: the scopes a signal can match it by.
//
// Build it with NewStopTarget (or StopTargetOf) so that its keys are
// rendered once and a lookup by Keys allocates nothing.
type StopTarget struct {
	RoomID      string
	WindowStart time.Time
	WindowEnd   time.Time
	RunID       string

	cached *[3]string
}

// NewStopTarget returns a target with its signal keys precomputed.
func NewStopTarget(room string, start, end time.Time, run string) StopTarget {
	t := StopTarget{RoomID: room, WindowStart: start, WindowEnd: end, RunID: run}
	k := t.render()
	t.cached = &k
	return t
}

// StopTargetOf returns the target of a review event.
func StopTargetOf(ev ReviewEvent) StopTarget {
	return NewStopTarget(ev.RoomID, ev.WindowStart, ev.WindowEnd, ev.RunID)
}

// Keys returns the keys of the three signals that would stop t (review,
// room, run), most specific first. It is an array so that the per-chunk
// check costs no allocation.
func (t StopTarget) Keys() [3]string {
	if t.cached != nil {
		return *t.cached
	}
	return t.render()
}

func (t StopTarget) render() [3]string {
	return [3]string{reviewStopKey(t.RoomID, t.WindowStart, t.WindowEnd), roomStopKey(t.RoomID), runStopKey(t.RunID)}
}

// Describe renders a target for logs.
func (t StopTarget) Describe() string {
	return strings.Join([]string{t.RoomID, t.WindowStart.UTC().Format(time.RFC3339), t.WindowEnd.UTC().Format(time.RFC3339), t.RunID}, " ")
}

// StopRequest is an operator's stop as typed on the command line or posted
// to the worker's admin port (POST /v1/stop). Exactly one of RoomID (with
// or without a window) and RunID names the scope.
type StopRequest struct {
	RoomID      string    `json:"room_id,omitempty"`
	WindowStart time.Time `json:"window_start,omitzero"`
	WindowEnd   time.Time `json:"window_end,omitzero"`
	RunID       string    `json:"run_id,omitempty"`
	// TTL is a Go duration string ("30m"); empty means DefaultStopTTL.
	TTL    string `json:"ttl,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Moderator is the console's pseudonymous id of the moderator who
	// pressed the stop button ("" for an operator's stop); the operator
	// API records it in its audit entry as a field of its own.
	Moderator string `json:"moderator,omitempty"`
}

// Signal turns the request into a validated signal published at now. It
// reports every problem at once.
func (r StopRequest) Signal(now time.Time) (StopSignal, error) {
	now = now.UTC()
	ttl := DefaultStopTTL
	var errs []error
	if r.TTL != "" {
		d, err := time.ParseDuration(r.TTL)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("ttl %q is not a positive duration", r.TTL))
		} else {
			ttl = d
		}
	}
	s := StopSignal{Reason: r.Reason, PublishedAt: now, ExpiresAt: now.Add(ttl)}
	switch {
	case r.RunID != "" && r.RoomID != "":
		errs = append(errs, errors.New("give a run id or a room, not both"))
	case r.RunID != "":
		s.Scope, s.RunID = StopScopeRun, r.RunID
	case r.RoomID != "" && (!r.WindowStart.IsZero() || !r.WindowEnd.IsZero()):
		s.Scope, s.RoomID, s.WindowStart, s.WindowEnd = StopScopeReview, r.RoomID, r.WindowStart.UTC(), r.WindowEnd.UTC()
	case r.RoomID != "":
		s.Scope, s.RoomID = StopScopeRoom, r.RoomID
	default:
		errs = append(errs, errors.New("name a room (optionally with a window) or a run id"))
	}
	if len(errs) == 0 {
		if err := s.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return StopSignal{}, fmt.Errorf("stop: %w", err)
	}
	return s, nil
}

// StopSink is the in-process set of live stop signals that running jobs
// are checked against (pipeline/stop.Holder). A StopFeed fills it.
type StopSink interface {
	// Add records s and cancels the running jobs it stops; an expired
	// signal is ignored. It reports whether s was live.
	Add(s StopSignal) bool
	// Sweep drops expired signals and returns how many are left.
	Sweep() int
}

// StopPublisher stores a stop signal for its TTL and broadcasts it to every
// worker (storage/redisstop.Publisher).
type StopPublisher interface {
	// Publish validates s, stores and broadcasts it, and returns how many
	// workers heard the broadcast (0 is not an error: the stored signal
	// still reaches them). It honours ctx.
	Publish(ctx context.Context, s StopSignal) (receivers int64, err error)
}

// StopLookup reads the shared store of stop signals once.
type StopLookup interface {
	// Lookup returns the stored signals that would stop t, in one round
	// trip: a job calls it when it starts, so a signal published just
	// before is honoured even if the broadcast was missed. It honours ctx;
	// an error means the store could not be asked.
	Lookup(ctx context.Context, t StopTarget) ([]StopSignal, error)
}

// StopFeed delivers the stop signals published anywhere to this process
// (storage/redisstop.Subscriber).
type StopFeed interface {
	StopLookup
	// Run adds every signal published, and every stored one after each
	// (re)subscription, to sink, and sweeps sink now and then, until ctx
	// ends; then it returns nil. While the store is unreachable it keeps
	// trying (with backoff); jobs run on meanwhile.
	Run(ctx context.Context, sink StopSink) error
}
