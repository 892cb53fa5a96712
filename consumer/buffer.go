package consumer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
)

// item is one held message: a decoded event, or an invalid message (bad)
// bound for the errors partition.
type item struct {
	msgID string
	bytes int64
	ev    pipeline.LakeRecord
	bad   *pipeline.LakeErrorLine
	// trace is the trace context the message carried (not valid: none);
	// its object's write joins it (flushSpan).
	trace trace.SpanContext
}

// batch is the open buffer of one partition; taken out of the buffer, it
// is what one flusher writes as one object.
type batch struct {
	key   pipeline.LakePartition
	items []item
	bytes int64
	first time.Time
}

// buffer holds every message received and not yet deleted: the open
// batches by partition and the batches being written. Its lock guards only
// its own fields; the leases of the same messages have their own.
type buffer struct {
	clk        clock.Clock // ages the oldest message for its gauge
	flushRows  int
	flushBytes int64
	flushAge   time.Duration
	maxBytes   int64
	maxEvents  int

	mu       sync.Mutex
	parts    map[pipeline.LakePartition]*batch
	inflight map[*batch]struct{}
	bytes    int64         // body bytes held, open and in flight
	count    int           // messages held, open and in flight
	changed  chan struct{} // closed and replaced whenever bytes or count drop
}

func newBuffer(cfg Config, clk clock.Clock) *buffer {
	return &buffer{
		clk:       clk,
		flushRows: cfg.FlushRows, flushBytes: cfg.FlushBytes, flushAge: cfg.FlushAge,
		maxBytes: cfg.MaxBufferedBytes, maxEvents: cfg.MaxBufferedEvents,
		parts:    map[pipeline.LakePartition]*batch{},
		inflight: map[*batch]struct{}{},
		changed:  make(chan struct{}),
	}
}

// full reports whether a bound is reached, leaving room for one more
// receive of up to pipeline.MaxReceive messages; b.mu must be held.
func (b *buffer) full() bool {
	return b.bytes >= b.maxBytes || b.count+pipeline.MaxReceive > b.maxEvents
}

// room reports whether a bound is reached, and a channel closed when the
// buffer next shrinks.
func (b *buffer) room() (full bool, changed <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.full(), b.changed
}

// add buffers it in partition key, first seen at now, and reports whether
// that partition is due for a flush by size.
func (b *buffer) add(key pipeline.LakePartition, it item, now time.Time) (due bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.parts[key]
	if p == nil {
		p = &batch{key: key, first: now}
		b.parts[key] = p
	}
	p.items = append(p.items, it)
	p.bytes += it.bytes
	b.bytes += it.bytes
	b.count++
	return b.dueBySize(p)
}

func (b *buffer) dueBySize(p *batch) bool {
	return len(p.items) >= b.flushRows || p.bytes >= b.flushBytes
}

// take takes the oldest batch that is due (all are when draining) out of
// the buffer, or under pressure the largest one; nil when none is.
func (b *buffer) take(now time.Time, draining bool) *batch {
	b.mu.Lock()
	defer b.mu.Unlock()
	var best, largest *batch
	for _, p := range b.parts {
		due := draining || b.dueBySize(p) || now.Sub(p.first) >= b.flushAge
		if due && (best == nil || p.first.Before(best.first)) {
			best = p
		}
		if largest == nil || p.bytes > largest.bytes {
			largest = p
		}
	}
	if best == nil && b.full() {
		best = largest
	}
	if best == nil {
		return nil
	}
	delete(b.parts, best.key)
	b.inflight[best] = struct{}{}
	return best
}

// reopen moves the items of in-flight batch from, rewritten as items, into
// partition key; they stay held (bytes and count do not change).
func (b *buffer) reopen(from *batch, key pipeline.LakePartition, items []item, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.inflight, from)
	p := b.parts[key]
	if p == nil {
		p = &batch{key: key, first: now}
		b.parts[key] = p
	}
	for _, it := range items {
		p.items = append(p.items, it)
		p.bytes += it.bytes
	}
}

// abandon forgets an in-flight batch that was not written; its messages
// stay held until they are handed back.
func (b *buffer) abandon(p *batch) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.inflight, p)
}

// release forgets a written in-flight batch and wakes receivers waiting
// for room.
func (b *buffer) release(p *batch) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.inflight, p)
	b.bytes -= p.bytes
	b.count -= len(p.items)
	close(b.changed)
	b.changed = make(chan struct{})
}

// size returns the body bytes and messages held.
func (b *buffer) size() (bytes int64, count int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytes, b.count
}

// oldestAge is the age of the oldest message received and not deleted.
func (b *buffer) oldestAge() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	var oldest time.Time
	for _, p := range b.parts {
		if oldest.IsZero() || p.first.Before(oldest) {
			oldest = p.first
		}
	}
	for p := range b.inflight {
		if oldest.IsZero() || p.first.Before(oldest) {
			oldest = p.first
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return b.clk.Since(oldest)
}

// receiveLoop long-polls the queue while there is room, until ctx ends.
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
			_ = clock.Sleep(ctx, c.clk, backoff.Delay(failures))
			continue
		}
		failures = 0
		now := c.clk.Now().UTC()
		for _, m := range msgs {
			c.add(m, now)
		}
	}
}

// waitRoom blocks while the buffer is at a bound, asking for flushes.
func (c *Consumer) waitRoom(ctx context.Context) error {
	for {
		full, changed := c.buf.room()
		if !full {
			return nil
		}
		c.signal()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// add decodes one received message and buffers it, unless it is a
// redelivery of a message still held.
func (c *Consumer) add(m pipeline.Message, now time.Time) {
	it := item{msgID: m.ID, bytes: int64(len(m.Body)), trace: pipeline.TraceContext(m.Attributes)}
	var key pipeline.LakePartition
	ev, err := pipeline.DecodeLakeEvent(m.Body, now)
	if err != nil {
		var inv *pipeline.InvalidLakeEventError
		line := pipeline.LakeErrorLine{MessageID: m.ID, ReceivedAt: now, Reason: err.Error(), Body: validUTF8(m.Body)}
		typ := "unknown"
		if errors.As(err, &inv) {
			line.Reason, line.EventID, line.EventType = inv.Reason, inv.EventID, inv.EventType
			if inv.EventType != "" {
				typ = string(inv.EventType)
			}
		}
		it.bad = &line
		key = pipeline.NewLakePartition("", now)
		c.m.events.WithLabelValues(typ, "invalid").Inc()
	} else {
		it.ev = ev
		key = pipeline.NewLakePartition(ev.EventType, ev.OccurredAt)
		c.m.events.WithLabelValues(string(ev.EventType), "received").Inc()
	}

	if c.leases.hold(m.ID, m.ReceiptHandle, now) {
		// A redelivery of a message we still hold (its visibility ran out):
		// keep one copy, and the newest receipt, which hold kept.
		c.m.events.WithLabelValues(eventTypeLabel(key.Type, it), "duplicate").Inc()
		return
	}
	if c.buf.add(key, it, now) {
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
