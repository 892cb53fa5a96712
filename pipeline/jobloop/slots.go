package jobloop

import (
	"context"
	"sync"
)

// slotPool is the loop's pool of message slots (jobs in flight plus
// prefetched messages), shared by the pollers of every queue. It is a
// counting semaphore with two classes of waiters: a freed slot goes to a
// waiting poller of a first queue (review-realtime) before any other, so a
// batch backlog that keeps every slot busy never makes real time wait
// behind it for more than one job. Within a class waiters are served in
// order.
type slotPool struct {
	mu      sync.Mutex
	free    int64
	waiters [2][]chan struct{} // [0]: first queues' pollers, [1]: the rest
}

func newSlotPool(n int64) *slotPool { return &slotPool{free: n} }

func class(first bool) int {
	if first {
		return 0
	}
	return 1
}

// Acquire takes one slot, waiting until one frees or ctx ends (its error
// then).
func (p *slotPool) Acquire(ctx context.Context, first bool) error {
	c := class(first)
	p.mu.Lock()
	if p.free > 0 && len(p.waiters[0]) == 0 && (c == 0 || len(p.waiters[1]) == 0) {
		p.free--
		p.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	p.waiters[c] = append(p.waiters[c], ready)
	p.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-ready: // granted while we gave up: hand it on
		p.free++
		p.grant()
	default:
		for i, w := range p.waiters[c] {
			if w == ready {
				p.waiters[c] = append(p.waiters[c][:i], p.waiters[c][i+1:]...)
				break
			}
		}
	}
	return ctx.Err()
}

// TryAcquire takes one slot if one is free and nobody waits for it.
func (p *slotPool) TryAcquire() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.free > 0 && len(p.waiters[0]) == 0 && len(p.waiters[1]) == 0 {
		p.free--
		return true
	}
	return false
}

// Release gives n slots back, first to the waiters of first queues.
func (p *slotPool) Release(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free += n
	p.grant()
}

// grant hands free slots to waiters, first class first; p.mu is held.
func (p *slotPool) grant() {
	for c := range p.waiters {
		for p.free > 0 && len(p.waiters[c]) > 0 {
			close(p.waiters[c][0])
			p.waiters[c] = p.waiters[c][1:]
			p.free--
		}
	}
}
