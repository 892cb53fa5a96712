package queuetest_test

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

func TestFakeConformance(t *testing.T) {
	t.Parallel()
	queuetest.Run(t, func(t *testing.T, maxReceive int) queuetest.Backend {
		// Long polls as long as asked, like SQS.
		dlq := queuetest.NewFake(queuetest.Config{MaxWait: 20 * time.Second})
		q := queuetest.NewFake(queuetest.Config{MaxReceive: maxReceive, DLQ: dlq, MaxWait: 20 * time.Second})
		return queuetest.Backend{Queue: q, DLQ: dlq, MaxReceive: maxReceive, Advance: q.Advance}
	})
}

// t0 is the time of a clock that only moves when the fake is advanced.
var t0 = time.Date(2026, 11, 3, 4, 0, 0, 0, time.UTC)

func fixed() clock.Clock { return clock.NewFake(t0) }

func TestFakeVisibilityFollowsItsClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := queuetest.NewFake(queuetest.Config{Clock: fixed()})
	ids := f.Enqueue([]byte("a"))
	msgs, err := f.Receive(ctx, pipeline.ReceiveRequest{Max: 1, Visibility: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, t0, msgs[0].SentAt)
	f.Advance(29 * time.Second)
	require.Zero(t, f.Stats().Visible, "still hidden a second before its timeout")
	f.Advance(time.Second)
	require.Equal(t, 1, f.Stats().Visible)
	st, ok := f.Message(ids[0])
	require.True(t, ok)
	require.Equal(t, 1, st.Receives)
	require.Equal(t, t0.Add(30*time.Second), st.VisibleAt)
}

func TestFakeAdvanceWakesAPoll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := queuetest.NewFake(queuetest.Config{Clock: fixed(), MaxWait: time.Minute})
	f.Enqueue([]byte("a"))
	_, err := f.Receive(ctx, pipeline.ReceiveRequest{Max: 1, Visibility: 10 * time.Second})
	require.NoError(t, err)
	got := make(chan []pipeline.Message, 1)
	go func() {
		msgs, _ := f.Receive(ctx, pipeline.ReceiveRequest{Max: 1, Wait: time.Minute, Visibility: 10 * time.Second})
		got <- msgs
	}()
	f.Advance(10 * time.Second)
	select {
	case msgs := <-got:
		require.Len(t, msgs, 1)
		require.Equal(t, 2, msgs[0].ReceiveCount)
	case <-time.After(10 * time.Second):
		t.Fatal("the poll did not see the message come back")
	}
}

func TestFakeFaultsAndLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := queuetest.NewFake(queuetest.Config{})
	f.Enqueue([]byte("a"), []byte("b"))
	boom := errors.New("injected")
	f.SetFault(func(op queuetest.Op, e queuetest.Entry) error {
		if op == queuetest.OpReceive || (op == queuetest.OpChangeVisibility && e.Visibility > 0) {
			return boom
		}
		return nil
	})
	_, err := f.Receive(ctx, pipeline.ReceiveRequest{Max: 2})
	require.ErrorIs(t, err, boom)
	f.SetFault(func(op queuetest.Op, e queuetest.Entry) error {
		if op == queuetest.OpChangeVisibility && e.Visibility > 0 {
			return boom
		}
		return nil
	})
	msgs, err := f.Receive(ctx, pipeline.ReceiveRequest{Max: 2, Visibility: time.Minute})
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	err = f.ChangeVisibility(ctx, []string{msgs[0].ReceiptHandle, msgs[1].ReceiptHandle}, time.Minute)
	for _, e := range pipeline.EntryErrors(err, 2) {
		require.ErrorIs(t, e, boom)
	}
	require.NoError(t, f.ChangeVisibility(ctx, []string{msgs[0].ReceiptHandle}, 0))
	require.Equal(t, []queuetest.VisibilityChange{{ID: msgs[0].ID, Visibility: 0}}, f.VisibilityChanges())
	require.Equal(t, []int{2, 2}, f.ReceiveAsks())
	err = f.Delete(ctx, []string{msgs[1].ReceiptHandle, "stale"})
	errs := pipeline.EntryErrors(err, 2)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], queuetest.ErrReceiptInvalid)
	st := f.Stats()
	require.Equal(t, 1, st.Held)
	require.Equal(t, 1, st.Deleted)
	require.Equal(t, 2, st.Received)
	require.Equal(t, 2, st.Calls[queuetest.OpReceive])
}

func TestFakeRedrivesToItsDLQ(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dlq := queuetest.NewFake(queuetest.Config{})
	f := queuetest.NewFake(queuetest.Config{MaxReceive: 1, DLQ: dlq, Clock: fixed()})
	f.Enqueue([]byte("x"))
	_, err := f.Receive(ctx, pipeline.ReceiveRequest{Max: 1, Visibility: time.Second})
	require.NoError(t, err)
	f.Advance(time.Second)
	msgs, err := f.Receive(ctx, pipeline.ReceiveRequest{Max: 1})
	require.NoError(t, err)
	require.Empty(t, msgs)
	require.Equal(t, 1, f.Stats().Redriven)
	require.Zero(t, f.Stats().Held)
	dead := dlq.Messages()
	require.Len(t, dead, 1)
	require.Equal(t, "x", string(dead[0].Body))
}
