package jobloop

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/drain"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/queuetest"
)

func TestPrioritizedReceivesTheFirstQueueFirstAndSettlesEachInItsQueue(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC))
	rt, batch := queuetest.NewFake(queuetest.Config{Clock: clk}), queuetest.NewFake(queuetest.Config{Clock: clk})
	p := NewPrioritized(Queue{Name: "rt", Inbox: rt}, Queue{Name: "batch", Inbox: batch})
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

// A review-realtime that fails every receive for ten minutes (deleted, a
// lost permission) backs off its own pollers and is counted, while batch
// reviews keep flowing; once it answers again its messages go first.
func TestPrioritizedQueueFailingForTenMinutesKeepsTheOtherFlowing(t *testing.T) {
	clk := clock.NewFake(t0)
	rt, batch := queuetest.NewFake(queuetest.Config{Clock: clk}), queuetest.NewFake(queuetest.Config{Clock: clk})
	down := errors.New("AWS.SimpleQueueService.NonExistentQueue")
	var failing atomic.Bool
	failing.Store(true)
	rt.SetFault(func(op queuetest.Op, _ queuetest.Entry) error {
		if op == queuetest.OpReceive && failing.Load() {
			return down
		}
		return nil
	})
	var done atomic.Int64
	h := HandlerFunc(func(context.Context, Message) Outcome { done.Add(1); return Outcome{Action: Delete, Label: "done"} })
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	cfg := testConfig()
	cfg.Pollers = 2
	l, err := New(cfg, NewPrioritized(Queue{Name: "review-realtime", Inbox: rt}, Queue{Name: "review", Inbox: batch}), queuetest.NewFake(queuetest.Config{Clock: clk}), h, clk, m, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(drain.WithHard(context.Background(), context.Background()))
	ran := make(chan error, 1)
	go func() { ran <- l.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-ran) }()

	rtErrors := func() float64 { return testutil.ToFloat64(m.receives.WithLabelValues("review-realtime", "error")) }
	want := int64(0)
	for minute := range 10 {
		batch.Enqueue([]byte("a"), []byte("b"), []byte("c"))
		want += 3
		eventually(t, func() bool { return done.Load() == want && batch.Stats().Deleted == int(want) },
			"minute %d: batch reviews flow while review-realtime fails (%d done)", minute, done.Load())
		eventually(t, func() bool { return rtErrors() >= float64(minute+1) }, "minute %d: the failed receives of review-realtime are counted", minute)
		// The heartbeat and the failing poller's backoff wait on the clock;
		// each minute moves the backoff on.
		wctx, cancelWait := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(t, clk.BlockUntilContext(wctx, 2))
		cancelWait()
		clk.Advance(time.Minute)
	}
	require.GreaterOrEqual(t, rtErrors(), 10.0, "every failed receive of review-realtime is counted")
	require.Zero(t, testutil.ToFloat64(m.receives.WithLabelValues("review", "error")))

	failing.Store(false)
	rt.Enqueue([]byte("rt"))
	// Its poller may be asleep in a backoff (10 s at most) or already
	// receiving: move the clock on until the message is done.
	eventually(t, func() bool { clk.Advance(10 * time.Second); return rt.Stats().Deleted == 1 }, "review-realtime flows again once it answers")
}

// A freed slot goes to a waiting poller of the first queue before the
// pollers of the second that have waited longer.
func TestSlotPoolServesTheFirstQueueFirst(t *testing.T) {
	p := newSlotPool(1)
	require.True(t, p.TryAcquire())
	ctx := context.Background()
	got := make(chan string, 2)
	go func() { require.NoError(t, p.Acquire(ctx, false)); got <- "second" }()
	eventually(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.waiters[1]) == 1 }, "the second queue's poller waits")
	go func() { require.NoError(t, p.Acquire(ctx, true)); got <- "first" }()
	eventually(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.waiters[0]) == 1 }, "the first queue's poller waits")
	require.False(t, p.TryAcquire(), "nothing is free while pollers wait")
	p.Release(1)
	require.Equal(t, "first", <-got)
	p.Release(1)
	require.Equal(t, "second", <-got)

	// A waiter that gives up leaves the queue; a slot granted to it as it
	// gave up goes on to the next.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, p.Acquire(cctx, true))
	p.Release(1)
	require.True(t, p.TryAcquire())
}
