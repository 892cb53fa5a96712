package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/lifecycle"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline/jobloop"
	"github.com/chatguard/chatguard/pipeline/queuetest"
)

// The worker's two-phase drain has one timer, the lifecycle group's: the
// job loop service, as the worker lists it, lets its jobs run for
// --drain-timeout on the group's clock after the stop, and only then are
// they cancelled with ErrDraining and their messages handed back.
func TestJobLoopDrainIsTimedByTheGroup(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC))
	cfg := DefaultConfig()
	cfg.Loop.Concurrency, cfg.Loop.JobTimeout, cfg.Loop.DrainTimeout = 2, time.Hour, 7*time.Second
	q := queuetest.NewFake(queuetest.Config{Clock: clk})
	q.Enqueue([]byte("a"), []byte("b"))
	causes := make(chan error, 2)
	h := jobloop.HandlerFunc(func(ctx context.Context, _ jobloop.Message) jobloop.Outcome {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return jobloop.Outcome{Action: jobloop.Retry, Err: ctx.Err()}
	})
	w := &worker{cfg: cfg, log: slog.New(slog.DiscardHandler)}
	var err error
	w.loop, err = jobloop.New(cfg.Loop, q, queuetest.NewFake(queuetest.Config{Clock: clk}), h, clk, nil, nil)
	require.NoError(t, err)

	g := lifecycle.New(nil, clk)
	svc, ok := lifecycle.Named(w.services(), "job loop")
	require.True(t, ok, "the worker lists no job loop service")
	g.Add(svc)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	require.Eventually(t, func() bool { return q.Stats().Received == 2 }, 10*time.Second, time.Millisecond, "both jobs running")
	cancel()

	wait, stopWait := context.WithTimeout(context.Background(), 10*time.Second)
	defer stopWait()
	// The heartbeat, the two jobs' deadlines and the group's drain timer.
	require.NoError(t, clk.BlockUntilContext(wait, 4))
	clk.Advance(cfg.Loop.DrainTimeout - time.Millisecond)
	require.Eventually(t, w.loop.Draining, 10*time.Second, time.Millisecond)
	select {
	case c := <-causes:
		t.Fatalf("a job was cancelled before the drain timeout: %v", c)
	case err := <-done:
		t.Fatalf("the group returned before the drain timeout: %v", err)
	default:
	}
	require.Zero(t, q.Stats().Visible, "nothing handed back before the drain timeout")

	clk.Advance(time.Millisecond)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the group did not return at the drain timeout")
	}
	for range 2 {
		require.ErrorIs(t, <-causes, jobloop.ErrDraining)
	}
	require.Equal(t, 2, q.Stats().Visible, "both messages handed back at once")
}
