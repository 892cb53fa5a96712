package sqsjob

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func testConfig() Config {
	c := DefaultConfig()
	c.QueueURL, c.DLQURL = "q", "dlq"
	c.Concurrency = 4
	c.WaitTime = 20 * time.Second
	c.VisibilityTimeout = 30 * time.Second
	c.HeartbeatInterval = 10 * time.Second
	c.JobTimeout = 10 * time.Second
	c.DrainTimeout = 5 * time.Second
	c.RetryBase, c.RetryMax = time.Second, 4*time.Second
	c.CallTimeout = 2 * time.Second
	return c
}

type harness struct {
	sqs    *fakeSQS
	loop   *Loop
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
}

// setup starts a loop over a fake queue; stop() drains it and returns
// Run's error.
func setup(t *testing.T, cfg Config, h Handler, bodies ...string) (*harness, func() error) {
	t.Helper()
	f := newFakeSQS(cfg.MaxReceiveCount)
	for _, b := range bodies {
		f.send(b)
	}
	reg := prometheus.NewRegistry()
	l, err := New(cfg, f, h, NewMetrics(reg), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	hs := &harness{sqs: f, loop: l, reg: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { hs.done <- l.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-hs.done:
			case <-time.After(cfg.DrainTimeout + 10*time.Second):
				runErr = errors.New("Run did not return")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return hs, stop
}

func eventually(t *testing.T, cond func() bool, msg string, args ...any) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 5*time.Millisecond, fmt.Sprintf(msg, args...))
}

func TestLoopDeletesDoneJobsWithinConcurrency(t *testing.T) {
	t.Parallel()
	var cur, peak atomic.Int32
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		cur.Add(-1)
		return Outcome{Action: Delete, Label: "done"}
	})
	bodies := make([]string, 40)
	for i := range bodies {
		bodies[i] = fmt.Sprintf("body-%d", i)
	}
	cfg := testConfig()
	hs, stop := setup(t, cfg, h, bodies...)
	eventually(t, func() bool { return hs.sqs.remaining() == 0 }, "all messages deleted")
	require.NoError(t, stop())
	require.LessOrEqual(t, peak.Load(), int32(cfg.Concurrency))
	require.Equal(t, 40.0, testutil.ToFloat64(hs.loop.m.jobs.WithLabelValues("done")))
	require.Equal(t, 40.0, testutil.ToFloat64(hs.loop.m.deleted))
	_, _, asks, _ := hs.sqs.snapshot()
	for _, a := range asks {
		require.GreaterOrEqual(t, a, int32(1))
		require.LessOrEqual(t, a, int32(cfg.Concurrency))
	}
	for _, m := range hs.sqs.msgs {
		require.Equal(t, 1, m.receives, "message %s received more than once", m.id)
	}
	require.Less(t, hs.sqs.deleteCalls, 40, "deletes are batched")
}

func TestLoopAsksOnlyForFreeSlots(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		<-release
		return Outcome{Action: Delete}
	})
	cfg := testConfig()
	cfg.Concurrency = 3
	hs, stop := setup(t, cfg, h, "a", "b", "c", "d", "e")
	eventually(t, func() bool { return testutil.ToFloat64(hs.loop.m.inflight) == 3 }, "three in flight")
	time.Sleep(50 * time.Millisecond)
	_, _, asks, _ := hs.sqs.snapshot()
	require.Equal(t, int32(3), asks[0])
	total := int32(0)
	for _, a := range asks {
		total += a
	}
	require.Equal(t, int32(3), total, "no receive while every slot is busy: %v", asks)
	close(release)
	eventually(t, func() bool { return hs.sqs.remaining() == 0 }, "all deleted")
	require.NoError(t, stop())
}

func TestLoopPoisonGoesToDLQWithReason(t *testing.T) {
	t.Parallel()
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		if string(m.Body) == "bad" {
			return Outcome{Action: Poison, Label: "poison", Reason: "not a JSON review event"}
		}
		return Outcome{Action: Delete, Label: "done"}
	})
	hs, stop := setup(t, testConfig(), h, "bad", "good")
	eventually(t, func() bool { return hs.sqs.remaining() == 0 }, "both deleted")
	require.NoError(t, stop())
	dlq, _, _, _ := hs.sqs.snapshot()
	require.Len(t, dlq, 1)
	require.Equal(t, "bad", aws.ToString(dlq[0].Body))
	require.Equal(t, "not a JSON review event", aws.ToString(dlq[0].MessageAttributes[AttrErrorReason].StringValue))
	require.Equal(t, "msg-1", aws.ToString(dlq[0].MessageAttributes[AttrSourceMessageID].StringValue))
	require.Equal(t, "1", aws.ToString(dlq[0].MessageAttributes[AttrReceiveCount].StringValue))
	require.Equal(t, 1.0, testutil.ToFloat64(hs.loop.m.poison))
}

func TestLoopRetriesUntilRedrive(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []Message
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		mu.Lock()
		seen = append(seen, m)
		mu.Unlock()
		return Outcome{Action: Retry, Label: "retry", Err: errors.New("model down")}
	})
	cfg := testConfig()
	cfg.MaxReceiveCount = 3
	cfg.RetryBase, cfg.RetryMax = time.Millisecond, time.Millisecond
	hs, stop := setup(t, cfg, h, "x")
	eventually(t, func() bool { dlq, _, _, _ := hs.sqs.snapshot(); return len(dlq) == 1 }, "redriven to the DLQ")
	require.NoError(t, stop())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 3)
	for i, m := range seen {
		require.Equal(t, i+1, m.ReceiveCount)
		require.Equal(t, i == 2, m.Final)
	}
	_, vis, _, _ := hs.sqs.snapshot()
	require.Len(t, vis, 3)
	for _, v := range vis {
		require.LessOrEqual(t, v.vis, int32(1))
	}
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.RetryBase, cfg.RetryMax = time.Second, 30*time.Second
	l, err := New(cfg, newFakeSQS(5), HandlerFunc(nil), nil, nil)
	require.NoError(t, err)
	tests := []struct {
		n        int
		after    time.Duration
		lo, hiEx time.Duration
	}{
		{n: 1, lo: 0, hiEx: time.Second},
		{n: 3, lo: 0, hiEx: 4 * time.Second},
		{n: 6, lo: 0, hiEx: 30 * time.Second},
		{n: 60, lo: 0, hiEx: 30 * time.Second},
		{n: 1, after: 10 * time.Second, lo: 10 * time.Second, hiEx: 10 * time.Second},
		{n: 1, after: 24 * time.Hour, lo: 12 * time.Hour, hiEx: 12 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("n=%d after=%s", tc.n, tc.after), func(t *testing.T) {
			t.Parallel()
			var hi time.Duration
			for range 500 {
				d := l.retryDelay(tc.n, tc.after)
				require.GreaterOrEqual(t, d, tc.lo)
				require.LessOrEqual(t, d, tc.hiEx)
				hi = max(hi, d)
			}
			// Jitter spreads the delays over the range.
			require.Greater(t, hi, tc.hiEx/2)
		})
	}
}

func TestLoopHeartbeatKeepsLongJobInvisible(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		runs.Add(1)
		time.Sleep(2500 * time.Millisecond)
		return Outcome{Action: Delete}
	})
	cfg := testConfig()
	cfg.VisibilityTimeout, cfg.HeartbeatInterval = time.Second, 300*time.Millisecond
	hs, stop := setup(t, cfg, h, "slow")
	eventually(t, func() bool { return hs.sqs.remaining() == 0 }, "deleted")
	require.NoError(t, stop())
	require.Equal(t, int32(1), runs.Load(), "the job was redelivered while it ran")
	_, _, _, beats := hs.sqs.snapshot()
	require.GreaterOrEqual(t, beats, 2)
	require.GreaterOrEqual(t, testutil.ToFloat64(hs.loop.m.extended), 2.0)
}

func TestLoopPanicIsAFailedAttempt(t *testing.T) {
	t.Parallel()
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		if string(m.Body) == "boom" && m.ReceiveCount == 1 {
			panic("nil map")
		}
		return Outcome{Action: Delete, Label: "done"}
	})
	cfg := testConfig()
	cfg.RetryBase, cfg.RetryMax = time.Millisecond, time.Millisecond
	hs, stop := setup(t, cfg, h, "boom", "fine")
	eventually(t, func() bool { return hs.sqs.remaining() == 0 }, "both deleted in the end")
	require.NoError(t, stop())
	require.Equal(t, 1.0, testutil.ToFloat64(hs.loop.m.panics))
	require.Equal(t, 1.0, testutil.ToFloat64(hs.loop.m.jobs.WithLabelValues("panic")))
	require.Equal(t, 2.0, testutil.ToFloat64(hs.loop.m.jobs.WithLabelValues("done")))
	require.Equal(t, 2, hs.sqs.msg("msg-1").receives)
}

func TestLoopDrain(t *testing.T) {
	t.Parallel()
	var causes sync.Map
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		switch string(m.Body) {
		case "quick":
			return Outcome{Action: Delete, Label: "done"}
		case "finishes-in-drain":
			time.Sleep(300 * time.Millisecond)
			return Outcome{Action: Delete, Label: "done"}
		}
		<-ctx.Done()
		causes.Store(m.ID, context.Cause(ctx))
		return Outcome{Action: Retry, Label: "retry", Err: ctx.Err()}
	})
	cfg := testConfig()
	cfg.DrainTimeout = time.Second
	hs, stop := setup(t, cfg, h, "quick", "finishes-in-drain", "stuck", "stuck")
	eventually(t, func() bool { return testutil.ToFloat64(hs.loop.m.inflight) == 3 }, "three in flight")
	start := time.Now()
	require.NoError(t, stop())
	took := time.Since(start)
	require.GreaterOrEqual(t, took, cfg.DrainTimeout)
	require.Less(t, took, cfg.DrainTimeout+3*time.Second)
	require.True(t, hs.loop.Draining())
	require.True(t, hs.sqs.msg("msg-1").deleted)
	require.True(t, hs.sqs.msg("msg-2").deleted)
	for _, id := range []string{"msg-3", "msg-4"} {
		m := hs.sqs.msg(id)
		require.False(t, m.deleted)
		require.False(t, m.visibleAt.After(time.Now()), "%s not visible at once", id)
		c, ok := causes.Load(id)
		require.True(t, ok)
		require.ErrorIs(t, c.(error), ErrDraining)
	}
	_, vis, _, _ := hs.sqs.snapshot()
	require.Len(t, vis, 2)
	for _, v := range vis {
		require.Equal(t, int32(0), v.vis)
	}
	require.Equal(t, 2.0, testutil.ToFloat64(hs.loop.m.jobs.WithLabelValues("released")))
}

func TestLoopJobTimeoutIsRetryable(t *testing.T) {
	t.Parallel()
	got := make(chan error, 1)
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		<-ctx.Done()
		select {
		case got <- context.Cause(ctx):
		default:
		}
		return Outcome{Action: Retry, Label: "retry", Err: ctx.Err()}
	})
	cfg := testConfig()
	cfg.JobTimeout = 100 * time.Millisecond
	hs, stop := setup(t, cfg, h, "x")
	select {
	case err := <-got:
		require.ErrorIs(t, err, ErrJobTimeout)
	case <-time.After(5 * time.Second):
		t.Fatal("job not timed out")
	}
	eventually(t, func() bool { _, vis, _, _ := hs.sqs.snapshot(); return len(vis) >= 1 }, "backoff set")
	require.NoError(t, stop())
}

func TestLoopSurvivesSQSFaults(t *testing.T) {
	t.Parallel()
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome { return Outcome{Action: Delete, Label: "done"} })
	cfg := testConfig()
	f := newFakeSQS(5)
	f.receiveErrs, f.deleteFaults = 2, 3
	for i := range 5 {
		f.send(fmt.Sprint(i))
	}
	reg := prometheus.NewRegistry()
	l, err := New(cfg, f, h, NewMetrics(reg), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	eventually(t, func() bool { return f.remaining() == 0 }, "all deleted despite faults")
	cancel()
	require.NoError(t, <-done)
	require.Equal(t, 2.0, testutil.ToFloat64(l.m.calls.WithLabelValues("receive", "error")))
	require.GreaterOrEqual(t, testutil.ToFloat64(l.m.calls.WithLabelValues("delete", "partial")), 1.0)
	require.Equal(t, 5.0, testutil.ToFloat64(l.m.deleted))
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, testConfig().Validate())
	bad := Config{Concurrency: 0, WaitTime: 30 * time.Second, VisibilityTimeout: 30 * time.Second, HeartbeatInterval: 20 * time.Second, RetryBase: 2 * time.Second, RetryMax: time.Second}
	err := bad.Validate()
	for _, w := range []string{"queue url", "dlq url", "concurrency", "wait time", "heartbeat interval", "job timeout", "drain timeout", "retry base", "max receive count", "call timeout"} {
		require.ErrorContains(t, err, w)
	}
}

func TestLoopHandsBackWhatTheLastPollBrings(t *testing.T) {
	t.Parallel()
	var ran atomic.Int32
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome { ran.Add(1); return Outcome{Action: Delete} })
	f := newFakeSQS(5)
	f.maxLongPollMs = 2000
	l, err := New(testConfig(), f, h, nil, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	eventually(t, func() bool { _, _, asks, _ := f.snapshot(); return len(asks) == 1 }, "a poll in flight")
	cancel()
	id := f.send("late")
	require.NoError(t, <-done)
	require.Zero(t, ran.Load(), "a message received after shutdown began was run")
	m := f.msg(id)
	require.False(t, m.deleted)
	require.Equal(t, 1, m.receives)
	require.False(t, m.visibleAt.After(time.Now()), "not handed back at once")
}
