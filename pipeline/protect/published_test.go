package protect_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/policy"
	"github.com/chatguard/chatguard/pipeline/protect"
)

// TestPublishedEventsFollowAcceptedActions: each accepted action body
// gets its published lake event (a valid one, dated by the publish, with
// the sends it took and no raw account id); an unreadable body gets none.
func TestPublishedEventsFollowAcceptedActions(t *testing.T) {
	t.Parallel()
	p := protect.New(policy.Default(), &ledger{}, clock.NewFake(t0), nil, nil)
	v, err := p.Plan(context.Background(), verdict(), pipeline.ActionSourceRealtime)
	require.NoError(t, err)
	require.NotEmpty(t, v.Actions)
	var rows []pipeline.OutboxRow
	for i, a := range v.Actions {
		m, err := pipeline.ActionOutboxMessage(a.ProtectiveAction)
		require.NoError(t, err)
		rows = append(rows, pipeline.OutboxRow{ID: int64(i + 1), OutboxMessage: m, Attempts: 2})
	}
	rows = append(rows, pipeline.OutboxRow{ID: 99, OutboxMessage: pipeline.OutboxMessage{Destination: pipeline.OutboxActions, EventID: "x", Body: []byte("{}")}})
	at := t0.Add(3 * time.Second)
	msgs := protect.PublishedEvents(rows, at)
	require.Len(t, msgs, len(v.Actions), "the unreadable body has none")
	for i, m := range msgs {
		require.Equal(t, pipeline.OutboxFeedback, m.Destination)
		require.NotContains(t, string(m.Body), "seller-1", "no raw account id")
		ev, err := pipeline.DecodeLakeEvent(m.Body, at)
		require.NoError(t, err)
		require.Equal(t, m.EventID, ev.EventID)
		pe := ev.Payload.(pipeline.ActionEvent)
		require.Equal(t, v.Actions[i].IdempotencyKey, pe.IdempotencyKey)
		require.Equal(t, pipeline.ActionPhasePublished, pe.Phase)
		require.Equal(t, at, *pe.PublishedAt)
		require.Equal(t, 2, pe.Sends)
		require.Equal(t, verdict().NewestMessageAt, *pe.MessageAt, "latency is measured from the window's newest message")
	}
}
