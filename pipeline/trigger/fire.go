package trigger

import (
	"cmp"
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/pipeline"
)

// The attributes of a published review message, as the batch's carry.
const (
	attrRunID         = "run_id"
	attrSchemaVersion = "schema_version"
	attrSource        = "source"
)

func (e *Engine) fireLoop(ctx context.Context) {
	t := e.clk.NewTicker(e.cfg.FireInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
			e.FireDue(ctx)
		}
	}
}

// FireDue claims every due room of every shard (up to FireBatch per shard)
// and publishes their windows; it returns how many were acknowledged. The
// fire loop calls it every FireInterval; tests call it directly.
func (e *Engine) FireDue(ctx context.Context) int {
	fired, failed := 0, 0
	var firstErr error
	for shard := range e.d.Rooms.Shards() {
		if ctx.Err() != nil {
			break
		}
		n, err := e.fireShard(ctx, shard)
		fired += n
		if err != nil {
			failed++
			firstErr = cmp.Or(firstErr, err)
		}
	}
	if failed > 0 && ctx.Err() == nil {
		// One line per pass, not per shard: an outage would log every
		// shard every FireInterval.
		e.log.Warn("trigger: listing due rooms failed", "shards_failed", failed, "err", firstErr)
	}
	e.refreshPending(ctx)
	return fired
}

func (e *Engine) fireShard(ctx context.Context, shard int) (int, error) {
	var rooms []string
	start := e.clk.Now()
	err := e.call(ctx, func(ctx context.Context) (err error) {
		rooms, err = e.d.Rooms.Due(ctx, shard, e.cfg.FireBatch)
		return err
	})
	e.m.observeRedis("due", start, e.clk.Now(), err)
	if err != nil {
		return 0, err
	}
	var windows []pipeline.RoomWindow
	for _, room := range rooms {
		var w pipeline.RoomWindow
		var ok bool
		start := e.clk.Now()
		err := e.call(ctx, func(ctx context.Context) (err error) { w, ok, err = e.d.Rooms.Claim(ctx, room); return err })
		e.m.observeRedis("claim", start, e.clk.Now(), err)
		if errors.Is(err, pipeline.ErrRoomStateLost) {
			e.log.Warn("trigger: a due room's state is gone (evicted, or lost in a failover); the sweep covers its messages", "room_id", room)
			continue
		}
		if err != nil {
			e.log.Warn("trigger: claiming a room failed", "room_id", room, "err", err)
			continue
		}
		if ok {
			windows = append(windows, w)
		}
	}
	if len(windows) == 0 {
		return 0, nil
	}
	return e.publish(ctx, windows), nil
}

// publish sends the windows' review events and acknowledges those the
// queue accepted. A window not sent stays pending under its claim, and is
// published again, unchanged, once the claim lapses.
func (e *Engine) publish(ctx context.Context, windows []pipeline.RoomWindow) int {
	errs, ok := e.send(ctx, windows)
	if !ok {
		return 0
	}
	acked := 0
	for i, w := range windows {
		if errs[i] != nil {
			e.m.publishFailures.Inc()
			e.log.Warn("trigger: publishing a window failed; it is published again when its claim lapses", "room_id", w.RoomID, "err", errs[i])
			continue
		}
		if e.ack(ctx, w) {
			acked++
		}
	}
	return acked
}

// send publishes the windows' review events and returns each one's error
// in order; false when one could not even be encoded.
func (e *Engine) send(ctx context.Context, windows []pipeline.RoomWindow) ([]error, bool) {
	now := e.clk.Now()
	msgs := make([]pipeline.OutMessage, 0, len(windows))
	spans := make([]trace.Span, 0, len(windows))
	defer func() {
		for _, s := range spans {
			s.End()
		}
	}()
	for _, w := range windows {
		ev := w.ReviewEvent(now)
		body, err := ev.Encode()
		if err != nil { // a window built by the store or from a valid event always encodes
			e.log.Error("trigger: encoding a review event failed", "room_id", w.RoomID, "err", err)
			return nil, false
		}
		// Each window starts a trace of its own (sampled at the root
		// ratio), carried by its review event to the worker and on.
		wctx, span := startWindowSpan(ctx, w, e.links.take(w.RoomID))
		spans = append(spans, span)
		msgs = append(msgs, pipeline.OutMessage{Body: body, Attributes: pipeline.WithTraceContext(wctx, map[string]pipeline.Attribute{
			attrRunID:         pipeline.StringAttribute(ev.RunID),
			attrSchemaVersion: pipeline.NumberAttribute(int64(ev.SchemaVersion)),
			attrSource:        pipeline.StringAttribute(string(ev.Source)),
		})})
	}
	err := e.call(ctx, func(ctx context.Context) error { return e.d.Reviews.Send(ctx, msgs) })
	e.m.publishes.Add(float64(len(msgs)))
	errs := pipeline.EntryErrors(err, len(msgs))
	for i := range errs {
		if errs[i] != nil {
			spans[i].SetStatus(codes.Error, "publish failed")
		}
	}
	return errs, true
}

// OwnWindowWidth is the width of an event's window of its own: the
// instant it was sent. The worker reads every window with the context
// before it (pipeline/chatcontext), so the message is judged within its
// conversation while nothing an earlier window covered is reviewed again.
const OwnWindowWidth = time.Millisecond

// publishOwn publishes a window of its own for each event (a late or a
// stale one) and returns the receipts of those the queue accepted; the
// others are not deleted, and come back to be published again. The window
// follows from the event alone, so a republish is the same review and the
// worker's idempotency key dedupes it.
func (e *Engine) publishOwn(ctx context.Context, evs []pipeline.ChatEvent, receipts []string) []string {
	if len(evs) == 0 {
		return nil
	}
	windows := make([]pipeline.RoomWindow, len(evs))
	for i, ev := range evs {
		windows[i] = pipeline.RoomWindow{RoomID: ev.RoomID, Start: ev.SentAt, End: ev.SentAt.Add(OwnWindowWidth), Messages: 1}
	}
	errs, ok := e.send(ctx, windows)
	if !ok {
		return nil
	}
	var accepted []string
	for i, w := range windows {
		if errs[i] != nil {
			e.m.publishFailures.Inc()
			e.log.Warn("trigger: publishing an event's own window failed; the event comes back", "room_id", w.RoomID, "err", errs[i])
			continue
		}
		e.m.ownWindows.Inc()
		accepted = append(accepted, receipts[i])
	}
	return accepted
}

func (e *Engine) ack(ctx context.Context, w pipeline.RoomWindow) bool {
	var ok bool
	start := e.clk.Now()
	err := e.call(ctx, func(ctx context.Context) (err error) { ok, err = e.d.Rooms.Ack(ctx, w); return err })
	e.m.observeRedis("ack", start, e.clk.Now(), err)
	if errors.Is(err, pipeline.ErrRoomStateLost) {
		// The window was published and stands; the room starts again
		// from its next event.
		e.log.Warn("trigger: a published room's state is gone (evicted, or lost in a failover); the sweep covers what no window did", "room_id", w.RoomID)
		return false
	}
	if err != nil || !ok {
		// Published but not acknowledged: the window is published again
		// unchanged and the worker's idempotency key dedupes it.
		e.log.Warn("trigger: acknowledging a published window failed", "room_id", w.RoomID, "lost_claim", err == nil, "err", err)
		return false
	}
	e.m.fires.WithLabelValues(string(w.Reason)).Inc()
	// Counted at the acknowledgement, which succeeds once per window: a
	// republish of the same window is deduped by the worker, not covered
	// twice.
	e.m.doubleCovered.Add(float64(w.DoubleCovered))
	if w.Republish {
		e.m.republished.Inc()
	}
	e.log.Info("trigger: fired", "room_id", w.RoomID, "window_start", w.Start, "window_end", w.End, "reason", w.Reason,
		"messages", w.Messages, "double_covered", w.DoubleCovered, "republish", w.Republish)
	return true
}

func (e *Engine) refreshPending(ctx context.Context) {
	var n int64
	start := e.clk.Now()
	err := e.call(ctx, func(ctx context.Context) (err error) { n, err = e.d.Rooms.Pending(ctx); return err })
	e.m.observeRedis("pending", start, e.clk.Now(), err)
	if err == nil {
		e.m.pending.Set(float64(n))
	}
}

// tracer names the trigger's spans.
var tracer = otel.Tracer("github.com/chatguard/chatguard/pipeline/trigger")

// startWindowSpan starts the span of one fired window (kind producer):
// the root of the window's review trace, linking the chat events' traces
// it absorbed. The room is not named on it.
func startWindowSpan(ctx context.Context, w pipeline.RoomWindow, links []trace.Link) (context.Context, trace.Span) {
	return tracer.Start(ctx, "window fire", trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindProducer), trace.WithLinks(links...), trace.WithAttributes(
		attribute.String("chatguard.window.reason", string(w.Reason)),
		attribute.String("chatguard.review.window_start", w.Start.UTC().Format(time.RFC3339)),
		attribute.String("chatguard.review.window_end", w.End.UTC().Format(time.RFC3339)),
		attribute.Int("chatguard.window.messages", w.Messages),
		attribute.Bool("chatguard.window.republish", w.Republish),
	))
}
