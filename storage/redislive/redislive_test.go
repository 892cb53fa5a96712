package redislive

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
)

func TestAppendReadResumeAndGone(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		ctx := context.Background()
		cfg := DefaultConfig()
		cfg.KeyPrefix = stacktest.Unique("live-test") + ":"
		cfg.MaxLen = 16
		l, err := New(r.Client(t, nil), cfg)
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
		ttl, err := r.Client(t, nil).TTL(ctx, cfg.KeyPrefix+"r1").Result()
		require.NoError(t, err)
		require.Greater(t, ttl, time.Duration(0), "the stream expires")
	})
}

// Blocking reads go through the tail client, everything else through the
// writers' client: with a tail pool of one connection held by a blocked
// reader, appends still land at once.
func TestBlockingReadsUseTheTailClient(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		ctx := context.Background()
		cfg := DefaultConfig()
		cfg.KeyPrefix = stacktest.Unique("live-tail") + ":"
		// One connection per node (a cluster's pool is per node).
		tail := r.Client(t, func(o *redis.UniversalOptions) {
			// No retry: a cluster client retries a pool timeout on another node.
			o.PoolSize, o.PoolTimeout, o.ReadTimeout, o.MaxRetries = 1, 100*time.Millisecond, 5*time.Second, -1
		})
		// A first keyed command loads what a cluster client fetches lazily
		// (its slots, the COMMAND table) through a pooled connection: done
		// here, that fetch cannot pass for the blocked reader below.
		require.NoError(t, tail.Exists(ctx, cfg.KeyPrefix+"r").Err())
		// The pool of the node that holds the stream.
		pool := tail.PoolStats
		if cc, ok := tail.(*redis.ClusterClient); ok {
			node, err := cc.MasterForKey(ctx, cfg.KeyPrefix+"r")
			require.NoError(t, err)
			pool = node.PoolStats
		}
		l, err := New(r.Client(t, nil), cfg)
		require.NoError(t, err)
		l = l.WithTailClient(tail)
		require.NoError(t, l.Append(ctx, "r", []pipeline.LiveEvent{{Seq: 1, Type: pipeline.LiveToken, Data: []byte(`{}`)}}))

		// A reader blocks on the tail client's only connection, waiting for
		// event 2.
		got := make(chan []pipeline.LiveEvent, 1)
		go func() {
			evs, _ := l.Read(ctx, "r", 1, 3*time.Second)
			got <- evs
		}()
		require.Eventually(t, func() bool { st := pool(); return st.TotalConns == 1 && st.IdleConns == 0 },
			2*time.Second, time.Millisecond, "the reader holds the tail connection")
		// A second blocking reader finds the tail pool exhausted...
		_, err = l.Read(ctx, "r", 1, time.Second)
		require.Error(t, err, "the tail pool has one connection, held")
		// ...but appends do not wait for it, and wake the first reader.
		require.NoError(t, l.Append(ctx, "r", []pipeline.LiveEvent{{Seq: 2, Type: pipeline.LiveVerdict, Data: []byte(`{}`)}}))
		select {
		case evs := <-got:
			require.Len(t, evs, 1)
			require.Equal(t, uint64(2), evs[0].Seq)
		case <-time.After(5 * time.Second):
			t.Fatal("the blocked reader never saw the append")
		}
	})
}
