package redislive

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
)

func TestAppendReadResumeAndGone(t *testing.T) {
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.KeyPrefix = stacktest.Unique("live-test") + ":"
	cfg.MaxLen = 16
	l, err := New(stacktest.Redis(t), cfg)
	require.NoError(t, err)

	_, err = l.Read(ctx, "r1", 0, 0)
	require.ErrorIs(t, err, pipeline.ErrLiveGone, "a review never written is gone")

	var evs []pipeline.LiveEvent
	for i := uint64(1); i <= 5; i++ {
		evs = append(evs, pipeline.LiveEvent{Seq: i, Type: pipeline.LiveToken, Data: []byte(`{"text":"t"}`)})
	}
	require.NoError(t, l.Append(ctx, "r1", evs))
	got, err := l.Read(ctx, "r1", 3, 0)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, uint64(4), got[0].Seq)
	require.Equal(t, pipeline.LiveToken, got[0].Type)
	require.JSONEq(t, `{"text":"t"}`, string(got[0].Data))

	// A blocking read returns what arrives while it waits.
	done := make(chan []pipeline.LiveEvent, 1)
	go func() {
		evs, err := l.Read(ctx, "r1", 5, 5*time.Second)
		require.NoError(t, err)
		done <- evs
	}()
	require.Eventually(t, func() bool {
		return l.Append(ctx, "r1", []pipeline.LiveEvent{{Seq: 6, Type: pipeline.LiveVerdict, Data: []byte(`{}`)}}) == nil
	}, time.Second, 10*time.Millisecond)
	got = <-done
	require.Len(t, got, 1)
	require.Equal(t, pipeline.LiveVerdict, got[0].Type)

	// Trimmed past the position: gone, not silently skipped.
	var many []pipeline.LiveEvent
	for i := uint64(7); i <= 400; i++ {
		many = append(many, pipeline.LiveEvent{Seq: i, Type: pipeline.LiveToken, Data: []byte(`{}`)})
	}
	require.NoError(t, l.Append(ctx, "r1", many))
	_, err = l.Read(ctx, "r1", 2, 0)
	require.ErrorIs(t, err, pipeline.ErrLiveGone)
	ttl, err := stacktest.Redis(t).TTL(ctx, cfg.KeyPrefix+"r1").Result()
	require.NoError(t, err)
	require.Greater(t, ttl, time.Duration(0), "the stream expires")
}
