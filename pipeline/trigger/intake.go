package trigger

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// outcomeNotice counts chat events of protective-action notices: a chat
// service should not announce them, and when one does they are deleted
// unrecorded, so that chatguard's own words never arm a review window.
const outcomeNotice = "notice"

// DLQ message attributes of a malformed chat event, the same names the
// worker's poison messages carry.
const (
	AttrErrorReason     = "chatguard_error_reason"
	AttrSourceMessageID = "chatguard_source_message_id"
)

// receiveLoop receives and records until ctx ends, noting in beat each
// time it advances (for Live).
func (e *Engine) receiveLoop(ctx context.Context, beat *atomic.Int64) {
	failures := 0
	advance := func() { beat.Store(e.clk.Now().UnixNano()) }
	for ctx.Err() == nil {
		msgs, err := e.d.Events.Receive(ctx, pipeline.ReceiveRequest{Max: pipeline.MaxReceive, Wait: e.cfg.WaitTime, Visibility: e.cfg.Visibility})
		advance()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			e.m.receiveErrors.Inc()
			e.log.Warn("trigger: receive failed", "err", err)
			_ = clock.Sleep(ctx, e.clk, e.cfg.Retry.Delay(failures))
			continue
		}
		failures = 0
		e.intakeBeating(ctx, msgs, advance)
		advance()
	}
}

// intake records one received batch and settles it (tests call it
// directly).
func (e *Engine) intake(ctx context.Context, msgs []pipeline.Message) {
	e.intakeBeating(ctx, msgs, func() {})
}

// intakeBeating records one received batch and settles it, calling
// advance after each attempt: malformed events go to the DLQ; a sent_at
// too far ahead of the event's arrival is clamped to it; a stale event,
// and a late one (sent before what its room's windows already cover),
// gets a window of its own; the rest are recorded in their rooms. Each is
// deleted once its state is written and its own window, if it has one,
// published.
func (e *Engine) intakeBeating(ctx context.Context, msgs []pipeline.Message, advance func()) {
	now := e.clk.Now()
	var evs, own []pipeline.ChatEvent
	var receipts, ownReceipts, notices []string
	for _, m := range msgs {
		if !m.SentAt.IsZero() {
			e.m.queueAge.Observe(max(now.Sub(m.SentAt), 0).Seconds())
		}
		ev, err := pipeline.DecodeChatEvent(m.Body)
		if err != nil {
			e.poison(ctx, m, err)
			advance()
			continue
		}
		// A protective action's notice never opens a window of its own.
		if pipeline.IsActionNoticeEvent(ev) {
			notices = append(notices, m.ReceiptHandle)
			continue
		}
		// The window that covers the event links the chat service's
		// trace of it.
		e.links.add(ev.RoomID, m.Attributes)
		ev.SentAt = e.clampSkew(ev, cmpOr(m.SentAt, now))
		if e.cfg.StaleAfter > 0 && now.Sub(ev.SentAt) > e.cfg.StaleAfter {
			e.m.events.WithLabelValues(outcomeStale).Inc()
			e.log.Warn("trigger: a chat event too old for its room's window; it gets a window of its own", "room_id", ev.RoomID, "message_id", ev.MessageID, "age", now.Sub(ev.SentAt).String())
			own, ownReceipts = append(own, ev), append(ownReceipts, m.ReceiptHandle)
			continue
		}
		evs = append(evs, ev)
		receipts = append(receipts, m.ReceiptHandle)
	}
	var settled []string
	if len(evs) > 0 {
		outs, ok := e.recordHeld(ctx, evs, receipts, advance)
		if !ok {
			return
		}
		for i, o := range outs {
			e.m.events.WithLabelValues(string(o)).Inc()
			if o == pipeline.RecordLate {
				own, ownReceipts = append(own, evs[i]), append(ownReceipts, receipts[i])
			} else {
				settled = append(settled, receipts[i])
			}
		}
	}
	settled = append(settled, e.publishOwn(ctx, own, ownReceipts)...)
	e.m.events.WithLabelValues(outcomeNotice).Add(float64(len(notices)))
	settled = append(settled, notices...)
	advance()
	e.deleteEvents(ctx, settled)
}

// outcomeStale counts, in chatguard_trigger_chat_events_total, an event
// too old for its room's window (see Config.StaleAfter).
const outcomeStale = "stale"

func cmpOr(t, or time.Time) time.Time {
	if t.IsZero() {
		return or
	}
	return t
}

// clampSkew returns the event's sent_at, or its arrival when sent_at lies
// more than MaxClockSkew after it (counted).
func (e *Engine) clampSkew(ev pipeline.ChatEvent, arrival time.Time) time.Time {
	if e.cfg.MaxClockSkew <= 0 || !ev.SentAt.After(arrival.Add(e.cfg.MaxClockSkew)) {
		return ev.SentAt
	}
	e.m.skewClamped.Inc()
	// Debug: a producer whose clock runs ahead skews every event; the
	// counter and its alert carry it.
	e.log.Debug("trigger: a chat event sent_at far ahead of its arrival; taken as sent at its arrival", "room_id", ev.RoomID,
		"message_id", ev.MessageID, "ahead", ev.SentAt.Sub(arrival).String())
	return arrival
}

// deleteEvents deletes settled events.
func (e *Engine) deleteEvents(ctx context.Context, receipts []string) {
	if len(receipts) == 0 {
		return
	}
	if err := e.call(ctx, func(ctx context.Context) error { return e.d.Events.Delete(ctx, receipts) }); err != nil {
		// Recorded: a redelivery is a duplicate and changes nothing.
		e.m.settleErrors.WithLabelValues("delete").Inc()
		e.log.Warn("trigger: delete failed; the events come back as duplicates", "events", len(receipts), "err", err)
	}
}

// poison copies a malformed event to the DLQ with its reason and deletes
// it. If the copy fails the event stays, to be tried again on redelivery:
// nothing is dropped without a trace.
func (e *Engine) poison(ctx context.Context, m pipeline.Message, cause error) {
	reason := pipeline.ClipRunes(cause.Error(), 1024)
	out := pipeline.OutMessage{Body: m.Body, Attributes: pipeline.DeadLetterAttributes(m.Attributes, map[string]pipeline.Attribute{
		AttrErrorReason: pipeline.StringAttribute(reason), AttrSourceMessageID: pipeline.StringAttribute(m.ID)})}
	if err := e.call(ctx, func(ctx context.Context) error { return e.d.DLQ.Send(ctx, []pipeline.OutMessage{out}) }); err != nil {
		e.m.settleErrors.WithLabelValues("send_dlq").Inc()
		e.log.Warn("trigger: copy to the DLQ failed; the event comes back", "message_id", m.ID, "err", err)
		return
	}
	e.m.events.WithLabelValues("invalid").Inc()
	e.log.Warn("trigger: malformed chat event dead-lettered", "message_id", m.ID, "reason", reason)
	if err := e.call(ctx, func(ctx context.Context) error { return e.d.Events.Delete(ctx, []string{m.ReceiptHandle}) }); err != nil {
		e.m.settleErrors.WithLabelValues("delete").Inc()
	}
}

// recordHeld records evs, retrying while the state store fails and
// keeping the events hidden meanwhile, so that an outage dead-letters
// nothing. It returns false when ctx ended first; the events are then
// handed back to the queue.
func (e *Engine) recordHeld(ctx context.Context, evs []pipeline.ChatEvent, receipts []string, advance func()) ([]pipeline.RecordOutcome, bool) {
	lastHide := e.clk.Now()
	for attempt := 1; ; attempt++ {
		var outs []pipeline.RecordOutcome
		start := e.clk.Now()
		err := e.call(ctx, func(ctx context.Context) (err error) { outs, err = e.d.Rooms.Record(ctx, evs); return err })
		e.m.observeRedis("record", start, e.clk.Now(), err)
		advance()
		if err == nil {
			if attempt > 1 {
				e.holding.Add(-1)
				e.log.Info("trigger: the room state answers again; held events recorded", "events", len(evs), "attempts", attempt)
			}
			return outs, true
		}
		if attempt == 1 {
			e.holding.Add(1)
			e.log.Warn("trigger: recording failed; holding the batch", "events", len(evs), "err", err)
		}
		if e.clk.Since(lastHide) >= e.cfg.Visibility/2 {
			e.hide(ctx, receipts)
			lastHide = e.clk.Now()
		}
		if clock.Sleep(ctx, e.clk, e.cfg.Retry.Delay(attempt)) != nil {
			e.holding.Add(-1)
			e.handBack(receipts)
			return nil, false
		}
	}
}

// hide renews the visibility of held events.
func (e *Engine) hide(ctx context.Context, receipts []string) {
	err := e.call(ctx, func(ctx context.Context) error { return e.d.Events.ChangeVisibility(ctx, receipts, e.cfg.Visibility) })
	if err != nil {
		e.m.settleErrors.WithLabelValues("change_visibility").Inc()
		e.log.Warn("trigger: extending the visibility of held events failed", "events", len(receipts), "err", err)
	}
}

// handBack makes held events visible at once on shutdown, with a context
// of its own: the run's has ended.
func (e *Engine) handBack(receipts []string) {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.CallTimeout)
	defer cancel()
	if err := e.d.Events.ChangeVisibility(ctx, receipts, 0); err != nil {
		e.m.settleErrors.WithLabelValues("change_visibility").Inc()
		e.log.Warn("trigger: handing held events back failed; they return when their visibility ends", "events", len(receipts), "err", fmt.Sprint(err))
	}
}
