package jobloop

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/queuetest"
)

func TestPrioritizedReceivesTheFirstQueueFirstAndSettlesEachInItsQueue(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC))
	rt, batch := queuetest.NewFake(queuetest.Config{Clock: clk}), queuetest.NewFake(queuetest.Config{Clock: clk})
	p := NewPrioritized(rt, batch, 0)
	batch.Enqueue([]byte(`{"b":1}`), []byte(`{"b":2}`), []byte(`{"b":3}`))
	rt.Enqueue([]byte(`{"r":1}`))
	req := pipeline.ReceiveRequest{Max: 10, Wait: 20 * time.Second, Visibility: time.Minute}

	got, err := p.Receive(ctx, req)
	require.NoError(t, err)
	require.Len(t, got, 1, "only the first queue's message while it has one")
	require.Equal(t, `{"r":1}`, string(got[0].Body))
	require.Zero(t, batch.Stats().Calls[queuetest.OpReceive])

	more, err := p.Receive(ctx, req)
	require.NoError(t, err)
	require.Len(t, more, 3, "the second queue once the first is empty")
	rt.Enqueue([]byte(`{"r":2}`))
	again, err := p.Receive(ctx, req)
	require.NoError(t, err)
	require.Len(t, again, 1, "a new first-queue message overtakes the rest of the backlog")

	// One settle call for messages of both queues goes to each queue.
	receipts := []string{got[0].ReceiptHandle, more[0].ReceiptHandle, more[1].ReceiptHandle}
	require.NoError(t, p.Delete(ctx, receipts))
	require.Equal(t, 1, rt.Stats().Deleted)
	require.Equal(t, 2, batch.Stats().Deleted)
	require.NoError(t, p.ChangeVisibility(ctx, []string{again[0].ReceiptHandle, more[2].ReceiptHandle}, 0))
	require.Equal(t, 1, rt.Stats().Visible)
	require.Equal(t, 1, batch.Stats().Visible)

	// A failure is reported for its entry, in the caller's order.
	boom := errors.New("InternalError")
	batch.SetFault(func(op queuetest.Op, _ queuetest.Entry) error {
		if op == queuetest.OpDelete {
			return boom
		}
		return nil
	})
	r1, err := p.Receive(ctx, req)
	require.NoError(t, err)
	b1, err := p.Receive(ctx, req)
	require.NoError(t, err)
	err = p.Delete(ctx, []string{b1[0].ReceiptHandle, r1[0].ReceiptHandle})
	errs := pipeline.EntryErrors(err, 2)
	require.ErrorIs(t, errs[0], boom)
	require.NoError(t, errs[1])
}
