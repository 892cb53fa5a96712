// Package consumer drains the "feedback" queue into the S3 Parquet lake. It
// long-polls the queue, decodes each message (storage/s3lake.Decode),
// buffers events per partition (event type and hour of occurred_at) and
// writes a partition as one Parquet object when it reaches a size, a row
// count or an age. Invalid messages are buffered the same way and written as
// JSON lines under the errors prefix. A message is deleted only after the
// object holding it is written, and is kept invisible until then, so a crash
// can duplicate events (the Athena views dedupe on event_id) but never lose
// one.
package consumer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
)

// ObjectStore is where flushed objects go. Put returning nil means the
// object is durably written; a second Put of the same key replaces it.
type ObjectStore interface {
	Put(ctx context.Context, key string, body []byte, contentType string) error
}

// Config tunes the consumer; start from DefaultConfig.
type Config struct {
	// EventsPrefix and ErrorsPrefix are the key prefixes of Parquet objects
	// and of invalid-message objects.
	EventsPrefix string
	ErrorsPrefix string
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
	// not written by then is handed back to the queue.
	DrainTimeout time.Duration
	// RetryInitial and RetryMax shape the full-jitter backoff between
	// attempts to write an object; writes are retried until they succeed or
	// the drain deadline passes.
	RetryInitial time.Duration
	RetryMax     time.Duration
	// Sleep replaces retry.Sleep between failed receives (tests inject a
	// fake clock).
	Sleep retry.SleepFunc
	// PauseAfterWrite, a test hook, waits this long after an object is
	// written and before its messages are deleted, logging "paused after
	// write" first, so that a test can kill the process in that window.
	PauseAfterWrite time.Duration
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
		EventsPrefix:       s3lake.DefaultEventsPrefix,
		ErrorsPrefix:       s3lake.DefaultErrorsPrefix,
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
	if c.PauseAfterWrite < 0 {
		errs = append(errs, errors.New("debug-pause-after-write must not be negative"))
	}
	if c.EventsPrefix == c.ErrorsPrefix || strings.HasPrefix(c.EventsPrefix, c.ErrorsPrefix) || strings.HasPrefix(c.ErrorsPrefix, c.EventsPrefix) {
		errs = append(errs, fmt.Errorf("lake-prefix %q and errors-prefix %q must not overlap", c.EventsPrefix, c.ErrorsPrefix))
	}
	return errors.Join(errs...)
}

// partKey names a buffer: an event type and an hour, or the errors buffer
// of an hour when typ is empty.
type partKey struct {
	typ  pipeline.EventType
	hour int64 // unix seconds of the UTC hour
}

type item struct {
	msgID string
	bytes int64
	ev    s3lake.Event
	bad   *s3lake.ErrorLine
}

// part is the open buffer of one partition; a batch is a part taken out for
// writing.
type part struct {
	key   partKey
	items []item
	bytes int64
	first time.Time
}

type pending struct {
	receipt  string
	received time.Time
	// hiddenUntil is when the message's visibility runs out, as far as we
	// know: the extender renews it before then.
	hiddenUntil time.Time
}

// receiveBackoff spaces receives after failed ones; its ceiling is the
// configured RetryMax.
const receiveBackoff = time.Second

// Consumer moves messages from a queue into an ObjectStore. Create it with
// New; Run it once.
type Consumer struct {
	cfg   Config
	q     pipeline.Inbox
	store ObjectStore
	log   *slog.Logger
	m     *metrics

	kick     chan struct{}
	draining chan struct{}
	ready    atomic.Bool

	mu       sync.Mutex
	parts    map[partKey]*part
	pending  map[string]*pending
	inflight map[*part]struct{}
	bytes    int64
	count    int
	changed  chan struct{} // closed and replaced whenever bytes or count drop
}

// New returns a Consumer over the feedback queue q, or the
// configuration's problems.
func New(cfg Config, q pipeline.Inbox, store ObjectStore) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	if cfg.Sleep == nil {
		cfg.Sleep = retry.Sleep
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Consumer{
		cfg: cfg, q: q, store: store, log: log,
		kick:     make(chan struct{}, 1),
		draining: make(chan struct{}),
		parts:    map[partKey]*part{},
		pending:  map[string]*pending{},
		inflight: map[*part]struct{}{},
		changed:  make(chan struct{}),
	}
	c.m = newMetrics(c)
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
// every buffered partition within the drain timeout and returns. It returns
// nil when everything received was written and deleted; otherwise the
// unwritten messages are handed back to the queue (visibility 0) for
// redelivery and Run says how many. Run must be called once.
func (c *Consumer) Run(ctx context.Context) error {
	// Flushes and visibility renewals outlive ctx: they finish the drain.
	flushCtx, cancelFlush := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelFlush()

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
	c.log.Info("consumer draining", "buffered_events", c.bufferedEvents(), "buffered_bytes", c.bufferedBytes())
	close(c.draining)
	deadline := time.AfterFunc(c.cfg.DrainTimeout, cancelFlush)
	flushers.Wait()
	deadline.Stop()
	stopExtend()
	extender.Wait()
	return c.handBack()
}

// handBack makes every message not yet deleted visible again so that it is
// redelivered at once rather than after its visibility timeout.
func (c *Consumer) handBack() error {
	c.mu.Lock()
	receipts := make([]string, 0, len(c.pending))
	for _, p := range c.pending {
		receipts = append(receipts, p.receipt)
	}
	c.mu.Unlock()
	if len(receipts) == 0 {
		c.log.Info("consumer drained")
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.q.ChangeVisibility(ctx, receipts, 0); err != nil {
		failed := failedEntries(err, len(receipts))
		c.m.queueErrors.WithLabelValues("release").Add(float64(failed))
		c.log.Warn("hand back unwritten messages", "failed", failed, "err", err)
	}
	return fmt.Errorf("consumer: drain: %d messages not written in %s; handed back for redelivery", len(receipts), c.cfg.DrainTimeout)
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

func (c *Consumer) receiveLoop(ctx context.Context) {
	backoff := retry.Policy{Initial: receiveBackoff, Max: max(c.cfg.RetryMax, receiveBackoff)}
	req := pipeline.ReceiveRequest{Max: pipeline.MaxReceive, Wait: c.cfg.WaitTime, Visibility: c.cfg.VisibilityTimeout}
	for failures := 0; ctx.Err() == nil; {
		if err := c.waitRoom(ctx); err != nil {
			return
		}
		msgs, err := c.q.Receive(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			c.m.queueErrors.WithLabelValues("receive").Inc()
			c.log.Warn("receive", "err", err)
			_ = c.cfg.Sleep(ctx, backoff.Delay(failures))
			continue
		}
		failures = 0
		now := time.Now().UTC()
		for _, m := range msgs {
			c.add(m, now)
		}
	}
}

// full reports whether a bound is reached; c.mu must be held.
func (c *Consumer) full() bool {
	return c.bytes >= c.cfg.MaxBufferedBytes || c.count+10 > c.cfg.MaxBufferedEvents
}

// waitRoom blocks while the buffer is at a bound, asking for flushes.
func (c *Consumer) waitRoom(ctx context.Context) error {
	for {
		c.mu.Lock()
		full, ch := c.full(), c.changed
		c.mu.Unlock()
		if !full {
			return nil
		}
		c.signal()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *Consumer) signal() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *Consumer) add(m pipeline.Message, now time.Time) {
	it := item{msgID: m.ID, bytes: int64(len(m.Body))}
	var key partKey
	ev, err := s3lake.Decode(m.Body, now)
	if err != nil {
		var inv *s3lake.InvalidEventError
		line := s3lake.ErrorLine{MessageID: m.ID, ReceivedAt: now, Reason: err.Error(), Body: validUTF8(m.Body)}
		typ := "unknown"
		if errors.As(err, &inv) {
			line.Reason, line.EventID, line.EventType = inv.Reason, inv.EventID, inv.EventType
			if inv.EventType != "" {
				typ = string(inv.EventType)
			}
		}
		it.bad = &line
		key = partKey{hour: s3lake.HourOf(now).Unix()}
		c.m.events.WithLabelValues(typ, "invalid").Inc()
	} else {
		it.ev = ev
		key = partKey{typ: ev.EventType, hour: s3lake.HourOf(ev.OccurredAt).Unix()}
		c.m.events.WithLabelValues(string(ev.EventType), "received").Inc()
	}

	c.mu.Lock()
	if p, dup := c.pending[m.ID]; dup {
		// A redelivery of a message we still hold (its visibility ran out):
		// keep one copy, and the newest receipt, which is the one SQS honours.
		p.receipt = m.ReceiptHandle
		p.hiddenUntil = now.Add(c.cfg.VisibilityTimeout)
		c.mu.Unlock()
		c.m.events.WithLabelValues(eventTypeLabel(key.typ, it), "duplicate").Inc()
		return
	}
	c.pending[m.ID] = &pending{receipt: m.ReceiptHandle, received: now, hiddenUntil: now.Add(c.cfg.VisibilityTimeout)}
	p := c.parts[key]
	if p == nil {
		p = &part{key: key, first: now}
		c.parts[key] = p
	}
	p.items = append(p.items, it)
	p.bytes += it.bytes
	c.bytes += it.bytes
	c.count++
	due := len(p.items) >= c.cfg.FlushRows || p.bytes >= c.cfg.FlushBytes
	c.mu.Unlock()
	if due {
		c.signal()
	}
}

func eventTypeLabel(typ pipeline.EventType, it item) string {
	if typ != "" {
		return string(typ)
	}
	if it.bad != nil && it.bad.EventType != "" {
		return string(it.bad.EventType)
	}
	return "unknown"
}

func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// flushLoop writes due partitions until the drain has written everything
// or ctx ends.
func (c *Consumer) flushLoop(ctx context.Context) {
	tick := time.NewTicker(min(max(c.cfg.FlushAge/10, 10*time.Millisecond), time.Second))
	defer tick.Stop()
	for {
		if b, done := c.takeDue(time.Now()); b != nil {
			c.flush(ctx, b)
			continue
		} else if done {
			return
		}
		select {
		case <-c.kick:
		case <-tick.C:
		case <-c.draining:
		case <-ctx.Done():
			return
		}
	}
}

// takeDue takes the oldest partition that is due out of the buffer; under
// pressure the largest one. done is true when draining and nothing is left.
func (c *Consumer) takeDue(now time.Time) (b *part, done bool) {
	draining := false
	select {
	case <-c.draining:
		draining = true
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var best, largest *part
	for _, p := range c.parts {
		due := draining || len(p.items) >= c.cfg.FlushRows || p.bytes >= c.cfg.FlushBytes || now.Sub(p.first) >= c.cfg.FlushAge
		if due && (best == nil || p.first.Before(best.first)) {
			best = p
		}
		if largest == nil || p.bytes > largest.bytes {
			largest = p
		}
	}
	if best == nil && c.full() {
		best = largest
	}
	if best == nil {
		return nil, draining
	}
	delete(c.parts, best.key)
	c.inflight[best] = struct{}{}
	return best, false
}

// deleteRounds bounds the rounds of deleteBatch: a message redelivered
// while held more than twice during one delete is left to be written again.
const deleteRounds = 3

// flush writes one batch, retrying until it is written or ctx ends, then
// deletes its messages.
func (c *Consumer) flush(ctx context.Context, b *part) {
	start := time.Now()
	key, body, ctype, err := c.encode(b)
	if err != nil {
		c.reroute(b, err)
		return
	}
	for attempt := 0; ; attempt++ {
		err := c.store.Put(ctx, key, body, ctype)
		if err == nil {
			break
		}
		c.m.flushes.WithLabelValues("retry").Inc()
		c.log.Warn("write object", "key", key, "attempt", attempt+1, "err", err)
		if sleep(ctx, c.backoff(attempt, c.cfg.RetryInitial)) != nil {
			// The drain deadline passed: the messages stay undeleted and
			// are handed back.
			c.m.flushes.WithLabelValues("abandoned").Inc()
			c.mu.Lock()
			delete(c.inflight, b)
			c.mu.Unlock()
			return
		}
	}
	c.m.flushes.WithLabelValues("ok").Inc()
	c.m.objectBytes.Observe(float64(len(body)))
	c.m.flushSeconds.Observe(time.Since(start).Seconds())
	if b.key.typ == "" {
		c.m.errorsWritten.Add(float64(len(b.items)))
	} else {
		c.m.events.WithLabelValues(string(b.key.typ), "written").Add(float64(len(b.items)))
	}
	c.log.Info("object written", "key", key, "events", len(b.items), "bytes", len(body))
	if c.cfg.PauseAfterWrite > 0 {
		c.log.Info("paused after write", "key", key, "pause", c.cfg.PauseAfterWrite)
		_ = sleep(ctx, c.cfg.PauseAfterWrite)
	}
	c.deleteBatch(ctx, b)
}

func (c *Consumer) encode(b *part) (key string, body []byte, ctype string, err error) {
	ids := make([]string, len(b.items))
	for i, it := range b.items {
		ids[i] = it.msgID
	}
	hour := time.Unix(b.key.hour, 0).UTC()
	if b.key.typ == "" {
		lines := make([]s3lake.ErrorLine, len(b.items))
		for i, it := range b.items {
			lines[i] = *it.bad
		}
		body, err = s3lake.EncodeErrors(lines)
		return s3lake.ErrorKey(c.cfg.ErrorsPrefix, hour, ids), body, "application/x-ndjson", err
	}
	evs := make([]s3lake.Event, len(b.items))
	for i, it := range b.items {
		evs[i] = it.ev
	}
	var buf bytes.Buffer
	err = s3lake.EncodeParquet(&buf, b.key.typ, evs)
	return s3lake.ObjectKey(c.cfg.EventsPrefix, b.key.typ, hour, ids), buf.Bytes(), "application/vnd.apache.parquet", err
}

// reroute sends the events of a batch that cannot be encoded to the errors
// buffer with the reason: retrying a deterministic failure would never end,
// and dropping the events would lose them.
func (c *Consumer) reroute(b *part, cause error) {
	c.m.flushes.WithLabelValues("rerouted").Inc()
	c.log.Error("encode batch; sending its events to errors", "events", len(b.items), "err", cause)
	now := time.Now().UTC()
	key := partKey{hour: s3lake.HourOf(now).Unix()}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.inflight, b)
	p := c.parts[key]
	if p == nil {
		p = &part{key: key, first: now}
		c.parts[key] = p
	}
	for _, it := range b.items {
		if it.bad == nil {
			body, _ := jsonLine(it.ev)
			it.bad = &s3lake.ErrorLine{MessageID: it.msgID, ReceivedAt: it.ev.ReceivedAt, Reason: "encode: " + cause.Error(),
				EventID: it.ev.EventID, EventType: it.ev.EventType, Body: body}
		}
		p.items = append(p.items, it)
		p.bytes += it.bytes
	}
}

// deleteBatch deletes the messages of a written batch. The queue retries
// failed entries itself; a message whose delete still failed is tried
// again here, at once, when it has a newer receipt (it was redelivered
// while held, and only the latest receipt deletes it). A message that
// still fails is redelivered later and written again: a duplicate, which
// the views remove.
func (c *Consumer) deleteBatch(ctx context.Context, b *part) {
	left := make([]string, len(b.items))
	for i, it := range b.items {
		left[i] = it.msgID
	}
	tried := make(map[string]string, len(left)) // message id -> receipt last tried
	var err error
	for round := 0; len(left) > 0 && round < deleteRounds; round++ {
		var ids, receipts, stale []string
		c.mu.Lock()
		for _, id := range left {
			if p := c.pending[id]; p != nil && p.receipt != tried[id] {
				ids = append(ids, id)
				receipts = append(receipts, p.receipt)
			} else {
				stale = append(stale, id) // failed with the receipt it still has
			}
		}
		c.mu.Unlock()
		if len(receipts) == 0 {
			break // no newer receipt to try
		}
		err = c.q.Delete(ctx, receipts)
		left = stale
		for i, e := range pipeline.EntryErrors(err, len(receipts)) {
			tried[ids[i]] = receipts[i]
			if e != nil {
				left = append(left, ids[i])
			}
		}
	}
	if len(left) > 0 {
		c.m.queueErrors.WithLabelValues("delete").Add(float64(len(left)))
		c.log.Warn("delete written messages; they will be written again", "failed", len(left), "err", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, it := range b.items {
		delete(c.pending, it.msgID)
	}
	delete(c.inflight, b)
	c.bytes -= b.bytes
	c.count -= len(b.items)
	close(c.changed)
	c.changed = make(chan struct{})
}

// extendLoop keeps buffered messages hidden: each one whose visibility runs
// out within half a timeout is hidden for another full timeout.
func (c *Consumer) extendLoop(ctx context.Context) {
	every := min(max(c.cfg.VisibilityTimeout/6, 500*time.Millisecond), 30*time.Second)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		c.mu.Lock()
		var receipts []string
		for _, p := range c.pending {
			if p.hiddenUntil.Sub(now) < c.cfg.VisibilityTimeout/2 {
				receipts = append(receipts, p.receipt)
				p.hiddenUntil = now.Add(c.cfg.VisibilityTimeout)
			}
		}
		c.mu.Unlock()
		if len(receipts) == 0 {
			continue
		}
		if err := c.q.ChangeVisibility(ctx, receipts, c.cfg.VisibilityTimeout); err != nil && ctx.Err() == nil {
			failed := failedEntries(err, len(receipts))
			c.m.queueErrors.WithLabelValues("extend").Add(float64(failed))
			c.log.Warn("extend visibility", "messages", len(receipts), "failed", failed, "err", err)
		}
	}
}

func (c *Consumer) bufferedBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

func (c *Consumer) bufferedEvents() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

// oldestAge is the age of the oldest message received and not deleted.
func (c *Consumer) oldestAge() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var oldest time.Time
	for _, p := range c.parts {
		if oldest.IsZero() || p.first.Before(oldest) {
			oldest = p.first
		}
	}
	for p := range c.inflight {
		if oldest.IsZero() || p.first.Before(oldest) {
			oldest = p.first
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return time.Since(oldest)
}

// backoff is full jitter: a random wait up to base·2^attempt, capped.
func (c *Consumer) backoff(attempt int, base time.Duration) time.Duration {
	ceil := min(base<<min(attempt, 20), c.cfg.RetryMax)
	return time.Duration(rand.Int64N(int64(ceil)) + 1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
