package sqsjob

import (
	"context"

	"github.com/chatguard/chatguard/pipeline"
)

// With Prefetch > 0 a poller may receive for Prefetch more messages than
// there are free job slots and hold them until one frees, so a finished
// job's slot takes the next message at once instead of idling for a
// receive round trip (at concurrency 256, jobs of 200 ms and a
// 20 ms receive, about 87 % of slots were busy; see BenchmarkSlotOccupancy).
// A held message is not heartbeated like a running job; instead, each time
// every slot stays busy for half a visibility timeout the messages still
// waiting are extended by one visibility timeout, up to MaxHold. Handing
// them back would spend a receive on each: during a dependency outage the
// slots hold jobs for minutes, and an outage must not push messages
// toward the DLQ (an outage is not the message's fault). With MaxHold 0, or when an extension fails,
// the waiting messages are handed back after half a visibility timeout.

// waitJobSlot takes a job slot for the first of waiting, the messages of
// a received batch that have no slot yet; false when stop ends, the wait
// passes MaxHold, or keeping them invisible failed.
func (l *Loop) waitJobSlot(stop context.Context, waiting []pipeline.Message) bool {
	if l.run == nil {
		return true
	}
	if l.run.TryAcquire(1) {
		return true
	}
	since := l.now()
	for {
		ctx, cancel := context.WithTimeout(stop, l.cfg.VisibilityTimeout/2)
		err := l.run.Acquire(ctx, 1)
		cancel()
		if err == nil {
			return true
		}
		if stop.Err() != nil || l.cfg.MaxHold == 0 || l.now().Sub(since) >= l.cfg.MaxHold {
			return false
		}
		if !l.extendWaiting(waiting) {
			return false
		}
	}
}

// extendWaiting keeps prefetched messages invisible for another
// visibility timeout; false when any extension failed (the caller hands
// them all back: a message whose extension failed may have a stale
// receipt, and handing back the rest keeps the rule simple).
func (l *Loop) extendWaiting(waiting []pipeline.Message) bool {
	receipts := make([]string, len(waiting))
	for i, m := range waiting {
		receipts[i] = m.ReceiptHandle
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.CallTimeout)
	defer cancel()
	err := l.q.ChangeVisibility(ctx, receipts, l.cfg.VisibilityTimeout)
	l.m.calls.WithLabelValues("prefetch_extend", outcome(err, len(waiting))).Inc()
	if err != nil {
		l.log.Warn("sqsjob: could not keep prefetched messages invisible; handing them back", "messages", len(waiting), "err", err)
		return false
	}
	return true
}

// releaseJobSlot gives a finished job's slot back.
func (l *Loop) releaseJobSlot() {
	if l.run != nil {
		l.run.Release(1)
	}
}
