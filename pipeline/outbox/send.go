package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// send sends rows of one destination in one Send call (the sender splits
// it into the queue's batch calls) and marks each row by its result. The
// marks run under their own bound, so that rows a queue accepted just
// before the stop are still marked.
func (r *Relay) send(ctx context.Context, d pipeline.OutboxDestination, rows []pipeline.OutboxRow) {
	msgs := make([]pipeline.OutboxMessage, len(rows))
	out := make([]pipeline.OutMessage, len(rows))
	for i, row := range rows {
		msgs[i] = row.OutboxMessage
		out[i] = pipeline.OutMessage{Body: row.Body, Attributes: row.Attributes}
	}
	sctx, cancel := context.WithTimeout(ctx, r.cfg.SendTimeout)
	errs := pipeline.EntryErrors(r.senders[d].Send(sctx, out), len(out))
	cancel()
	now := r.clk.Now()
	var sent []int64
	var accepted []pipeline.OutboxRow
	var failed []pipeline.OutboxFailure
	for i, row := range rows {
		if errs[i] == nil {
			sent, accepted = append(sent, row.ID), append(accepted, row)
			continue
		}
		failed = append(failed, r.failure(d, row, errs[i], now))
	}
	mctx, mcancel := context.WithTimeout(context.WithoutCancel(ctx), StoreTimeout)
	defer mcancel()
	if len(sent) > 0 {
		r.m.sent.WithLabelValues(string(d)).Add(float64(len(sent)))
		if !r.followUp(mctx, d, accepted, now) {
			sent = nil
		}
	}
	if len(sent) > 0 {
		// A row the queue accepted and whose mark fails is sent again
		// after its lease: a duplicate the consumer collapses.
		if err := r.store.MarkSent(mctx, now, sent); err != nil {
			r.storeFailed(mctx, "mark_sent", err)
		}
	}
	if len(failed) > 0 {
		if err := r.store.MarkFailed(mctx, failed); err != nil {
			r.storeFailed(mctx, "mark_failed", err)
		}
	}
}

// followUp enqueues the follow-up messages of d's accepted rows; false
// when it could not (the rows must stay unmarked).
func (r *Relay) followUp(ctx context.Context, d pipeline.OutboxDestination, accepted []pipeline.OutboxRow, now time.Time) bool {
	f := r.followUps[d]
	if f == nil {
		return true
	}
	msgs := f(accepted, now)
	if len(msgs) == 0 {
		return true
	}
	if err := r.store.Enqueue(ctx, now, msgs); err != nil {
		r.storeFailed(ctx, "follow_up", err)
		return false
	}
	return true
}

// failure is a row's failed send: counted, its backoff chosen, and, for a
// message the queue refuses for itself, logged (its event id and error,
// never its body).
func (r *Relay) failure(d pipeline.OutboxDestination, row pipeline.OutboxRow, err error, now time.Time) pipeline.OutboxFailure {
	var pe *pipeline.PermanentError
	reason, wait := "retryable", backoff(r.cfg.RetryBase, r.cfg.RetryMax, row.Attempts)
	if errors.As(err, &pe) {
		reason, wait = "permanent", r.cfg.RetryMax
		r.log.Error("outbox: queue refused a message; it stays pending until an operator deletes it",
			"destination", string(d), "event_id", row.EventID, "row_id", row.ID, "attempts", row.Attempts, "err", err.Error())
	}
	r.m.failed.WithLabelValues(string(d), reason).Inc()
	return pipeline.OutboxFailure{ID: row.ID, RetryAt: now.Add(wait), Error: err.Error()}
}

// housekeep refreshes the backlog gauges and purges old sent rows when
// their periods are due; failures are counted and left for the next turn.
func (r *Relay) housekeep(ctx context.Context) {
	now := r.clk.Now()
	if !now.Before(r.nextBacklog) {
		r.nextBacklog = now.Add(backlogEvery)
		r.refreshBacklog(ctx, now)
	}
	if !now.Before(r.nextPurge) {
		r.nextPurge = now.Add(purgeEvery)
		cctx, cancel := context.WithTimeout(ctx, StoreTimeout)
		defer cancel()
		n, err := r.store.PurgeSent(cctx, now.Add(-r.cfg.Retention), purgeBatch)
		if err != nil {
			r.m.storeErrors.WithLabelValues("purge").Inc()
			r.log.Warn("outbox: purge failed", "err", err.Error())
			return
		}
		r.m.purged.Add(float64(n))
	}
}

// refreshBacklog sets the pending and oldest-age gauges of every
// destination this relay sends, from the store.
func (r *Relay) refreshBacklog(ctx context.Context, now time.Time) {
	cctx, cancel := context.WithTimeout(ctx, StoreTimeout)
	defer cancel()
	b, err := r.store.Backlog(cctx)
	if err != nil {
		r.m.storeErrors.WithLabelValues("backlog").Inc()
		r.log.Warn("outbox: backlog read failed", "err", err.Error())
		return
	}
	for _, d := range r.dests {
		bl := b[d]
		age := 0.0
		if bl.Pending > 0 {
			age = max(now.Sub(bl.Oldest), 0).Seconds()
		}
		r.m.pending.WithLabelValues(string(d)).Set(float64(bl.Pending))
		r.m.oldest.WithLabelValues(string(d)).Set(age)
	}
}
