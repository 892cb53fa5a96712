package consumer

import (
	"context"
	"encoding/json"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// deleteRounds bounds the rounds of deleteBatch: a message redelivered
// while held more than twice during one delete is left to be written again.
const deleteRounds = 3

// flushLoop writes due partitions until the drain has written everything
// or ctx ends.
func (c *Consumer) flushLoop(ctx context.Context) {
	tick := c.clk.NewTicker(min(max(c.cfg.FlushAge/10, 10*time.Millisecond), time.Second))
	defer tick.Stop()
	for {
		draining := c.isDraining()
		if b := c.buf.take(c.clk.Now(), draining); b != nil {
			c.flush(ctx, b)
			continue
		} else if draining {
			return
		}
		select {
		case <-c.kick:
		case <-tick.Chan():
		case <-c.draining:
		case <-ctx.Done():
			return
		}
	}
}

func (c *Consumer) isDraining() bool {
	select {
	case <-c.draining:
		return true
	default:
		return false
	}
}

// flush writes one batch, retrying with backoff until it is written or ctx
// ends, then deletes its messages.
func (c *Consumer) flush(ctx context.Context, b *batch) {
	ctx, span := startFlushSpan(ctx, b)
	defer span.End()
	start := c.clk.Now()
	obj, err := c.encode(b)
	if err != nil {
		c.reroute(b, err)
		return
	}
	for attempt := 1; ; attempt++ {
		err := c.lake.Put(ctx, obj)
		if err == nil {
			break
		}
		c.m.flushes.WithLabelValues("retry").Inc()
		c.log.Warn("write object", "key", obj.Key, "attempt", attempt, "err", err)
		if clock.Sleep(ctx, c.clk, c.writeBackoff.Delay(attempt)) != nil || ctx.Err() != nil {
			// The drain deadline passed: the messages stay undeleted and
			// are handed back.
			c.m.flushes.WithLabelValues("abandoned").Inc()
			c.buf.abandon(b)
			return
		}
	}
	c.m.flushes.WithLabelValues("ok").Inc()
	c.m.objectBytes.Observe(float64(len(obj.Body)))
	c.m.flushSeconds.Observe(c.clk.Since(start).Seconds())
	if b.key.IsErrors() {
		c.m.errorsWritten.Add(float64(len(b.items)))
	} else {
		c.m.events.WithLabelValues(string(b.key.Type), "written").Add(float64(len(b.items)))
	}
	c.log.Info("object written", "key", obj.Key, "events", len(b.items), "bytes", len(obj.Body))
	if c.opt.PauseAfterWrite > 0 {
		c.log.Info("paused after write", "key", obj.Key, "pause", c.opt.PauseAfterWrite)
		_ = clock.Sleep(ctx, c.clk, c.opt.PauseAfterWrite)
	}
	c.deleteBatch(ctx, b)
}

func (c *Consumer) encode(b *batch) (pipeline.LakeObject, error) {
	if b.key.IsErrors() {
		lines := make([]pipeline.LakeErrorLine, len(b.items))
		for i, it := range b.items {
			lines[i] = *it.bad
		}
		return c.lake.EncodeErrors(b.key.Hour, lines)
	}
	ids := make([]string, len(b.items))
	evs := make([]pipeline.LakeRecord, len(b.items))
	for i, it := range b.items {
		ids[i] = it.msgID
		evs[i] = it.ev
	}
	return c.lake.EncodeEvents(b.key, ids, evs)
}

// reroute sends the events of a batch that cannot be encoded to the errors
// buffer with the reason: retrying a deterministic failure would never end,
// and dropping the events would lose them.
func (c *Consumer) reroute(b *batch, cause error) {
	c.m.flushes.WithLabelValues("rerouted").Inc()
	c.log.Error("encode batch; sending its events to errors", "events", len(b.items), "err", cause)
	now := c.clk.Now().UTC()
	items := make([]item, len(b.items))
	for i, it := range b.items {
		if it.bad == nil {
			body, _ := jsonLine(it.ev)
			it.bad = &pipeline.LakeErrorLine{MessageID: it.msgID, ReceivedAt: it.ev.ReceivedAt, Reason: "encode: " + cause.Error(),
				EventID: it.ev.EventID, EventType: it.ev.EventType, Body: body}
		}
		items[i] = it
	}
	c.buf.reopen(b, pipeline.NewLakePartition("", now), items, now)
}

// jsonLine renders a decoded event back to its wire JSON for the errors
// partition.
func jsonLine(ev pipeline.LakeRecord) (string, error) {
	b, err := json.Marshal(ev.LakeEvent)
	return string(b), err
}

// deleteBatch deletes the messages of a written batch. The queue retries
// failed entries itself; a message whose delete still failed is tried
// again here, at once, when it has a newer receipt (it was redelivered
// while held, and only the latest receipt deletes it). A message that
// still fails is redelivered later and written again: a duplicate, which
// the views remove.
func (c *Consumer) deleteBatch(ctx context.Context, b *batch) {
	left := make([]string, len(b.items))
	for i, it := range b.items {
		left[i] = it.msgID
	}
	tried := make(map[string]string, len(left)) // message id -> receipt last tried
	var err error
	for round := 0; len(left) > 0 && round < deleteRounds; round++ {
		ids, receipts, stale := c.leases.untried(left, tried)
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
	c.leases.release(b.items)
	c.buf.release(b)
}
