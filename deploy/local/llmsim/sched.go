package llmsim

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// errQueueFull is returned by acquire when the waiting queue is full.
var errQueueFull = errors.New("waiting queue is full")

// errClosed is returned by acquire when the server closes while waiting.
var errClosed = errors.New("server closed")

// scheduler admits requests like vLLM's scheduler: at most maxRunning run,
// the rest wait in FIFO order (or by priority, then arrival, under
// byPriority), at most maxWaiting of them. Limits can change
// at run time; a raised limit admits waiters at once.
type scheduler struct {
	mu         sync.Mutex
	maxRunning int
	maxWaiting int
	byPriority bool
	running    int
	waiting    list.List // of *waiter

	// Copies for metrics and stats, read without the lock.
	nRunning atomic.Int64
	nWaiting atomic.Int64
}

type waiter struct {
	// priority orders the queue under byPriority: lower is served first.
	priority int
	ready    chan struct{}
	granted  bool
	elem     *list.Element
}

func newScheduler(maxRunning, maxWaiting int, byPriority bool) *scheduler {
	return &scheduler{maxRunning: maxRunning, maxWaiting: maxWaiting, byPriority: byPriority}
}

// acquire takes a running slot, waiting for one while ctx and closed allow.
// It returns errQueueFull at once when the queue is full, ctx.Err() when the
// caller gives up and errClosed when the server closes. On success the
// caller must call release exactly once.
func (s *scheduler) acquire(ctx context.Context, closed <-chan struct{}, priority int) error {
	s.mu.Lock()
	if s.running < s.maxRunning && s.waiting.Len() == 0 {
		s.running++
		s.publish()
		s.mu.Unlock()
		return nil
	}
	if s.waiting.Len() >= s.maxWaiting {
		s.mu.Unlock()
		return errQueueFull
	}
	w := &waiter{priority: priority, ready: make(chan struct{})}
	w.elem = s.enqueue(w)
	s.publish()
	s.mu.Unlock()

	var err error
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-closed:
		err = errClosed
	}
	s.mu.Lock()
	if w.granted {
		// The slot arrived as we gave up: pass it on.
		s.mu.Unlock()
		s.release()
		return err
	}
	s.waiting.Remove(w.elem)
	s.publish()
	s.mu.Unlock()
	return err
}

// release returns a running slot, handing it to the longest waiter.
func (s *scheduler) release() {
	s.mu.Lock()
	s.running--
	s.admit()
	s.publish()
	s.mu.Unlock()
}

// enqueue puts w in the waiting queue: at the back, or under byPriority
// behind every waiter of the same or a lower priority value (ties keep
// arrival order). Callers hold mu.
func (s *scheduler) enqueue(w *waiter) *list.Element {
	if !s.byPriority {
		return s.waiting.PushBack(w)
	}
	for e := s.waiting.Back(); e != nil; e = e.Prev() {
		if e.Value.(*waiter).priority <= w.priority {
			return s.waiting.InsertAfter(w, e)
		}
	}
	return s.waiting.PushFront(w)
}

// setLimits changes the limits and the queue order; waiters beyond a
// lowered maxWaiting stay, and waiters queued before a change of order
// keep their places.
func (s *scheduler) setLimits(maxRunning, maxWaiting int, byPriority bool) {
	s.mu.Lock()
	s.maxRunning, s.maxWaiting, s.byPriority = maxRunning, maxWaiting, byPriority
	s.admit()
	s.publish()
	s.mu.Unlock()
}

// admit moves waiters to running while there is room. Callers hold mu.
func (s *scheduler) admit() {
	for s.running < s.maxRunning && s.waiting.Len() > 0 {
		w := s.waiting.Remove(s.waiting.Front()).(*waiter)
		w.granted = true
		close(w.ready)
		s.running++
	}
}

func (s *scheduler) publish() {
	s.nRunning.Store(int64(s.running))
	s.nWaiting.Store(int64(s.waiting.Len()))
}
