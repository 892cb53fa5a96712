package protect

import (
	"context"
	"encoding/json"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// LatencySender wraps the actions queue's sender: every action the queue
// accepts is observed as protection latency, from its message_at (the
// newest message of the reviewed window) to now. A copy sent again after
// a relay's crash is observed again: the histogram is of publishes.
type LatencySender struct {
	pipeline.Sender
	clk clock.Clock
	m   *Metrics
}

var _ pipeline.Sender = (*LatencySender)(nil)

// NewLatencySender wraps s, timed on clk (nil: the wall clock).
func NewLatencySender(s pipeline.Sender, clk clock.Clock, m *Metrics) *LatencySender {
	return &LatencySender{Sender: s, clk: clock.Or(clk), m: m}
}

// Send implements pipeline.Sender.
func (s *LatencySender) Send(ctx context.Context, msgs []pipeline.OutMessage) error {
	err := s.Sender.Send(ctx, msgs)
	now := s.clk.Now()
	for i, e := range pipeline.EntryErrors(err, len(msgs)) {
		if e != nil {
			continue
		}
		var head struct {
			MessageAt *time.Time         `json:"message_at"`
			Action    pipeline.ActionRef `json:"action"`
		}
		if json.Unmarshal(msgs[i].Body, &head) != nil || head.MessageAt == nil || !head.Action.ID.Protective() {
			continue
		}
		s.m.latency.WithLabelValues(string(head.Action.ID)).Observe(max(now.Sub(*head.MessageAt), 0).Seconds())
	}
	return err
}

// PublishedEvents is the actions queue's outbox follow-up
// (outbox.Relay.FollowUp): each action the queue accepted at now gets its
// published lake event (pipeline.ActionPublishedEvent), which the relay
// enqueues before it marks the action sent. A body the reader refuses
// has no event (the chat service dead-letters it too).
func PublishedEvents(rows []pipeline.OutboxRow, now time.Time) []pipeline.OutboxMessage {
	out := make([]pipeline.OutboxMessage, 0, len(rows))
	for _, r := range rows {
		ev, err := pipeline.ActionPublishedEvent(r.Body, now, r.Attempts)
		if err != nil {
			continue
		}
		m, err := pipeline.LakeOutboxMessage(ev)
		if err != nil {
			continue
		}
		out = append(out, m)
	}
	return out
}
