// Package stop carries operator stop signals to in-flight reviews.
//
// A Signal names a scope (one review, a room, or a batch run). Signals reach
// every worker pod over a broadcast channel (storage/redisstop) and land in
// a Holder: an in-process, TTL-bounded set that answers "is this job
// stopped?" with map lookups, so checking on every streamed chunk costs no
// network round trip. Jobs register with Watch so that a signal arriving
// while they run cancels them at once.
package stop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// Scope is what a stop signal covers.
type Scope string

// The stop scopes.
const (
	// ScopeReview stops one review: a room and a window.
	ScopeReview Scope = "review"
	// ScopeRoom stops every review of a room, whatever the window.
	ScopeRoom Scope = "room"
	// ScopeRun stops every review published by one batch run.
	ScopeRun Scope = "run"
)

// MaxTTL bounds how long a signal lives, so the holder and Redis stay small.
const MaxTTL = 7 * 24 * time.Hour

// Signal is one operator stop. Its JSON form travels over the broadcast
// channel and is stored under Key with a TTL.
type Signal struct {
	Scope       Scope     `json:"scope"`
	RoomID      string    `json:"room_id,omitempty"`
	WindowStart time.Time `json:"window_start,omitzero"`
	WindowEnd   time.Time `json:"window_end,omitzero"`
	RunID       string    `json:"run_id,omitempty"`
	Reason      string    `json:"reason"`
	PublishedAt time.Time `json:"published_at"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// Validate reports every problem with the signal, joined.
func (s Signal) Validate() error {
	var errs []error
	switch s.Scope {
	case ScopeReview:
		if s.RoomID == "" || s.WindowStart.IsZero() || s.WindowEnd.IsZero() {
			errs = append(errs, errors.New("a review stop needs room_id, window_start and window_end"))
		} else if !s.WindowEnd.After(s.WindowStart) {
			errs = append(errs, errors.New("window_end is not after window_start"))
		}
	case ScopeRoom:
		if s.RoomID == "" {
			errs = append(errs, errors.New("a room stop needs room_id"))
		}
	case ScopeRun:
		if s.RunID == "" {
			errs = append(errs, errors.New("a run stop needs run_id"))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown scope %q", s.Scope))
	}
	if s.ExpiresAt.IsZero() || !s.ExpiresAt.After(s.PublishedAt) {
		errs = append(errs, errors.New("expires_at must be after published_at"))
	} else if s.ExpiresAt.Sub(s.PublishedAt) > MaxTTL {
		errs = append(errs, fmt.Errorf("ttl is longer than %s", MaxTTL))
	}
	if len(s.Reason) > 500 {
		errs = append(errs, errors.New("reason is longer than 500 bytes"))
	}
	return errors.Join(errs...)
}

// Key is the signal's identity: the same scope and target always give the
// same key, so a repeated stop replaces the earlier one.
func (s Signal) Key() string {
	switch s.Scope {
	case ScopeReview:
		return reviewKey(s.RoomID, s.WindowStart, s.WindowEnd)
	case ScopeRoom:
		return roomKey(s.RoomID)
	default:
		return runKey(s.RunID)
	}
}

func reviewKey(room string, start, end time.Time) string {
	return "review:" + room + ":" + start.UTC().Format(time.RFC3339) + ":" + end.UTC().Format(time.RFC3339)
}
func roomKey(room string) string { return "room:" + room }
func runKey(run string) string   { return "run:" + run }

// Decode parses and validates a signal's JSON form.
func Decode(b []byte) (Signal, error) {
	var s Signal
	if err := json.Unmarshal(b, &s); err != nil {
		return Signal{}, fmt.Errorf("stop: decode signal: %w", err)
	}
	if err := s.Validate(); err != nil {
		return Signal{}, fmt.Errorf("stop: invalid signal: %w", err)
	}
	return s, nil
}

// Target is what a running job is: the scopes a signal can match it by.
//
// Build it with NewTarget (or TargetOf) so that its keys are rendered once
// and each Check is three map lookups with no allocation.
type Target struct {
	RoomID      string
	WindowStart time.Time
	WindowEnd   time.Time
	RunID       string

	cached *[3]string
}

// NewTarget returns a target with its signal keys precomputed.
func NewTarget(room string, start, end time.Time, run string) Target {
	t := Target{RoomID: room, WindowStart: start, WindowEnd: end, RunID: run}
	k := t.render()
	t.cached = &k
	return t
}

// TargetOf returns the target of a review event.
func TargetOf(ev pipeline.ReviewEvent) Target {
	return NewTarget(ev.RoomID, ev.WindowStart, ev.WindowEnd, ev.RunID)
}

// keys returns the three signal keys that match t, most specific first.
func (t Target) keys() [3]string {
	if t.cached != nil {
		return *t.cached
	}
	return t.render()
}

func (t Target) render() [3]string {
	return [3]string{reviewKey(t.RoomID, t.WindowStart, t.WindowEnd), roomKey(t.RoomID), runKey(t.RunID)}
}

// Keys returns the signal keys that would stop t, for a one-off check
// against the shared store when a job starts.
func (t Target) Keys() []string { k := t.keys(); return k[:] }

// Err returns the cancellation cause for a job stopped by s.
func (s Signal) Err() error {
	reason := s.Reason
	if reason == "" {
		reason = "stopped by operator"
	}
	return &pipeline.StoppedError{Reason: fmt.Sprintf("%s stop: %s", s.Scope, reason)}
}

// Holder is the in-process set of live stop signals plus the registry of
// running jobs they can cancel. It is safe for concurrent use. Lookups are
// map reads under a read lock; expired signals are ignored at once and
// removed by Sweep, so memory stays bounded by the live signals.
type Holder struct {
	now func() time.Time

	// signals is copy-on-write: stops are rare and checks run on every
	// streamed chunk, so readers load a snapshot without any lock.
	signals atomic.Pointer[map[string]Signal]

	mu       sync.Mutex                     // guards watchers and writers of signals
	watchers map[string]map[*watch]struct{} // by room id
	// OnApply, when set, is called (outside the lock) each time a signal
	// cancels a running job; the worker records metrics with it.
	onApply func(Signal)
}

type watch struct {
	target Target
	cancel context.CancelCauseFunc
}

// NewHolder returns an empty holder. now may be nil for time.Now; onApply
// may be nil.
func NewHolder(now func() time.Time, onApply func(Signal)) *Holder {
	if now == nil {
		now = time.Now
	}
	h := &Holder{now: now, watchers: make(map[string]map[*watch]struct{}), onApply: onApply}
	empty := map[string]Signal{}
	h.signals.Store(&empty)
	return h
}

// Add records s and cancels every watched job it matches. An expired
// signal is ignored. It reports whether s was live.
func (h *Holder) Add(s Signal) bool {
	if !s.ExpiresAt.After(h.now()) {
		return false
	}
	var hit []*watch
	h.mu.Lock()
	cur := *h.signals.Load()
	if old, ok := cur[s.Key()]; !ok || !old.ExpiresAt.After(s.ExpiresAt) {
		next := make(map[string]Signal, len(cur)+1)
		for k, v := range cur {
			next[k] = v
		}
		next[s.Key()] = s
		h.signals.Store(&next)
	}
	for w := range h.candidates(s) {
		if s.matches(w.target) {
			hit = append(hit, w)
		}
	}
	h.mu.Unlock()
	for _, w := range hit {
		w.cancel(s.Err())
		if h.onApply != nil {
			h.onApply(s)
		}
	}
	return true
}

// candidates returns the watchers worth testing against s; the caller
// holds mu.
func (h *Holder) candidates(s Signal) map[*watch]struct{} {
	if s.Scope != ScopeRun {
		return h.watchers[s.RoomID]
	}
	all := make(map[*watch]struct{})
	for _, ws := range h.watchers {
		for w := range ws {
			all[w] = struct{}{}
		}
	}
	return all
}

func (s Signal) matches(t Target) bool {
	switch s.Scope {
	case ScopeReview:
		return s.RoomID == t.RoomID && s.WindowStart.Equal(t.WindowStart) && s.WindowEnd.Equal(t.WindowEnd)
	case ScopeRoom:
		return s.RoomID == t.RoomID
	case ScopeRun:
		return s.RunID != "" && s.RunID == t.RunID
	}
	return false
}

// Check returns the live signal that stops t, if any. It is three map
// lookups under a read lock: cheap enough for every streamed chunk.
func (h *Holder) Check(t Target) (Signal, bool) {
	now := h.now()
	keys := t.keys()
	signals := *h.signals.Load()
	if len(signals) == 0 {
		return Signal{}, false
	}
	for _, k := range keys {
		if s, ok := signals[k]; ok && s.ExpiresAt.After(now) {
			return s, true
		}
	}
	return Signal{}, false
}

// Watch registers a running job so that a signal arriving later cancels it
// with the signal's cause. If a live signal already matches, cancel is
// called at once. The returned function unregisters the job; call it when
// the job ends.
func (h *Holder) Watch(t Target, cancel context.CancelCauseFunc) (unwatch func()) {
	w := &watch{target: t, cancel: cancel}
	h.mu.Lock()
	ws := h.watchers[t.RoomID]
	if ws == nil {
		ws = make(map[*watch]struct{})
		h.watchers[t.RoomID] = ws
	}
	ws[w] = struct{}{}
	h.mu.Unlock()
	if s, ok := h.Check(t); ok {
		cancel(s.Err())
		if h.onApply != nil {
			h.onApply(s)
		}
	}
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if ws := h.watchers[t.RoomID]; ws != nil {
			delete(ws, w)
			if len(ws) == 0 {
				delete(h.watchers, t.RoomID)
			}
		}
	}
}

// Sweep removes expired signals and returns how many are left.
func (h *Holder) Sweep() int {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	cur := *h.signals.Load()
	next := make(map[string]Signal, len(cur))
	for k, s := range cur {
		if s.ExpiresAt.After(now) {
			next[k] = s
		}
	}
	h.signals.Store(&next)
	return len(next)
}

// Len returns the number of signals held, live or not yet swept.
func (h *Holder) Len() int {
	return len(*h.signals.Load())
}

// Describe renders a target for logs.
func (t Target) Describe() string {
	return strings.Join([]string{t.RoomID, t.WindowStart.UTC().Format(time.RFC3339), t.WindowEnd.UTC().Format(time.RFC3339), t.RunID}, " ")
}
