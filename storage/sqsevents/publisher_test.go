package sqsevents

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

type fakeAPI struct {
	mu       sync.Mutex
	bodies   []string
	sizes    []int
	failOnce map[string]bool // body → fail its first send server-side
	callErrs int
	block    chan struct{}
}

func (f *fakeAPI) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.callErrs > 0 {
		f.callErrs--
		return nil, errors.New("fake: unavailable")
	}
	f.sizes = append(f.sizes, len(in.Entries))
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		b := aws.ToString(e.MessageBody)
		if f.failOnce[b] {
			delete(f.failOnce, b)
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError")})
			continue
		}
		f.bodies = append(f.bodies, b)
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *fakeAPI) sent() ([]string, []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...), append([]int(nil), f.sizes...)
}

func event(i int) pipeline.LakeEvent {
	return pipeline.LakeEvent{EventID: "e" + string(rune('A'+i%26)) + string(rune('a'+i/26)), EventType: pipeline.EventInferenceLog,
		OccurredAt: time.Date(2026, 11, 3, 4, 0, 0, 0, time.UTC), SchemaVersion: 1,
		Payload: pipeline.InferenceLog{RoomID: "r1", Stage: pipeline.StageTriage, Pool: pipeline.PoolPrimary, Outcome: "ok"}}
}

func setup(t *testing.T, api *fakeAPI, mut func(*Config)) *Publisher {
	t.Helper()
	cfg := DefaultConfig()
	cfg.QueueURL = "feedback"
	cfg.FlushAge = 20 * time.Millisecond
	if mut != nil {
		mut(&cfg)
	}
	p, err := New(cfg, api, prometheus.NewRegistry())
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

func TestPublishBatchesAndFlushesByAge(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{}
	p := setup(t, api, nil)
	for i := range 25 {
		require.True(t, p.Publish(event(i)))
	}
	require.Eventually(t, func() bool { b, _ := api.sent(); return len(b) == 25 }, 5*time.Second, 5*time.Millisecond)
	bodies, sizes := api.sent()
	for _, s := range sizes {
		require.LessOrEqual(t, s, 10)
	}
	require.Less(t, len(sizes), 25)
	var got pipeline.LakeEvent
	require.NoError(t, json.Unmarshal([]byte(bodies[0]), &got))
	require.Equal(t, pipeline.EventInferenceLog, got.EventType)
	require.Equal(t, 25.0, testutil.ToFloat64(p.published))
}

func TestPublishDropsWhenFull(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{block: make(chan struct{})}
	p := setup(t, api, func(c *Config) { c.Buffer, c.Senders = 5, 1 })
	accepted := 0
	for i := range 200 {
		if p.Publish(event(i)) {
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
	bodies, _ := api.sent()
	require.Len(t, bodies, accepted, "every accepted event is sent by Stop")
	require.False(t, p.Publish(event(1)))
	require.Equal(t, 1.0, testutil.ToFloat64(p.dropped.WithLabelValues("stopped")))
}

func TestPublishRetriesFailedEntries(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(event(3))
	require.NoError(t, err)
	api := &fakeAPI{failOnce: map[string]bool{string(b): true}, callErrs: 1}
	p := setup(t, api, nil)
	for i := range 5 {
		require.True(t, p.Publish(event(i)))
	}
	require.Eventually(t, func() bool { b, _ := api.sent(); return len(b) == 5 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, 1.0, testutil.ToFloat64(p.calls.WithLabelValues("error")))
	require.Equal(t, 1.0, testutil.ToFloat64(p.calls.WithLabelValues("partial")))
	require.Zero(t, testutil.ToFloat64(p.dropped.WithLabelValues("send_failed")))
}

func TestPublishGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{callErrs: 1000}
	p := setup(t, api, func(c *Config) { c.MaxAttempts = 2 })
	require.True(t, p.Publish(event(0)))
	require.Eventually(t, func() bool { return testutil.ToFloat64(p.dropped.WithLabelValues("send_failed")) == 1 }, 5*time.Second, 5*time.Millisecond)
}

func TestStopFlushesAndHonoursDeadline(t *testing.T) {
	t.Parallel()
	t.Run("flush", func(t *testing.T) {
		t.Parallel()
		api := &fakeAPI{}
		p := setup(t, api, func(c *Config) { c.FlushAge = time.Hour })
		for i := range 7 {
			p.Publish(event(i))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, p.Stop(ctx))
		bodies, _ := api.sent()
		require.Len(t, bodies, 7)
	})
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		api := &fakeAPI{block: make(chan struct{})}
		p := setup(t, api, func(c *Config) { c.FlushAge = time.Millisecond })
		p.Publish(event(0))
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, p.Stop(ctx), context.DeadlineExceeded)
	})
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	err := Config{}.Validate()
	for _, w := range []string{"queue url", "buffer", "flush age", "senders", "call timeout", "attempts"} {
		require.ErrorContains(t, err, w)
	}
}

func BenchmarkPublish(b *testing.B) {
	api := &fakeAPI{}
	cfg := DefaultConfig()
	cfg.QueueURL = "feedback"
	p, err := New(cfg, api, nil)
	require.NoError(b, err)
	p.Start()
	ev := event(1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p.Publish(ev)
		}
	})
	b.StopTimer()
	_ = p.Stop(context.Background())
}
