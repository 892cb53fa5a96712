package sqs

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

func lakeEvent(i int) pipeline.LakeEvent {
	return pipeline.LakeEvent{EventID: "e" + string(rune('A'+i%26)) + string(rune('a'+i/26)), EventType: pipeline.EventInferenceLog,
		OccurredAt: time.Date(2026, 11, 3, 4, 0, 0, 0, time.UTC), SchemaVersion: 1,
		Payload: pipeline.InferenceLog{RoomID: "r1", Stage: pipeline.StageTriage, Pool: pipeline.PoolPrimary, Outcome: "ok"}}
}

func lakePublisher(t *testing.T, api *scriptAPI, mutate func(*LakeConfig)) *LakePublisher {
	t.Helper()
	cfg := DefaultLakeConfig()
	cfg.URL = "feedback"
	cfg.FlushAge = 20 * time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := NewLakePublisher(api, cfg, prometheus.NewRegistry(), (&waits{}).record())
	require.NoError(t, err)
	p.Start()
	t.Cleanup(func() {
		if api.block != nil {
			select {
			case <-api.block:
			default:
				close(api.block)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Stop(ctx)
	})
	return p
}

func (a *scriptAPI) sent() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.accepted)
}

func TestLakePublishBatchesAndFlushesByAge(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	p := lakePublisher(t, api, nil)
	for i := range 25 {
		require.True(t, p.Publish(lakeEvent(i)))
	}
	// The last five wait for their batch no longer than the flush age.
	require.Eventually(t, func() bool { return api.sent() == 25 }, 5*time.Second, 5*time.Millisecond)
	sizes := api.sortedSizes(OpSend)
	for _, s := range sizes {
		require.LessOrEqual(t, s, 10)
	}
	require.Less(t, len(sizes), 25)
	for body := range api.accepted {
		var got pipeline.LakeEvent
		require.NoError(t, json.Unmarshal([]byte(body), &got))
		require.Equal(t, pipeline.EventInferenceLog, got.EventType)
	}
	require.Equal(t, 25.0, testutil.ToFloat64(p.published))
}

func TestLakePublishDropsWhenFull(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	api.block = make(chan struct{})
	p := lakePublisher(t, api, func(c *LakeConfig) { c.Buffer, c.Concurrency = 5, 1 })
	accepted := 0
	for i := range 200 {
		if p.Publish(lakeEvent(i)) {
			accepted++
		}
	}
	dropped := testutil.ToFloat64(p.dropped.WithLabelValues("buffer_full"))
	require.Positive(t, dropped)
	require.Equal(t, 200.0, float64(accepted)+dropped)
	close(api.block)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.Stop(ctx))
	require.Equal(t, accepted, api.sent(), "every accepted event is sent by Stop")
	require.False(t, p.Publish(lakeEvent(1)))
	require.Equal(t, 1.0, testutil.ToFloat64(p.dropped.WithLabelValues("stopped")))
}

func TestLakePublishRetriesFailedEntries(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(lakeEvent(3))
	require.NoError(t, err)
	api := newScriptAPI()
	api.fail = func(_ Op, body string, seen int) (bool, bool) { return body == string(b) && seen == 1, false }
	api.callErr = func(_ Op, n int, _ []string) error {
		if n == 1 {
			return context.DeadlineExceeded
		}
		return nil
	}
	// One batch: the flush age outlasts the five publishes.
	p := lakePublisher(t, api, func(c *LakeConfig) { c.FlushAge = time.Hour })
	for i := range 5 {
		require.True(t, p.Publish(lakeEvent(i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.Stop(ctx))
	require.Equal(t, 5, api.sent())
	require.Equal(t, 1.0, testutil.ToFloat64(p.calls.WithLabelValues("error")))
	require.Equal(t, 1.0, testutil.ToFloat64(p.calls.WithLabelValues("partial")))
	require.Equal(t, 1.0, testutil.ToFloat64(p.calls.WithLabelValues("ok")))
	require.Zero(t, testutil.ToFloat64(p.dropped.WithLabelValues("send_failed")))
}

func TestLakePublishCountsWhatIsLost(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	api.callErr = func(Op, int, []string) error { return context.DeadlineExceeded }
	p := lakePublisher(t, api, func(c *LakeConfig) { c.Retry.Attempts = 2; c.FlushAge = time.Hour })
	require.True(t, p.Publish(lakeEvent(0)))
	big := lakeEvent(1)
	big.Payload = pipeline.InferenceLog{RoomID: strings.Repeat("x", MaxMessageBytes)}
	require.True(t, p.Publish(big))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.Stop(ctx))
	require.Equal(t, 1.0, testutil.ToFloat64(p.dropped.WithLabelValues("send_failed")))
	require.Equal(t, 1.0, testutil.ToFloat64(p.dropped.WithLabelValues("too_large")))
	require.Equal(t, 2, api.callCount(OpSend), "two attempts, the too-large event never sent")

	api2 := newScriptAPI()
	api2.fail = func(Op, string, int) (bool, bool) { return true, true }
	p2 := lakePublisher(t, api2, func(c *LakeConfig) { c.FlushAge = time.Hour })
	require.True(t, p2.Publish(lakeEvent(0)))
	require.NoError(t, p2.Stop(ctx))
	require.Equal(t, 1.0, testutil.ToFloat64(p2.dropped.WithLabelValues("rejected")))
	require.Equal(t, 1, api2.callCount(OpSend), "a sender fault is not retried")
}

func TestLakeStopFlushesAndHonoursDeadline(t *testing.T) {
	t.Parallel()
	t.Run("flush", func(t *testing.T) {
		t.Parallel()
		api := newScriptAPI()
		p := lakePublisher(t, api, func(c *LakeConfig) { c.FlushAge = time.Hour })
		for i := range 7 {
			p.Publish(lakeEvent(i))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, p.Stop(ctx))
		require.Equal(t, 7, api.sent())
	})
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		api := newScriptAPI()
		api.block = make(chan struct{})
		api.started = make(chan Op, 1)
		p := lakePublisher(t, api, func(c *LakeConfig) { c.FlushAge = time.Millisecond })
		p.Publish(lakeEvent(0))
		<-api.started
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, p.Stop(ctx), context.Canceled)
		require.Equal(t, 1.0, testutil.ToFloat64(p.dropped.WithLabelValues("send_failed")), "the unsent event is counted")
	})
}

func TestLakeConfigValidate(t *testing.T) {
	t.Parallel()
	err := LakeConfig{}.Validate()
	for _, w := range []string{"queue url", "buffer", "flush age", "concurrency", "call timeout", "attempts"} {
		require.ErrorContains(t, err, w)
	}
	c := DefaultLakeConfig()
	c.URL = "q"
	require.NoError(t, c.Validate())
}

// BenchmarkLakePublish measures Publish, the hot path of a review: it
// must stay a channel send.
func BenchmarkLakePublish(b *testing.B) {
	api := newScriptAPI()
	cfg := DefaultLakeConfig()
	cfg.URL = "feedback"
	p, err := NewLakePublisher(api, cfg, nil)
	require.NoError(b, err)
	p.Start()
	ev := lakeEvent(1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p.Publish(ev)
		}
	})
	b.StopTimer()
	_ = p.Stop(context.Background())
}
