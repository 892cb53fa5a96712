// Package jobloop is the worker's job loop over a queue (pipeline.Inbox;
// storage/sqs in production, pipeline/queuetest.Fake in tests): it
// long-polls for only as many messages as it has free slots, runs each
// through a Handler with a whole-job deadline, keeps running jobs invisible
// with one heartbeat for all of them, and settles each message by what the
// handler decided: delete, back off (visibility grows with the receive
// count), copy to the DLQ with a reason and delete, or hand back at once.
// Batching and the retry of failed entries belong to the queue adapter. On
// shutdown it stops polling, drains in-flight jobs until its hard context
// (internal/drain) ends, then cancels the rest and makes their messages
// visible again.
package jobloop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/semaphore"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/drain"
	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
)

// Message is one received message as a Handler sees it.
type Message struct {
	ID            string
	ReceiptHandle string
	Body          []byte
	// ReceiveCount is ApproximateReceiveCount: 1 on the first delivery.
	ReceiveCount int
	// SentAt is when the message entered the queue (zero if unknown).
	SentAt time.Time
	// Final is true when this is the last delivery before the queue's
	// redrive moves the message to the DLQ.
	Final bool
	// Attributes are the message attributes it was sent with; its copy
	// to the DLQ keeps them (the trace context among them).
	Attributes map[string]pipeline.Attribute
}

// Action is how the loop settles a message after its job.
type Action int

// The actions a Handler can ask for.
const (
	// Delete the message: its outcome is committed.
	Delete Action = iota
	// Retry later: set the visibility to a backoff that grows with the
	// receive count (at least Outcome.After).
	Retry
	// Poison: copy the message to the DLQ with Outcome.Reason and delete it.
	Poison
	// Release: make the message visible again at once (shutdown).
	Release
	// Hold: a dependency the job needs (Outcome.Dep) is down. The loop
	// keeps the message invisible without spending its receive count,
	// waits until the dependency may be probed, and runs the job again;
	// without a health gate, or past Config.MaxHold, it is a Retry.
	Hold
	// Leave the message alone: the job's lease is lost (its review claim
	// was taken or could not be renewed), so its receipt may be stale and
	// another pod may hold the message. No delete and no visibility
	// change (handing it back would spend a receive count at once): it
	// returns when the visibility SQS was last told ends.
	Leave
)

// Outcome is a Handler's decision about one message. Label names the
// outcome in metrics and logs (done, duplicate, expired, failed, ...); it
// must come from a small fixed set.
type Outcome struct {
	Action Action
	Label  string
	After  time.Duration
	Reason string
	Err    error
	// Dep is the dependency that is down, for Hold.
	Dep pipeline.Dependency
}

// Handler runs one job. It must honour ctx: on a drain or job timeout its
// context is cancelled with ErrDraining or ErrJobTimeout as the cause. It
// is called concurrently.
type Handler interface {
	Handle(ctx context.Context, m Message) Outcome
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, m Message) Outcome

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, m Message) Outcome { return f(ctx, m) }

var (
	// ErrDraining is the cancellation cause of jobs still running when the
	// drain ends (the loop's hard context, see Run); their messages are
	// handed back with visibility 0.
	ErrDraining = errors.New("jobloop: shutting down: drain timeout reached")
	// ErrJobTimeout is the cancellation cause of a job that ran past the
	// job timeout; it is a retryable failure.
	ErrJobTimeout = errors.New("jobloop: job timeout")
	// ErrLeaseLost is the cancellation cause of a job whose visibility could
	// not be extended before the next heartbeat would come too late (or
	// whose review claim was lost): it is cancelled while its lease still
	// holds, so no model call starts after the lease ends, and its message
	// is left alone (no delete, no visibility change with a receipt that may
	// be stale); it returns when its visibility ends.
	ErrLeaseLost = errors.New("jobloop: lease lost: visibility could not be extended")
	// ErrHoldTimeout ends a hold that lasted Config.MaxHold.
	ErrHoldTimeout = errors.New("jobloop: held too long for a dependency that is down")
)

// Health is what the loop needs of the dependencies' health state
// (pipeline/health.Monitor implements it).
type Health interface {
	// WaitNotOpen blocks until no dependency's breaker is open, or ctx
	// ends with its cause: the loop receives only then.
	WaitNotOpen(ctx context.Context) error
	// WaitProbe blocks until d may be called again (closed, or half-open
	// with no probe in flight), or ctx ends with its cause.
	WaitProbe(ctx context.Context, d pipeline.Dependency) error
}

// HoldOn makes the loop dependency-aware: it stops receiving while h has a
// dependency down and holds the jobs that failed because of it (see Hold).
// Call it before Run.
func (l *Loop) HoldOn(h Health) { l.health = h }

// DLQ message attributes set on poison messages.
const (
	AttrErrorReason     = "chatguard_error_reason"
	AttrSourceMessageID = "chatguard_source_message_id"
	AttrReceiveCount    = "chatguard_receive_count"
)

// Config configures a Loop. The queues themselves (their URLs, batching
// and retries) are the queue adapters' configuration.
type Config struct {
	// Concurrency bounds jobs in flight, and so messages held.
	Concurrency int
	// Pollers is how many receive calls may be in flight at once, each
	// asking only for slots it holds; zero picks concurrency/10, at least
	// one and at most eight. One poller caps throughput at ten messages per
	// round trip, and SQS often returns fewer than asked.
	Pollers int
	// Prefetch is how many messages may be received ahead of free slots
	// and held until one frees (prefetch.go); 0 receives only for free
	// slots, so each slot idles a receive round trip between jobs.
	Prefetch int
	// WaitTime is the long-poll wait (SQS allows at most 20 s).
	WaitTime time.Duration
	// VisibilityTimeout is asked for on receive and renewed by heartbeats.
	VisibilityTimeout time.Duration
	// HeartbeatInterval is how often the heartbeat looks for jobs whose
	// visibility ends within two intervals; at most a third of
	// VisibilityTimeout.
	HeartbeatInterval time.Duration
	// JobTimeout bounds one job, heartbeats included.
	JobTimeout time.Duration
	// DrainTimeout bounds how long shutdown waits for in-flight jobs. The
	// loop does not time it: whoever runs the loop does, by cancelling
	// drain.Hard of Run's ctx when it passes (cmd/worker's lifecycle
	// group, whose Drain for the loop is this), so that a binary has one
	// drain timer.
	DrainTimeout time.Duration
	// RetryBase and RetryMax shape the backoff of failed attempts:
	// full jitter over min(RetryMax, RetryBase*2^(receiveCount-1)).
	RetryBase, RetryMax time.Duration
	// MaxReceiveCount is the queue's redrive maxReceiveCount.
	MaxReceiveCount int
	// CallTimeout bounds each settle (delete, visibility, DLQ send), the
	// adapter's retries included.
	CallTimeout time.Duration
	// MaxHold bounds how long a job is held for a dependency that is down
	// (see Hold) before its message is retried as an ordinary failure.
	MaxHold time.Duration
}

// DefaultConfig returns the defaults; the queue URLs must still be set.
func DefaultConfig() Config {
	return Config{
		Concurrency: 16, WaitTime: 20 * time.Second, VisibilityTimeout: 60 * time.Second,
		HeartbeatInterval: 15 * time.Second, JobTimeout: 10 * time.Minute, DrainTimeout: 25 * time.Second,
		RetryBase: 5 * time.Second, RetryMax: 5 * time.Minute, MaxReceiveCount: 5,
		CallTimeout: 10 * time.Second, MaxHold: time.Hour,
	}
}

// maxVisibility is SQS's ceiling on a message's visibility timeout.
const maxVisibility = 12 * time.Hour

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Concurrency < 1 || c.Concurrency > 10000 {
		errs = append(errs, fmt.Errorf("concurrency %d must be in 1..10000", c.Concurrency))
	}
	if c.Pollers < 0 || c.Pollers > 64 {
		errs = append(errs, fmt.Errorf("pollers %d must be in 0..64", c.Pollers))
	}
	if c.Prefetch < 0 || c.Prefetch > c.Concurrency {
		errs = append(errs, fmt.Errorf("prefetch %d must be in 0..concurrency", c.Prefetch))
	}
	if c.WaitTime < 0 || c.WaitTime > 20*time.Second {
		errs = append(errs, fmt.Errorf("wait time %s must be in 0..20s", c.WaitTime))
	}
	if c.VisibilityTimeout < time.Second || c.VisibilityTimeout > maxVisibility {
		errs = append(errs, fmt.Errorf("visibility timeout %s must be in 1s..12h", c.VisibilityTimeout))
	}
	if c.HeartbeatInterval <= 0 || 3*c.HeartbeatInterval > c.VisibilityTimeout {
		errs = append(errs, fmt.Errorf("heartbeat interval %s must be positive and at most a third of the visibility timeout %s", c.HeartbeatInterval, c.VisibilityTimeout))
	}
	if c.JobTimeout <= 0 || c.JobTimeout > maxVisibility {
		errs = append(errs, fmt.Errorf("job timeout %s must be in (0, 12h]", c.JobTimeout))
	}
	if c.DrainTimeout <= 0 {
		errs = append(errs, errors.New("drain timeout must be positive"))
	}
	if c.RetryBase <= 0 || c.RetryMax < c.RetryBase || c.RetryMax > maxVisibility {
		errs = append(errs, fmt.Errorf("retry base %s and max %s must satisfy 0 < base <= max <= 12h", c.RetryBase, c.RetryMax))
	}
	if c.MaxReceiveCount < 1 {
		errs = append(errs, errors.New("max receive count must be at least 1"))
	}
	if c.CallTimeout <= 0 {
		errs = append(errs, errors.New("call timeout must be positive"))
	}
	if c.MaxHold < 0 || c.MaxHold > maxVisibility {
		errs = append(errs, fmt.Errorf("max hold %s must be in 0..12h", c.MaxHold))
	}
	return errors.Join(errs...)
}

// receiveBackoff spaces polls after failed receives.
var receiveBackoff = retry.Policy{Initial: 200 * time.Millisecond, Max: 10 * time.Second}

// Loop is the job loop. Create it with New and call Run once.
type Loop struct {
	cfg  Config
	q    pipeline.Inbox
	dlq  pipeline.Sender
	h    Handler
	m    *Metrics
	log  *slog.Logger
	sem  *slotPool           // message slots of every queue's pollers (slots.go)
	run  *semaphore.Weighted // job slots when Prefetch > 0 (sem then also counts held messages)
	jobs sync.WaitGroup
	hb   *heartbeat

	// clk times leases, job and hold deadlines, the heartbeat, a
	// prefetched message's wait for a slot and the backoff
	// between failed polls; tests pass a fake they move by hand. Queue
	// calls keep real-time bounds (CallTimeout): they wait on another
	// machine.
	clk clock.Clock

	mu       sync.Mutex
	draining bool

	health Health
}

// New returns a loop over q on clk (nil: the wall clock), copying poison
// messages to dlq; metrics may be nil (then they are not exported) and log
// may be nil (then nothing is logged). It fails only on an invalid cfg.
func New(cfg Config, q pipeline.Inbox, dlq pipeline.Sender, h Handler, clk clock.Clock, m *Metrics, log *slog.Logger) (*Loop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("jobloop: %w", err)
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Loop{cfg: cfg, q: q, dlq: dlq, h: h, clk: clock.Or(clk), m: m, log: log, sem: newSlotPool(int64(cfg.Concurrency + cfg.Prefetch))}
	if cfg.Prefetch > 0 {
		l.run = semaphore.NewWeighted(int64(cfg.Concurrency))
	}
	l.hb = newHeartbeat(l)
	return l, nil
}

// Draining reports whether Run has stopped polling to shut down.
func (l *Loop) Draining() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.draining
}

// Run polls until ctx is cancelled, then drains: it stops polling, lets
// in-flight jobs run until drain.Hard(ctx) ends (the drain deadline, kept
// by whoever runs the loop: cmd/worker's lifecycle group, from
// DrainTimeout), cancels the rest with ErrDraining (their messages become
// visible at once) and returns nil once every job has settled. Without a
// hard context (drain.WithHard) ctx is its own, so there is no drain: the
// jobs are cancelled and handed back as soon as ctx is. Receive errors
// are retried with backoff, never returned.
//
// The long poll in flight at shutdown is not cut short but allowed to end
// (until the hard context ends): a poll abandoned by its client can still
// take messages on the server, including the ones handed back here, and
// hide them for a whole visibility timeout. Messages it returns after
// shutdown began are handed back at once. Keep the drain timeout above
// the wait time.
func (l *Loop) Run(ctx context.Context) error {
	jobBase, cancelJobs := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelJobs(nil)
	pollCtx, cancelPoll := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelPoll()
	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	var bg sync.WaitGroup
	bg.Go(func() { l.hb.run(hbCtx) })

	pollers := l.cfg.Pollers
	if pollers == 0 {
		pollers = min(max(l.cfg.Concurrency/10, 1), 8)
	}
	var pollWG sync.WaitGroup
	lanes := l.lanes()
	for _, ln := range lanes {
		l.m.initQueue(ln.name)
		for range lanePollers(ln, len(lanes), pollers) {
			pollWG.Add(1)
			go func() { defer pollWG.Done(); l.poll(ctx, pollCtx, jobBase, ln) }()
		}
	}
	pollDone := make(chan struct{})
	go func() { pollWG.Wait(); close(pollDone) }()
	<-ctx.Done()

	l.mu.Lock()
	l.draining = true
	l.mu.Unlock()
	l.log.Info("jobloop: draining", "inflight", l.hb.size())
	done := make(chan struct{})
	go func() { <-pollDone; l.jobs.Wait(); close(done) }()
	hard := drain.Hard(ctx)
	select {
	case <-done:
	case <-hard.Done():
		l.log.Warn("jobloop: drain deadline reached, handing back unfinished jobs", "inflight", l.hb.size(), "cause", context.Cause(hard).Error())
		// The polls first, so that they are over before messages are handed back.
		cancelPoll()
		<-pollDone
		cancelJobs(ErrDraining)
		// Handlers honour ctx; settle calls have their own timeouts.
		<-done
	}
	stopHB()
	bg.Wait()
	return nil
}

// poll receives from ln's queue until stop ends, only ever holding as
// many messages as there are free slots. Calls run under callCtx, which
// outlives stop. A failed receive backs off this poller alone: the other
// queue's pollers keep receiving.
func (l *Loop) poll(stop, callCtx, jobBase context.Context, ln lane) {
	failures := 0
	for stop.Err() == nil {
		if l.health != nil && l.health.WaitNotOpen(stop) != nil {
			return
		}
		if err := l.sem.Acquire(stop, ln.first); err != nil {
			return
		}
		n := 1
		for n < 10 && l.sem.TryAcquire() {
			n++
		}
		msgs, err := l.receive(callCtx, ln, n)
		// SQS hid the messages for the visibility timeout as it handed
		// them out: their lease runs from here, not from when a slot
		// frees for them. Not from the call's start: a long poll may
		// wait up to WaitTime before messages arrive, while the answer's
		// way back is small against the heartbeat's two-interval margin.
		ends := l.clk.Now().Add(l.cfg.VisibilityTimeout)
		if len(msgs) < n {
			l.sem.Release(int64(n - len(msgs)))
		}
		if stop.Err() != nil {
			l.handBack(msgs)
			return
		}
		if err != nil {
			if callCtx.Err() != nil {
				return
			}
			failures++
			wait := receiveBackoff.Delay(failures)
			l.log.Warn("jobloop: receive failed", "queue", ln.name, "err", err, "retry_in", wait.String())
			if clock.Sleep(stop, l.clk, wait) != nil {
				return
			}
			continue
		}
		failures = 0
		for i, sm := range msgs {
			if !l.waitJobSlot(stop, msgs[i:], &ends) {
				l.handBack(msgs[i:])
				break
			}
			l.start(stop, jobBase, sm, ends)
		}
	}
}

// handBack makes messages received during shutdown visible again at once.
func (l *Loop) handBack(msgs []pipeline.Message) {
	if len(msgs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.CallTimeout)
	defer cancel()
	receipts := make([]string, len(msgs))
	for i, m := range msgs {
		receipts[i] = m.ReceiptHandle
	}
	err := l.q.ChangeVisibility(ctx, receipts, 0)
	l.m.calls.WithLabelValues("change_visibility", outcome(err, len(msgs))).Inc()
	for i, err := range pipeline.EntryErrors(err, len(msgs)) {
		if err != nil {
			l.log.Warn("jobloop: hand back failed; the message returns when its visibility ends", "message_id", msgs[i].ID, "err", err)
		}
		l.m.jobs.WithLabelValues("released").Inc()
		l.sem.Release(1)
	}
}

// receive long-polls ln's queue for up to n messages, marking a first
// queue's receipts for settling.
func (l *Loop) receive(ctx context.Context, ln lane, n int) ([]pipeline.Message, error) {
	start := l.clk.Now()
	defer func() { l.m.callTime.WithLabelValues("receive").Observe(l.clk.Since(start).Seconds()) }()
	msgs, err := ln.q.Receive(ctx, pipeline.ReceiveRequest{Max: n, Wait: l.cfg.WaitTime, Visibility: l.cfg.VisibilityTimeout})
	if err != nil {
		if ctx.Err() == nil {
			l.m.calls.WithLabelValues("receive", "error").Inc()
			l.m.receives.WithLabelValues(ln.name, "error").Inc()
		}
		return nil, fmt.Errorf("jobloop: %s: %w", ln.name, err)
	}
	if ln.first {
		markFirst(msgs)
	}
	if len(msgs) == 0 {
		l.m.receives.WithLabelValues(ln.name, "empty").Inc()
	} else {
		l.m.receives.WithLabelValues(ln.name, "messages").Inc()
	}
	l.m.calls.WithLabelValues("receive", "ok").Inc()
	l.m.received.Add(float64(len(msgs)))
	return msgs, nil
}

// outcome labels a queue call over n entries: ok, partial or error.
func outcome(err error, n int) string {
	if err == nil {
		return "ok"
	}
	failed := 0
	for _, e := range pipeline.EntryErrors(err, n) {
		if e != nil {
			failed++
		}
	}
	if failed < n {
		return "partial"
	}
	return "error"
}

// job is one in-flight message. mu orders the heartbeat's extensions
// before the job's own final visibility change, so that a heartbeat cannot
// undo a backoff or a hand-back.
type job struct {
	msg   Message
	mu    sync.Mutex
	ended bool
	// deadline is when the visibility SQS was last told ends, counted
	// from the call that told it (the receive or the last extension);
	// guarded by the heartbeat's lock.
	deadline time.Time
	// lose cancels the job with ErrLeaseLost; set before the heartbeat
	// sees the job.
	lose context.CancelCauseFunc
}

// start runs a received message's job; leaseEnds is when its visibility
// ends, as SQS was last told.
func (l *Loop) start(stop, jobBase context.Context, pm pipeline.Message, leaseEnds time.Time) {
	m := toMessage(pm, l.cfg.MaxReceiveCount)
	j := &job{msg: m, deadline: leaseEnds}
	if !m.SentAt.IsZero() {
		l.m.messageAge.Observe(max(l.clk.Now().Sub(m.SentAt), 0).Seconds())
	}
	// The job continues the trace of the span that sent the message
	// (pipeline.TraceParentAttribute); the handler's spans are its
	// children.
	spanCtx, span := tracer.Start(pipeline.ContextWithTrace(jobBase, pm.Attributes), "job", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("messaging.system", "aws_sqs"), attribute.String("messaging.operation.type", "process"),
			attribute.Int("messaging.message.delivery_count", m.ReceiveCount)))
	leaseCtx, lose := context.WithCancelCause(spanCtx)
	j.lose = lose
	l.hb.add(j)
	l.m.inflight.Inc()
	l.jobs.Add(1)
	go func() {
		defer l.jobs.Done()
		defer l.sem.Release(1)
		defer l.releaseJobSlot()
		defer l.m.inflight.Dec()
		defer lose(nil)
		start := l.clk.Now()
		out := l.runHeld(stop, leaseCtx, m)
		drained := errors.Is(context.Cause(leaseCtx), ErrDraining)
		if drained && out.Action == Retry {
			out.Action, out.Label = Release, "released"
		}
		l.hb.remove(j)
		if out.Action == Leave || errors.Is(context.Cause(leaseCtx), ErrLeaseLost) {
			// The receipt may be stale and another pod may hold the
			// message: touch nothing, whatever the handler decided.
			out.Label = "lease_lost"
		} else {
			t := l.clk.Now()
			l.settle(j, out)
			l.m.phase.WithLabelValues("settle").Observe(l.clk.Now().Sub(t).Seconds())
		}
		l.m.jobs.WithLabelValues(out.Label).Inc()
		l.m.duration.Observe(l.clk.Now().Sub(start).Seconds())
		endJobSpan(span, out)
		attrs := []any{"message_id", m.ID, "receive_count", m.ReceiveCount, "outcome", out.Label, "duration_ms", l.clk.Now().Sub(start).Milliseconds()}
		if out.Err != nil {
			attrs = append(attrs, "err", out.Err.Error())
		}
		l.log.Debug("jobloop: settled", attrs...)
	}()
}

// runHeld runs the job, each attempt under its own job timeout, holding it
// while a dependency it needs is down: the message stays invisible (the
// heartbeat extends it) and its receive count unspent, and the job runs
// again once the dependency may be probed. A hold ends as a Retry past
// MaxHold, and as a Release when shutdown begins.
func (l *Loop) runHeld(stop, leaseCtx context.Context, m Message) Outcome {
	var heldSince time.Time
	for {
		ctx, cancel := withTimeoutCause(leaseCtx, l.clk, l.cfg.JobTimeout, ErrJobTimeout)
		out := l.handle(ctx, m)
		cancel()
		if out.Action != Hold {
			return out
		}
		if l.health == nil {
			out.Action = Retry
			return out
		}
		if heldSince.IsZero() {
			heldSince = l.clk.Now()
			l.m.held.Inc()
			defer l.m.held.Dec()
		}
		hctx, hcancel := withTimeoutCause(leaseCtx, l.clk, max(l.cfg.MaxHold-l.clk.Since(heldSince), 0), ErrHoldTimeout)
		unstop := context.AfterFunc(stop, func() { hcancel() })
		err := l.health.WaitProbe(hctx, out.Dep)
		unstop()
		hcancel()
		switch {
		case err == nil:
			l.m.holdRetries.Inc()
			continue
		case errors.Is(context.Cause(leaseCtx), ErrLeaseLost):
			return out
		case stop.Err() != nil || errors.Is(context.Cause(leaseCtx), ErrDraining):
			return Outcome{Action: Release, Label: "released", Err: out.Err}
		default: // held too long: an ordinary failed attempt
			return Outcome{Action: Retry, Label: "hold_timeout", Err: fmt.Errorf("%w: %w", ErrHoldTimeout, out.Err)}
		}
	}
}

// handle runs the handler, turning a panic into a failed attempt.
func (l *Loop) handle(ctx context.Context, m Message) (out Outcome) {
	defer func() {
		if r := recover(); r != nil {
			l.m.panics.Inc()
			l.log.Error("jobloop: job panicked", "message_id", m.ID, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			out = Outcome{Action: Retry, Label: "panic", Err: fmt.Errorf("jobloop: job panicked: %v", r)}
		}
	}()
	out = l.h.Handle(ctx, m)
	if out.Label == "" {
		out.Label = [...]string{"deleted", "retry", "poison", "released", "held", "lease_lost"}[out.Action]
	}
	return out
}

// settle applies the outcome to the message. Every call has its own
// bounded context: the job's may already be cancelled.
func (l *Loop) settle(j *job, out Outcome) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.CallTimeout)
	defer cancel()
	m := j.msg
	switch out.Action {
	case Delete:
		if err := l.delete(ctx, m); err != nil {
			l.log.Warn("jobloop: delete failed; the message will be redelivered and acknowledged as a duplicate", "message_id", m.ID, "err", err)
		}
	case Poison:
		if err := l.toDLQ(ctx, m, out.Reason); err != nil {
			l.log.Error("jobloop: copy to dlq failed; retrying later", "message_id", m.ID, "err", err)
			l.setVisibility(ctx, m, l.retryDelay(m.ReceiveCount, 0))
			return
		}
		l.m.poison.Inc()
		if err := l.delete(ctx, m); err != nil {
			l.log.Warn("jobloop: delete after dlq copy failed", "message_id", m.ID, "err", err)
		}
	case Retry:
		l.setVisibility(ctx, m, l.retryDelay(m.ReceiveCount, out.After))
	case Release:
		l.setVisibility(ctx, m, 0)
	}
}

// retryDelay is full jitter over min(RetryMax, RetryBase*2^(n-1)), at
// least after, at most the SQS ceiling.
func (l *Loop) retryDelay(receiveCount int, after time.Duration) time.Duration {
	d := retry.Policy{Initial: l.cfg.RetryBase, Max: l.cfg.RetryMax}.Delay(receiveCount)
	return min(max(d, after), maxVisibility)
}

// delete deletes the message; the queue adapter batches it with other
// jobs' deletes and retries it.
func (l *Loop) delete(ctx context.Context, m Message) error {
	start := l.clk.Now()
	err := l.q.Delete(ctx, []string{m.ReceiptHandle})
	l.m.callTime.WithLabelValues("delete").Observe(l.clk.Since(start).Seconds())
	l.m.calls.WithLabelValues("delete", outcome(err, 1)).Inc()
	if err != nil {
		return fmt.Errorf("jobloop: delete: %w", err)
	}
	l.m.deleted.Inc()
	return nil
}

func (l *Loop) setVisibility(ctx context.Context, m Message, d time.Duration) {
	err := l.q.ChangeVisibility(ctx, []string{m.ReceiptHandle}, d)
	l.m.calls.WithLabelValues("change_visibility", outcome(err, 1)).Inc()
	if err != nil {
		l.log.Warn("jobloop: change visibility failed; the message returns when its visibility ends", "message_id", m.ID, "err", err)
	}
}

func (l *Loop) toDLQ(ctx context.Context, m Message, reason string) error {
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	if reason == "" {
		reason = "unknown"
	}
	err := l.dlq.Send(ctx, []pipeline.OutMessage{{Body: m.Body, Attributes: pipeline.DeadLetterAttributes(m.Attributes, map[string]pipeline.Attribute{
		AttrErrorReason:     pipeline.StringAttribute(reason),
		AttrSourceMessageID: pipeline.StringAttribute(m.ID),
		AttrReceiveCount:    pipeline.NumberAttribute(int64(m.ReceiveCount)),
	})}})
	l.m.calls.WithLabelValues("send_dlq", outcome(err, 1)).Inc()
	if err != nil {
		return fmt.Errorf("jobloop: send to dlq: %w", err)
	}
	return nil
}

// tracer names the loop's spans.
var tracer = otel.Tracer("github.com/chatguard/chatguard/pipeline/jobloop")

// endJobSpan records how the job was settled and ends its span. A failed
// attempt's error.type is its outcome label, one of a fixed set: an
// error's text may quote a chat or name a room.
func endJobSpan(span trace.Span, out Outcome) {
	span.SetAttributes(attribute.String("chatguard.job.outcome", out.Label))
	if out.Err != nil && out.Action != Delete {
		span.SetStatus(codes.Error, out.Label)
		span.SetAttributes(attribute.String("error.type", out.Label))
	}
	span.End()
}

func toMessage(pm pipeline.Message, maxReceive int) Message {
	m := Message{ID: pm.ID, ReceiptHandle: pm.ReceiptHandle, Body: pm.Body, ReceiveCount: max(pm.ReceiveCount, 1), SentAt: pm.SentAt, Attributes: pm.Attributes}
	m.Final = m.ReceiveCount >= maxReceive
	return m
}

// withTimeoutCause is context.WithTimeoutCause on c: the context ends with
// cause once c has moved on by d. On the wall clock it is the standard
// library's (its Deadline reported); on another clock it ends when that
// clock reaches the time.
func withTimeoutCause(parent context.Context, c clock.Clock, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	if c == clock.Real() {
		return context.WithTimeoutCause(parent, d, cause)
	}
	ctx, cancel := context.WithCancelCause(parent)
	t := c.AfterFunc(d, func() { cancel(cause) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}
