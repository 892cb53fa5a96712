package redisstop

import (
	"context"
	"testing"
	"time"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/stop"
)

// BenchmarkStopCheckPerChunk compares the in-process holder lookup that the
// worker does on every streamed chunk with the alternative of asking Redis
// on every chunk. It also reports Redis commands per review for a review of
// chunksPerReview chunks that is never stopped.
func BenchmarkStopCheckPerChunk(b *testing.B) {
	const chunksPerReview = 200
	rdb := stacktest.RedisNode(b).Client(b, nil)
	cfg := DefaultConfig()
	name := stacktest.Unique("bench-stop")
	cfg.Channel, cfg.KeyPrefix = name, name+":"
	counter := &countHook{}
	rdb.AddHook(counter)
	holder := stop.NewHolder(nil, nil)
	now := time.Now().UTC()
	for i := range 100 { // a realistic number of live stops elsewhere
		holder.Add(pipeline.StopSignal{Scope: pipeline.StopScopeRoom, RoomID: "other-" + string(rune('a'+i%26)) + time.Duration(i).String(), Reason: "x", PublishedAt: now, ExpiresAt: now.Add(time.Hour)})
	}
	sub := NewSubscriber(rdb, cfg, nil, nil)
	target := pipeline.NewStopTarget("room-bench", now.Truncate(time.Hour), now.Truncate(time.Hour).Add(time.Hour), "run-bench")
	ctx := context.Background()

	b.Run("holder", func(b *testing.B) {
		counter.n.Store(0)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if i%chunksPerReview == 0 { // each review checks Redis once, when it starts
				if found, err := sub.Lookup(ctx, target); err != nil || len(found) > 0 {
					b.Fatal(err, found)
				}
			}
			if _, stopped := holder.Check(target); stopped {
				b.Fatal("stopped")
			}
		}
		reviews := float64(b.N+chunksPerReview-1) / chunksPerReview
		b.ReportMetric(float64(counter.n.Load())/reviews, "redis-cmds/review")
	})
	b.Run("redis-poll", func(b *testing.B) {
		counter.n.Store(0)
		var keys []string
		for _, k := range target.Keys() {
			keys = append(keys, cfg.KeyPrefix+k)
		}
		b.ReportAllocs()
		for b.Loop() {
			n, err := rdb.Exists(ctx, keys...).Result()
			if err != nil || n != 0 {
				b.Fatal(err, n)
			}
		}
		b.ReportMetric(float64(counter.n.Load())/(float64(b.N)/chunksPerReview), "redis-cmds/review")
	})
}
