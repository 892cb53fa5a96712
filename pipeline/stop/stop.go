// Package stop carries operator stop signals to in-flight reviews.
//
// Signals (pipeline.StopSignal) reach every worker pod through a
// pipeline.StopFeed (storage/redisstop) and land in a Holder: an
// in-process, TTL-bounded set that answers "is this job stopped?" with map
// lookups, so checking on every streamed chunk costs no network round
// trip. Jobs register with Watch so that a signal arriving while they run
// cancels them at once; Guard ties both to a review.
package stop

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

var _ pipeline.StopSink = (*Holder)(nil)

// Holder is the in-process set of live stop signals plus the registry of
// running jobs they can cancel. It is safe for concurrent use. Lookups are
// map reads under a read lock; expired signals are ignored at once and
// removed by Sweep, so memory stays bounded by the live signals.
type Holder struct {
	clk clock.Clock // decides which signals have expired

	// signals is copy-on-write: stops are rare and checks run on every
	// streamed chunk, so readers load a snapshot without any lock.
	signals atomic.Pointer[map[string]pipeline.StopSignal]

	mu       sync.Mutex                     // guards watchers and writers of signals
	watchers map[string]map[*watch]struct{} // by room id
	// OnApply, when set, is called (outside the lock) each time a signal
	// cancels a running job; the worker records metrics with it.
	onApply func(pipeline.StopSignal)
}

type watch struct {
	target pipeline.StopTarget
	cancel context.CancelCauseFunc
}

// NewHolder returns an empty holder on the clock c (nil: the wall
// clock); onApply may be nil.
func NewHolder(c clock.Clock, onApply func(pipeline.StopSignal)) *Holder {
	h := &Holder{clk: clock.Or(c), watchers: make(map[string]map[*watch]struct{}), onApply: onApply}
	empty := map[string]pipeline.StopSignal{}
	h.signals.Store(&empty)
	return h
}

// Add records s and cancels every watched job it matches. An expired
// signal is ignored. It reports whether s was live.
func (h *Holder) Add(s pipeline.StopSignal) bool {
	if !s.ExpiresAt.After(h.clk.Now()) {
		return false
	}
	var hit []*watch
	h.mu.Lock()
	cur := *h.signals.Load()
	if old, ok := cur[s.Key()]; !ok || !old.ExpiresAt.After(s.ExpiresAt) {
		next := make(map[string]pipeline.StopSignal, len(cur)+1)
		for k, v := range cur {
			next[k] = v
		}
		next[s.Key()] = s
		h.signals.Store(&next)
	}
	for w := range h.candidates(s) {
		if s.Matches(w.target) {
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
func (h *Holder) candidates(s pipeline.StopSignal) map[*watch]struct{} {
	if s.Scope != pipeline.StopScopeRun {
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

// Check returns the live signal that stops t, if any. It is three map
// lookups under a read lock: cheap enough for every streamed chunk.
func (h *Holder) Check(t pipeline.StopTarget) (pipeline.StopSignal, bool) {
	now := h.clk.Now()
	keys := t.Keys()
	signals := *h.signals.Load()
	if len(signals) == 0 {
		return pipeline.StopSignal{}, false
	}
	for _, k := range keys {
		if s, ok := signals[k]; ok && s.ExpiresAt.After(now) {
			return s, true
		}
	}
	return pipeline.StopSignal{}, false
}

// Watch registers a running job so that a signal arriving later cancels it
// with the signal's cause. If a live signal already matches, cancel is
// called at once. The returned function unregisters the job; call it when
// the job ends.
func (h *Holder) Watch(t pipeline.StopTarget, cancel context.CancelCauseFunc) (unwatch func()) {
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
	now := h.clk.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	cur := *h.signals.Load()
	next := make(map[string]pipeline.StopSignal, len(cur))
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
