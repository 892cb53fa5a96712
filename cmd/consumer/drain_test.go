package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/lifecycle"
	"github.com/chatguard/chatguard/consumer"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline/queuetest"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

// stuckPutter is an object store whose writes hang until their ctx ends.
type stuckPutter struct {
	once    sync.Once
	started chan struct{}
}

func (s *stuckPutter) Put(ctx context.Context, _ string, _ []byte, _ string) error {
	s.once.Do(func() { close(s.started) })
	<-ctx.Done()
	return ctx.Err()
}

// The consumer's drain has one timer, the lifecycle group's: the engine
// service, as the consumer lists it, keeps writing for --drain-timeout on
// the group's clock after the stop, and only then hands the unwritten
// messages back.
func TestEngineDrainIsTimedByTheGroup(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC))
	cfg := DefaultConfig()
	cfg.FlushAge, cfg.FlushConcurrency, cfg.ReceiveConcurrency, cfg.DrainTimeout = time.Hour, 1, 1, 7*time.Second
	q := queuetest.NewFake(queuetest.Config{Clock: clk, MaxWait: 20 * time.Millisecond})
	for _, ev := range s3laketest.Events(10, 3, time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC), 1) {
		q.Enqueue(s3laketest.Body(t, ev))
	}
	store := &stuckPutter{started: make(chan struct{})}
	lake, err := s3lake.NewLake(store, s3lake.DefaultEventsPrefix, s3lake.DefaultErrorsPrefix)
	require.NoError(t, err)
	p := &parts{cfg: cfg}
	p.engine, err = consumer.New(cfg.Config, q, lake, consumer.Options{Clock: clk})
	require.NoError(t, err)

	g := lifecycle.New(nil, clk)
	svc, ok := lifecycle.Named(p.services(), "consumer")
	require.True(t, ok, "the consumer lists no engine service")
	g.Add(svc)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	require.Eventually(t, func() bool { return q.Received() == 10 }, 10*time.Second, time.Millisecond, "every message received")
	cancel()
	<-store.started // the final flush is writing

	wait, stopWait := context.WithTimeout(context.Background(), 10*time.Second)
	defer stopWait()
	// The flusher's and the lease renewal's tickers and the group's drain timer.
	require.NoError(t, clk.BlockUntilContext(wait, 3))
	clk.Advance(cfg.DrainTimeout - time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the group returned before the drain timeout: %v", err)
	default:
	}
	require.Zero(t, q.Stats().Visible, "nothing handed back before the drain timeout")

	clk.Advance(time.Millisecond)
	select {
	case err := <-done:
		require.ErrorContains(t, err, "10 messages not written")
	case <-time.After(10 * time.Second):
		t.Fatal("the group did not return at the drain timeout")
	}
	require.Equal(t, 10, q.Stats().Visible, "the unwritten messages handed back at once")
}
