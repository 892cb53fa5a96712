package outbox

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

// echo is a follow-up that answers each accepted row with a feedback
// message of its own (its id derived from the row's), dated now.
func echo(rows []pipeline.OutboxRow, now time.Time) []pipeline.OutboxMessage {
	var out []pipeline.OutboxMessage
	for _, r := range rows {
		out = append(out, pipeline.OutboxMessage{Destination: pipeline.OutboxFeedback, EventID: "after-" + r.EventID, Body: []byte(now.Format(time.RFC3339))})
	}
	return out
}

// enqueueFailing is a store whose Enqueue fails while down is set.
type enqueueFailing struct {
	pipeline.OutboxStore
	down bool
}

func (s *enqueueFailing) Enqueue(ctx context.Context, now time.Time, msgs []pipeline.OutboxMessage) error {
	if s.down {
		return errors.New("connection refused")
	}
	return s.OutboxStore.Enqueue(ctx, now, msgs)
}

// TestFollowUpsAreEnqueuedBeforeTheMark: the rows of a destination with a
// follow-up get their follow-up messages when the queue accepts them; a
// follow-up the store cannot take leaves the rows unmarked, sent again
// after the lease, and the follow-up written then keeps its first copy.
func TestFollowUpsAreEnqueuedBeforeTheMark(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	mem := storetest.NewMemory()
	store := &enqueueFailing{OutboxStore: mem, down: true}
	clk := clock.NewFake(t0)
	actions, lake := &queue{}, &queue{}
	m := NewMetrics(nil)
	r, err := New(cfg, store, map[pipeline.OutboxDestination]pipeline.Sender{pipeline.OutboxActions: actions, pipeline.OutboxFeedback: lake}, clk, m, nil)
	require.NoError(t, err)
	r.FollowUp(pipeline.OutboxActions, echo)
	require.NoError(t, mem.Enqueue(context.Background(), clk.Now(), []pipeline.OutboxMessage{
		storetest.OutboxMessage(pipeline.OutboxActions, 1), storetest.OutboxMessage(pipeline.OutboxActions, 2),
	}))

	r.pass(context.Background())
	require.Len(t, actions.bodies(), 2, "sent")
	require.Equal(t, 1.0, testutil.ToFloat64(m.storeErrors.WithLabelValues("follow_up")))
	b, err := mem.Backlog(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, b[pipeline.OutboxActions].Pending, "no follow-up, no mark")
	require.Zero(t, b[pipeline.OutboxFeedback].Pending)

	store.down = false
	clk.Advance(cfg.Lease)
	r.pass(context.Background())
	require.Len(t, actions.bodies(), 4, "sent again after the lease: the consumer collapses the copy")
	b, err = mem.Backlog(context.Background())
	require.NoError(t, err)
	require.Zero(t, b[pipeline.OutboxActions].Pending, "marked once followed up")
	require.Equal(t, 2, b[pipeline.OutboxFeedback].Pending)

	clk.Advance(time.Minute)
	for r.pass(context.Background()) {
	}
	r.pass(context.Background())
	require.Len(t, lake.bodies(), 2, "one follow-up per row")
	require.Equal(t, clk.Now().Add(-time.Minute).Format(time.RFC3339), lake.bodies()[0], "dated by the accepting send")
}
