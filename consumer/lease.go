package consumer

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// lease is what the consumer knows of one held message's visibility.
type lease struct {
	receipt string
	// hiddenUntil is when the message's visibility runs out, as far as we
	// know: the extender renews it before then.
	hiddenUntil time.Time
}

// leases are the receipts and visibility of every message received and not
// yet deleted, by message id. Their lock guards only the map and its
// leases; the buffer holding the same messages has its own.
type leases struct {
	vis time.Duration

	mu   sync.Mutex
	held map[string]*lease
}

func newLeases(vis time.Duration) *leases {
	return &leases{vis: vis, held: map[string]*lease{}}
}

// hold records message id received at now with receipt. It reports true
// when the message was already held (a redelivery after its visibility ran
// out): then only the receipt, the newest and the one SQS honours, and the
// visibility are updated.
func (l *leases) hold(id, receipt string, now time.Time) (redelivered bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, dup := l.held[id]; dup {
		p.receipt = receipt
		p.hiddenUntil = now.Add(l.vis)
		return true
	}
	l.held[id] = &lease{receipt: receipt, hiddenUntil: now.Add(l.vis)}
	return false
}

// untried splits ids into those held with a receipt other than the one
// last tried (returned with that receipt) and the rest (stale).
func (l *leases) untried(ids []string, tried map[string]string) (try, receipts, stale []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		if p := l.held[id]; p != nil && p.receipt != tried[id] {
			try = append(try, id)
			receipts = append(receipts, p.receipt)
		} else {
			stale = append(stale, id) // failed with the receipt it still has
		}
	}
	return try, receipts, stale
}

// release forgets the messages of a batch.
func (l *leases) release(items []item) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, it := range items {
		delete(l.held, it.msgID)
	}
}

// expiring returns the receipts of messages whose visibility runs out
// within half a timeout of now, counting them hidden for a full timeout
// from now on.
func (l *leases) expiring(now time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var receipts []string
	for _, p := range l.held {
		if p.hiddenUntil.Sub(now) < l.vis/2 {
			receipts = append(receipts, p.receipt)
			p.hiddenUntil = now.Add(l.vis)
		}
	}
	return receipts
}

// receipts returns the receipt of every held message.
func (l *leases) receipts() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.held))
	for _, p := range l.held {
		out = append(out, p.receipt)
	}
	return out
}

// extendLoop keeps buffered messages hidden: each one whose visibility runs
// out within half a timeout is hidden for another full timeout.
func (c *Consumer) extendLoop(ctx context.Context) {
	every := min(max(c.cfg.VisibilityTimeout/6, 500*time.Millisecond), 30*time.Second)
	tick := c.clk.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
		}
		receipts := c.leases.expiring(c.clk.Now())
		if len(receipts) == 0 {
			continue
		}
		err := c.q.ChangeVisibility(ctx, receipts, c.cfg.VisibilityTimeout)
		failed := failedEntries(err, len(receipts))
		c.m.extended.Add(float64(len(receipts) - failed))
		if err != nil && ctx.Err() == nil {
			c.m.queueErrors.WithLabelValues("extend").Add(float64(failed))
			c.log.Warn("extend visibility", "messages", len(receipts), "failed", failed, "err", err)
		}
	}
}

// HandBackTimeout bounds Run's hand-back of the messages not written by
// the drain deadline: whoever keeps the deadline lets Run this much more.
const HandBackTimeout = 10 * time.Second

// handBack makes every message not yet deleted visible again so that it is
// redelivered at once rather than after its visibility timeout.
func (c *Consumer) handBack() error {
	receipts := c.leases.receipts()
	if len(receipts) == 0 {
		c.log.Info("consumer drained")
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), HandBackTimeout)
	defer cancel()
	if err := c.q.ChangeVisibility(ctx, receipts, 0); err != nil {
		failed := failedEntries(err, len(receipts))
		c.m.queueErrors.WithLabelValues("release").Add(float64(failed))
		c.log.Warn("hand back unwritten messages", "failed", failed, "err", err)
	}
	return fmt.Errorf("consumer: drain: %d messages not written in %s; handed back for redelivery", len(receipts), c.cfg.DrainTimeout)
}
