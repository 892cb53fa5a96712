package jobloop

import (
	"context"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// With Prefetch > 0 a poller may receive for Prefetch more messages than
// there are free job slots and hold them until one frees, so a finished
// job's slot takes the next message at once instead of idling for a
// receive round trip (at concurrency 256, jobs of 200 ms and a 20 ms
// receive, about 87 % of slots were busy; see BenchmarkSlotOccupancy).
// A waiting message's lease runs from its receive: it is not heartbeated
// like a running job; instead, whenever half of the visibility SQS was
// last told has passed (counted from the receive or the last extension)
// with every slot still busy, the messages still waiting are extended by
// one visibility timeout, up to MaxHold, and a message that gets a slot
// starts with what is left of its lease, which the heartbeat then
// extends. Handing them back would spend a receive on each: during a
// dependency outage the slots hold jobs for minutes, and an outage must
// not push messages toward the DLQ. With MaxHold 0, or when an extension
// fails, the waiting messages are handed back once half their visibility
// has passed.

// waitJobSlot takes a job slot for the first of waiting, the messages of
// a received batch that have no slot yet, whose visibility ends at
// *leaseEnds (moved on by each extension); false when stop ends, the wait
// passes MaxHold, or keeping them invisible failed. The wait runs on the
// loop's clock.
func (l *Loop) waitJobSlot(stop context.Context, waiting []pipeline.Message, leaseEnds *time.Time) bool {
	if l.run == nil {
		return true
	}
	if l.run.TryAcquire(1) {
		return true
	}
	since := l.clk.Now()
	for {
		if l.acquireJobSlotBy(stop, leaseEnds.Add(-l.cfg.VisibilityTimeout/2)) {
			return true
		}
		if stop.Err() != nil || l.cfg.MaxHold == 0 || l.clk.Now().Sub(since) >= l.cfg.MaxHold {
			return false
		}
		ends, ok := l.extendWaiting(waiting)
		if !ok {
			return false
		}
		*leaseEnds = ends
	}
}

// acquireJobSlotBy waits for a job slot until the loop's clock reaches
// by, or stop ends; it reports whether it took one.
func (l *Loop) acquireJobSlotBy(stop context.Context, by time.Time) bool {
	ctx, cancel := context.WithCancel(stop)
	fired := l.clk.AfterFunc(by.Sub(l.clk.Now()), cancel)
	err := l.run.Acquire(ctx, 1)
	fired.Stop()
	cancel()
	return err == nil
}

// extendWaiting keeps prefetched messages invisible for another
// visibility timeout and returns when that ends, counted from the call;
// false when any extension failed (the caller hands them all back: a
// message whose extension failed may have a stale receipt, and handing
// back the rest keeps the rule simple).
func (l *Loop) extendWaiting(waiting []pipeline.Message) (time.Time, bool) {
	receipts := make([]string, len(waiting))
	for i, m := range waiting {
		receipts[i] = m.ReceiptHandle
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.CallTimeout)
	defer cancel()
	sent := l.clk.Now()
	err := l.q.ChangeVisibility(ctx, receipts, l.cfg.VisibilityTimeout)
	l.m.calls.WithLabelValues("prefetch_extend", outcome(err, len(waiting))).Inc()
	if err != nil {
		l.log.Warn("jobloop: could not keep prefetched messages invisible; handing them back", "messages", len(waiting), "err", err)
		return time.Time{}, false
	}
	return sent.Add(l.cfg.VisibilityTimeout), true
}

// releaseJobSlot gives a finished job's slot back.
func (l *Loop) releaseJobSlot() {
	if l.run != nil {
		l.run.Release(1)
	}
}
