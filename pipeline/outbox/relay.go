// Package outbox is the relay of the transactional outbox
// (pipeline.OutboxStore): it claims the rows that producers wrote in their
// own transactions, sends them to their queues in batches, and marks them
// sent once a queue accepted them. Relays on several pods run at once:
// a claim leases its rows, so they take distinct rows, and a relay killed
// mid-send leaves its rows to another once the lease ends. A message can
// therefore be sent twice (killed after the queue accepted it and before
// the mark), never lost; its consumer deduplicates by the event id.
//
// The relay never drops a row. A send that fails backs the row off
// (doubling from Config.RetryBase up to RetryMax); one the queue refuses
// for the message itself (a *pipeline.PermanentError) waits RetryMax at
// once, is counted and logged, and stays pending with its error until an
// operator deletes it (the stuck-outbox alert names it). Sent rows are
// deleted after Config.Retention.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/drain"
	"github.com/chatguard/chatguard/pipeline"
)

// Config is the relay's operator settings.
type Config struct {
	// Batch is the most rows one claim takes; they are sent in calls of
	// the queue's batch size (ten for SQS), several in flight.
	Batch int
	// Poll is the wait after a claim that found nothing due (a full
	// batch is followed by the next claim at once).
	Poll time.Duration
	// Lease is how long a claim keeps its rows from other relays: longer
	// than a send and its marks can take, or a slow send is sent twice.
	Lease time.Duration
	// SendTimeout bounds one batch's send, its retries included.
	SendTimeout time.Duration
	// RetryBase and RetryMax bound a failed row's backoff: RetryBase
	// after the first failure, doubling up to RetryMax.
	RetryBase, RetryMax time.Duration
	// Retention is how long a sent row is kept (for an operator to look
	// up what left, and when) before the purge deletes it.
	Retention time.Duration
	// Drain is the relay's drain deadline in its lifecycle group: after
	// the stop begins, what is due is sent within it, and what is left
	// waits for another relay.
	Drain time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Batch: 100, Poll: 250 * time.Millisecond, Lease: time.Minute, SendTimeout: 20 * time.Second,
		RetryBase: time.Second, RetryMax: time.Minute, Retention: 24 * time.Hour, Drain: 10 * time.Second}
}

// MaxBatch bounds Config.Batch.
const MaxBatch = 1000

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Batch < 1 || c.Batch > MaxBatch {
		errs = append(errs, fmt.Errorf("outbox batch must be 1 to %d", MaxBatch))
	}
	if c.Poll <= 0 {
		errs = append(errs, errors.New("outbox poll must be positive"))
	}
	if c.SendTimeout <= 0 {
		errs = append(errs, errors.New("outbox send timeout must be positive"))
	}
	if c.Lease < 2*c.SendTimeout {
		errs = append(errs, errors.New("outbox lease must be at least twice the send timeout, or a slow send is sent twice"))
	}
	if c.RetryBase <= 0 || c.RetryMax < c.RetryBase {
		errs = append(errs, errors.New("outbox retry base must be positive and at most the retry max"))
	}
	if c.Retention < time.Minute {
		errs = append(errs, errors.New("outbox retention must be at least a minute"))
	}
	if c.Drain <= 0 {
		errs = append(errs, errors.New("outbox drain must be positive"))
	}
	return errors.Join(errs...)
}

// The relay's housekeeping periods: the backlog gauges' refresh and the
// purge of sent rows.
const (
	backlogEvery = 15 * time.Second
	purgeEvery   = time.Minute
	purgeBatch   = 1000
	// StoreTimeout bounds one call to the store outside a send.
	StoreTimeout = 10 * time.Second
)

// Relay sends the outbox's rows to their queues. Build it with New; Run
// it once.
type Relay struct {
	cfg     Config
	store   pipeline.OutboxStore
	senders map[pipeline.OutboxDestination]pipeline.Sender
	dests   []pipeline.OutboxDestination
	clk     clock.Clock
	m       *Metrics
	log     *slog.Logger
	// failures counts consecutive store failures, for the relay's own
	// backoff.
	failures int
	// nextBacklog and nextPurge are when the housekeeping runs next.
	nextBacklog, nextPurge time.Time
	// followUps are the destinations' follow-ups (FollowUp).
	followUps map[pipeline.OutboxDestination]FollowUp
}

// FollowUp turns rows of one destination that its queue has just
// accepted, at now, into outbox messages (a protective action's published
// lake event): the relay enqueues them before it marks the rows sent, so
// that a row marked sent always has them; a failed enqueue leaves the
// rows unmarked, to be sent again after their lease (their queue's
// consumer collapses the copy by key, and the follow-up's ids, derived
// from the rows, keep its first messages). A row it cannot follow up is
// left out of its answer.
type FollowUp func(rows []pipeline.OutboxRow, now time.Time) []pipeline.OutboxMessage

// FollowUp registers f for the rows of d; call it before Run.
func (r *Relay) FollowUp(d pipeline.OutboxDestination, f FollowUp) {
	if r.followUps == nil {
		r.followUps = map[pipeline.OutboxDestination]FollowUp{}
	}
	r.followUps[d] = f
}

// New returns a relay of the rows of senders' destinations over store,
// timed on clk (nil: the wall clock). m and log may be nil.
func New(cfg Config, store pipeline.OutboxStore, senders map[pipeline.OutboxDestination]pipeline.Sender, clk clock.Clock, m *Metrics, log *slog.Logger) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	if store == nil || len(senders) == 0 {
		return nil, errors.New("outbox: a store and at least one sender are required")
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Relay{cfg: cfg, store: store, senders: senders, clk: clock.Or(clk), m: m, log: log}
	for d := range senders {
		r.dests = append(r.dests, d)
	}
	slices.Sort(r.dests)
	return r, nil
}

// Run relays until ctx ends, then drains: it sends what is due then,
// until nothing is or drain.Hard(ctx) ends (the group that runs it times
// the drain, Config.Drain), and returns nil. Rows it could not send stay pending for another
// relay (their lease, if any, runs out). Store and queue failures are
// counted, logged and backed off, never returned.
func (r *Relay) Run(ctx context.Context) error {
	hard := drain.Hard(ctx)
	for ctx.Err() == nil {
		r.housekeep(hard)
		full := r.pass(hard)
		if full && r.failures == 0 {
			continue
		}
		_ = clock.Sleep(ctx, r.clk, r.wait())
	}
	// The drain: what is due now is sent, batch after batch, until none
	// is left or the group's drain deadline cancels the hard context.
	for hard.Err() == nil && r.pass(hard) {
	}
	return nil
}

// wait is the pause before the next claim: Poll, or after store failures
// a backoff doubling from it up to RetryMax.
func (r *Relay) wait() time.Duration {
	if r.failures == 0 {
		return r.cfg.Poll
	}
	return backoff(r.cfg.Poll, r.cfg.RetryMax, r.failures)
}

// backoff is base doubled n-1 times, at most ceiling.
func backoff(base, ceiling time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}

// pass claims one batch and sends it; it reports whether the claim was
// full (more may be due at once).
func (r *Relay) pass(ctx context.Context) (full bool) {
	now := r.clk.Now()
	cctx, cancel := context.WithTimeout(ctx, StoreTimeout)
	rows, err := r.store.Claim(cctx, r.dests, now, r.cfg.Lease, r.cfg.Batch)
	cancel()
	if err != nil {
		r.storeFailed(ctx, "claim", err)
		return false
	}
	r.failures = 0
	if len(rows) == 0 {
		return false
	}
	by := map[pipeline.OutboxDestination][]pipeline.OutboxRow{}
	for _, row := range rows {
		by[row.Destination] = append(by[row.Destination], row)
	}
	for _, d := range r.dests {
		if len(by[d]) > 0 {
			r.send(ctx, d, by[d])
		}
	}
	return len(rows) == r.cfg.Batch
}

// storeFailed counts and logs a failed store call (one the stop cut short
// is not a failure).
func (r *Relay) storeFailed(ctx context.Context, op string, err error) {
	if ctx.Err() != nil {
		return
	}
	r.failures++
	r.m.storeErrors.WithLabelValues(op).Inc()
	r.log.Warn("outbox: store call failed", "op", op, "err", err.Error(), "failures", r.failures)
}
