package sqsjob

import "context"

// With Prefetch > 0 a poller may receive for Prefetch more messages than
// there are free job slots and hold them until one frees, so a finished
// job's slot takes the next message at once instead of idling for a
// receive round trip (issue 17: at concurrency 256, jobs of 200 ms and a
// 20 ms receive, about 87 % of slots were busy; see BenchmarkSlotOccupancy).
// A held message is not yet heartbeated, so the wait is bounded by half
// its visibility timeout; past that the rest of the batch is handed back.

// waitJobSlot takes a job slot for a received message; false when stop
// ends or the wait passes half the visibility timeout.
func (l *Loop) waitJobSlot(stop context.Context) bool {
	if l.run == nil {
		return true
	}
	if l.run.TryAcquire(1) {
		return true
	}
	ctx, cancel := context.WithTimeout(stop, l.cfg.VisibilityTimeout/2)
	defer cancel()
	return l.run.Acquire(ctx, 1) == nil
}

// releaseJobSlot gives a finished job's slot back.
func (l *Loop) releaseJobSlot() {
	if l.run != nil {
		l.run.Release(1)
	}
}
