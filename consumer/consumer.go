// Package consumer drains the "feedback" queue into the lake. It long-polls
// the queue, decodes each message (pipeline.DecodeLakeEvent), buffers events
// per partition (event type and hour of occurred_at) and writes a partition
// as one object through a pipeline.LakeWriter (storage/s3lake: Parquet on
// S3) when it reaches a size, a row count or an age. Invalid messages are
// buffered the same way and written to the errors partition. A message is
// deleted only after the object holding it is written, and is kept
// invisible until then, so a crash can duplicate events (the Athena views
// dedupe on event_id) but never lose one.
//
// The engine is three parts, each owning its state: the buffer (buffer.go:
// receiving, and the open and in-flight partitions under one lock), the
// flushers (flush.go: encode, write with backoff, delete; no state of their
// own) and the leases (lease.go: each held message's receipt and
// visibility, under another lock). No code holds both locks at once.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/drain"
	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
)

// Config tunes the consumer; start from DefaultConfig.
type Config struct {
	// A partition is flushed when its buffered body bytes reach FlushBytes,
	// its events reach FlushRows, or its oldest message is FlushAge old.
	FlushBytes int64
	FlushRows  int
	FlushAge   time.Duration
	// MaxBufferedBytes and MaxBufferedEvents bound everything received and
	// not yet deleted (buffered or being flushed). At a bound receiving
	// stops and the largest partitions are flushed. Each receiver may
	// overshoot the byte bound by one receive (10 messages). Keep
	// MaxBufferedEvents under SQS's 120 000 in-flight messages per queue.
	MaxBufferedBytes  int64
	MaxBufferedEvents int
	// VisibilityTimeout hides received messages; buffered messages are
	// hidden again for as long before it runs out.
	VisibilityTimeout time.Duration
	// WaitTime is the long-poll wait of a receive (SQS allows up to 20 s).
	WaitTime time.Duration
	// ReceiveConcurrency is the number of long polls in flight.
	ReceiveConcurrency int
	// FlushConcurrency is the number of partitions written at once.
	FlushConcurrency int
	// DrainTimeout bounds the final flush after Run's context ends; what is
	// not written by then is handed back to the queue. The consumer does
	// not time it: whoever runs it does, by ending drain.Hard of Run's ctx
	// (cmd/consumer's lifecycle group, whose Drain is this).
	DrainTimeout time.Duration
	// RetryInitial and RetryMax shape the full-jitter backoff
	// (internal/retry) between attempts to write an object; writes are
	// retried until they succeed or the drain deadline passes.
	RetryInitial time.Duration
	RetryMax     time.Duration
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the metrics; nil keeps them unregistered.
	Registerer prometheus.Registerer
}

// DefaultConfig returns the defaults: a partition is written after one
// minute, or at 128 MiB of JSON or 50 000 events, whichever comes first.
// Parquet is about a tenth of the JSON, so at ~500-byte events the row
// bound comes first (objects of a few MB): SQS keeps at most ~120 000
// messages in flight per queue, shared by every replica, which is why
// MaxBufferedEvents is 60 000 (two replicas fit) and objects of tens of MB
// need larger events or fewer partitions per minute.
func DefaultConfig() Config {
	return Config{
		FlushBytes:         128 << 20,
		FlushRows:          50_000,
		FlushAge:           time.Minute,
		MaxBufferedBytes:   512 << 20,
		MaxBufferedEvents:  60_000,
		VisibilityTimeout:  5 * time.Minute,
		WaitTime:           20 * time.Second,
		ReceiveConcurrency: 4,
		FlushConcurrency:   4,
		DrainTimeout:       25 * time.Second,
		RetryInitial:       200 * time.Millisecond,
		RetryMax:           30 * time.Second,
	}
}

// Validate reports every problem with the configuration at once, naming
// each setting as cmd/consumer's flag of the same meaning.
func (c Config) Validate() error {
	var errs []error
	if c.FlushBytes <= 0 {
		errs = append(errs, errors.New("flush-bytes must be positive"))
	}
	if c.FlushRows <= 0 {
		errs = append(errs, errors.New("flush-rows must be positive"))
	}
	if c.FlushAge <= 0 {
		errs = append(errs, errors.New("flush-age must be positive"))
	}
	if c.MaxBufferedBytes < c.FlushBytes {
		errs = append(errs, fmt.Errorf("max-buffered-bytes %d must be at least flush-bytes %d", c.MaxBufferedBytes, c.FlushBytes))
	}
	if c.MaxBufferedEvents < 10*c.ReceiveConcurrency || c.MaxBufferedEvents > 120_000 {
		errs = append(errs, fmt.Errorf("max-buffered-events %d must be between 10 per receiver and SQS's 120000 in-flight limit", c.MaxBufferedEvents))
	}
	if c.VisibilityTimeout < 3*time.Second || c.VisibilityTimeout > 12*time.Hour || c.VisibilityTimeout%time.Second != 0 {
		errs = append(errs, fmt.Errorf("visibility-timeout %s must be whole seconds between 3s and 12h", c.VisibilityTimeout))
	}
	if c.WaitTime < 0 || c.WaitTime > 20*time.Second {
		errs = append(errs, fmt.Errorf("wait-time %s must be within 0..20s", c.WaitTime))
	}
	if c.ReceiveConcurrency < 1 {
		errs = append(errs, errors.New("receive-concurrency must be at least 1"))
	}
	if c.FlushConcurrency < 1 {
		errs = append(errs, errors.New("flush-concurrency must be at least 1"))
	}
	if c.DrainTimeout <= 0 {
		errs = append(errs, errors.New("drain-timeout must be positive"))
	}
	if c.RetryInitial <= 0 || c.RetryMax < c.RetryInitial {
		errs = append(errs, errors.New("write-retry-base must be positive and at most write-retry-max"))
	}
	return errors.Join(errs...)
}

// Options are what New takes besides the operator's settings.
type Options struct {
	// Clock times the flushes by age, the backoff after failed receives
	// and writes and the visibility renewals; nil is the wall clock.
	Clock clock.Clock
	// PauseAfterWrite, a test hook, waits this long (on Clock) after an
	// object is written and before its messages are deleted, logging
	// "paused after write" first, so that a test can kill the process in
	// that window. Zero never pauses.
	PauseAfterWrite time.Duration
}

// receiveBackoff spaces receives after failed ones; its ceiling is the
// configured RetryMax.
const receiveBackoff = time.Second

// Consumer moves messages from a queue into the lake. Create it with New;
// Run it once.
type Consumer struct {
	cfg  Config
	opt  Options
	clk  clock.Clock
	q    pipeline.Inbox
	lake pipeline.LakeWriter
	log  *slog.Logger
	m    *metrics

	buf    *buffer
	leases *leases
	// writeBackoff spaces the attempts to write one object.
	writeBackoff retry.Policy

	kick     chan struct{} // a partition is due or the buffer is full
	draining chan struct{} // closed when receiving has stopped
	ready    atomic.Bool
}

// New returns a Consumer over the feedback queue q writing to lake, or the
// configuration's problems.
func New(cfg Config, q pipeline.Inbox, lake pipeline.LakeWriter, opt Options) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	if opt.PauseAfterWrite < 0 {
		return nil, errors.New("consumer: debug-pause-after-write must not be negative")
	}
	if lake == nil {
		return nil, errors.New("consumer: no lake writer")
	}
	clk := clock.Or(opt.Clock)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Consumer{
		cfg: cfg, opt: opt, clk: clk, q: q, lake: lake, log: log,
		buf:          newBuffer(cfg, clk),
		leases:       newLeases(cfg.VisibilityTimeout),
		writeBackoff: retry.Policy{Initial: cfg.RetryInitial, Max: cfg.RetryMax},
		kick:         make(chan struct{}, 1),
		draining:     make(chan struct{}),
	}
	c.m = newMetrics(c.buf)
	if cfg.Registerer != nil {
		if err := c.m.register(cfg.Registerer); err != nil {
			return nil, fmt.Errorf("consumer: register metrics: %w", err)
		}
	}
	return c, nil
}

// Ready reports whether the consumer is receiving: true from the start of
// Run until its context ends.
func (c *Consumer) Ready() bool { return c.ready.Load() }

// Run receives and flushes until ctx ends, then stops receiving, writes
// every buffered partition until drain.Hard(ctx) ends (the drain
// deadline, kept by whoever runs the consumer: cmd/consumer's lifecycle
// group, from DrainTimeout) and returns. It returns nil when everything
// received was written and deleted; otherwise the unwritten messages are
// handed back to the queue (visibility 0) for redelivery and Run says how
// many. Without a hard context (drain.WithHard, drain.After) ctx is its
// own, so there is no drain: what is buffered is handed back at once. Run
// must be called once.
func (c *Consumer) Run(ctx context.Context) error {
	// Flushes and visibility renewals outlive ctx: they finish the drain,
	// which ends with the hard context.
	flushCtx, cancelFlush := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelFlush()
	atDeadline := context.AfterFunc(drain.Hard(ctx), cancelFlush)
	defer atDeadline()

	var flushers, extender, receivers sync.WaitGroup
	for range c.cfg.FlushConcurrency {
		flushers.Go(func() { c.flushLoop(flushCtx) })
	}
	extendCtx, stopExtend := context.WithCancel(flushCtx)
	defer stopExtend()
	extender.Go(func() { c.extendLoop(extendCtx) })
	for range c.cfg.ReceiveConcurrency {
		receivers.Go(func() { c.receiveLoop(ctx) })
	}
	c.ready.Store(true)
	c.log.Info("consumer started", "receivers", c.cfg.ReceiveConcurrency, "flushers", c.cfg.FlushConcurrency)

	<-ctx.Done()
	c.ready.Store(false)
	receivers.Wait()
	bytes, events := c.buf.size()
	c.log.Info("consumer draining", "buffered_events", events, "buffered_bytes", bytes)
	if drain.Hard(ctx).Err() != nil {
		// The deadline has already passed (or there is none): cancel the
		// flushes here, before they are told to drain, since AfterFunc
		// cancels them from its own goroutine a moment too late.
		cancelFlush()
	}
	close(c.draining)
	flushers.Wait()
	atDeadline()
	stopExtend()
	extender.Wait()
	return c.handBack()
}

// signal wakes one flusher without blocking: a partition is due, or the
// buffer is full and receivers wait for room.
func (c *Consumer) signal() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// failedEntries counts the entries of a batched queue call that failed.
func failedEntries(err error, n int) int {
	failed := 0
	for _, e := range pipeline.EntryErrors(err, n) {
		if e != nil {
			failed++
		}
	}
	return failed
}
