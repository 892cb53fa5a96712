package jobloop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/drain"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/queuetest"
)

func testConfig() Config {
	c := DefaultConfig()
	c.Concurrency = 4
	c.WaitTime = 20 * time.Second
	c.VisibilityTimeout = 30 * time.Second
	c.HeartbeatInterval = 10 * time.Second
	c.JobTimeout = time.Hour // tests that advance the clock keep their jobs
	c.DrainTimeout = 5 * time.Second
	c.RetryBase, c.RetryMax = time.Second, 4*time.Second
	c.CallTimeout = 2 * time.Second
	return c
}

// t0 is the clock's reading when a test starts; it moves only when the
// test advances it.
var t0 = time.Date(2026, 11, 3, 4, 0, 0, 0, time.UTC)

type harness struct {
	q, dlq *queuetest.Fake
	loop   *Loop
	reg    *prometheus.Registry
	// clk is the loop's clock and the queues': the heartbeat, job and
	// hold deadlines, a prefetched message's wait and the receive backoff
	// all wait on it until the test advances it.
	clk    *clock.Fake
	done   chan error
	fault  queuetest.Fault
	health Health
	// endDrain cancels the loop's hard context, as the lifecycle group
	// does when the drain deadline passes.
	endDrain func()
}

type option func(*harness, *queuetest.Config)

// withFault injects fault into the queue before the loop starts.
func withFault(fault queuetest.Fault) option {
	return func(h *harness, _ *queuetest.Config) { h.fault = fault }
}

// longPolls makes the fake's long polls last as long as asked.
func longPolls(_ *harness, c *queuetest.Config) { c.MaxWait = time.Minute }

// setup starts a loop over a fake queue, both on a fake clock that stands
// still unless the test advances it; stop() drains the loop and returns
// Run's error. The drain lasts until the test calls hs.endDrain.
func setup(t *testing.T, cfg Config, h Handler, bodies []string, opts ...option) (*harness, func() error) {
	t.Helper()
	hs := &harness{reg: prometheus.NewRegistry(), clk: clock.NewFake(t0), done: make(chan error, 1)}
	qcfg := queuetest.Config{MaxReceive: cfg.MaxReceiveCount, Clock: hs.clk}
	for _, o := range opts {
		o(hs, &qcfg)
	}
	hs.dlq = queuetest.NewFake(queuetest.Config{Clock: qcfg.Clock})
	qcfg.DLQ = hs.dlq
	hs.q = queuetest.NewFake(qcfg)
	hs.q.SetFault(hs.fault)
	for _, b := range bodies {
		hs.q.Enqueue([]byte(b))
	}
	l, err := New(cfg, hs.q, hs.dlq, h, hs.clk, NewMetrics(hs.reg), nil)
	require.NoError(t, err)
	if hs.health != nil {
		l.HoldOn(hs.health)
	}
	hs.loop = l
	hard, cancelHard := context.WithCancelCause(context.Background())
	hs.endDrain = func() { cancelHard(errDrainDeadline) }
	ctx, cancel := context.WithCancel(drain.WithHard(context.Background(), hard))
	go func() { hs.done <- l.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-hs.done:
			case <-time.After(10 * time.Second):
				runErr = errors.New("Run did not return")
			}
		})
		return runErr
	}
	t.Cleanup(func() { hs.endDrain(); _ = stop() })
	return hs, stop
}

// errDrainDeadline is the hard context's cause in these tests.
var errDrainDeadline = errors.New("drain deadline passed")

func eventually(t *testing.T, cond func() bool, msg string, args ...any) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 2*time.Millisecond, fmt.Sprintf(msg, args...))
}

func (hs *harness) held() int { return hs.q.Stats().Held }

// advance moves the clock on by d, firing what waits on it, and wakes the
// queue's polls to look at the messages whose visibility ended.
func (hs *harness) advance(d time.Duration) {
	hs.clk.Advance(d)
	hs.q.Advance(0)
}

// waiters waits until n timers wait on the clock: the heartbeat's next
// beat (one, between beats), each running job's deadline, each held job's
// hold deadline, a prefetched message's wait for a slot, a poller's
// backoff. Each count a test waits for says which.
func (hs *harness) waiters(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, hs.clk.BlockUntilContext(ctx, n), "%d waiting on the clock", n)
}

func (hs *harness) state(t *testing.T, id string) queuetest.MessageState {
	t.Helper()
	m, ok := hs.q.Message(id)
	require.True(t, ok, "no message %s", id)
	return m
}

func bodies(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("body-%d", i)
	}
	return out
}

func TestLoopDeletesDoneJobsWithinConcurrency(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	var cur, peak atomic.Int32
	// The first jobs wait until Concurrency of them run at once, so the
	// test sees the bound reached, and never passed.
	full := make(chan struct{})
	var once sync.Once
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if n == int32(cfg.Concurrency) {
			once.Do(func() { close(full) })
		}
		<-full
		cur.Add(-1)
		return Outcome{Action: Delete, Label: "done"}
	})
	hs, stop := setup(t, cfg, h, bodies(40))
	eventually(t, func() bool { return hs.held() == 0 }, "all messages deleted")
	require.NoError(t, stop())
	require.Equal(t, int32(cfg.Concurrency), peak.Load())
	require.Equal(t, 40.0, testutil.ToFloat64(hs.loop.m.jobs.WithLabelValues("done")))
	require.Equal(t, 40.0, testutil.ToFloat64(hs.loop.m.deleted))
	require.Equal(t, 40.0, testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("delete", "ok")))
	for _, a := range hs.q.ReceiveAsks() {
		require.GreaterOrEqual(t, a, 1)
		require.LessOrEqual(t, a, cfg.Concurrency)
	}
	require.Equal(t, 40, hs.q.Stats().Received, "no message was received twice")
}

func TestLoopAsksOnlyForFreeSlots(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		<-release
		return Outcome{Action: Delete}
	})
	cfg := testConfig()
	cfg.Concurrency, cfg.Pollers = 3, 1
	hs, stop := setup(t, cfg, h, []string{"a", "b", "c", "d", "e"})
	inflight := func() float64 { return testutil.ToFloat64(hs.loop.m.inflight) }
	eventually(t, func() bool { return inflight() == 3 }, "three in flight")
	require.Equal(t, []int{3}, hs.q.ReceiveAsks(), "one receive for the three free slots, none while every slot is busy")
	// Each finished job frees one slot, and the next receive asks for
	// exactly that one.
	for i, want := range []int{2, 3} {
		release <- struct{}{}
		eventually(t, func() bool { return len(hs.q.ReceiveAsks()) == want }, "receive %d", want)
		require.Equal(t, 1, hs.q.ReceiveAsks()[want-1], "release %d", i+1)
		eventually(t, func() bool { return inflight() == 3 }, "the slot taken again")
	}
	close(release)
	eventually(t, func() bool { return hs.held() == 0 }, "all deleted")
	require.NoError(t, stop())
	for _, a := range hs.q.ReceiveAsks()[3:] {
		require.LessOrEqual(t, a, 3)
	}
}

func TestLoopPoisonGoesToDLQWithReason(t *testing.T) {
	t.Parallel()
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		if string(m.Body) == "bad" {
			return Outcome{Action: Poison, Label: "poison", Reason: "not a JSON review event"}
		}
		return Outcome{Action: Delete, Label: "done"}
	})
	hs, stop := setup(t, testConfig(), h, []string{"bad", "good"})
	eventually(t, func() bool { return hs.held() == 0 }, "both deleted")
	require.NoError(t, stop())
	dlq := hs.dlq.Messages()
	require.Len(t, dlq, 1)
	require.Equal(t, "bad", string(dlq[0].Body))
	require.Equal(t, map[string]pipeline.Attribute{
		AttrErrorReason:     pipeline.StringAttribute("not a JSON review event"),
		AttrSourceMessageID: pipeline.StringAttribute("msg-1"),
		AttrReceiveCount:    pipeline.NumberAttribute(1),
	}, dlq[0].Attributes)
	require.Equal(t, 1.0, testutil.ToFloat64(hs.loop.m.poison))
	require.Equal(t, 1.0, testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("send_dlq", "ok")))
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
	cfg.RetryBase, cfg.RetryMax = time.Second, 4*time.Second
	cfg.VisibilityTimeout = time.Hour // no advance below exposes a message in a job
	hs, stop := setup(t, cfg, h, []string{"x"})
	// Each backoff hides the message for at most RetryMax of the fake's
	// clock; advancing past it brings the message back.
	eventually(t, func() bool {
		hs.advance(cfg.RetryMax)
		return len(hs.dlq.Messages()) == 1
	}, "redriven to the DLQ")
	require.NoError(t, stop())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 3)
	for i, m := range seen {
		require.Equal(t, i+1, m.ReceiveCount)
		require.Equal(t, i == 2, m.Final)
		require.Equal(t, t0, m.SentAt)
	}
	vis := hs.q.VisibilityChanges()
	require.Len(t, vis, 3)
	for i, v := range vis {
		require.LessOrEqual(t, v.Visibility, retryCeiling(cfg, i+1), "backoff %d", i+1)
	}
}

func retryCeiling(cfg Config, n int) time.Duration {
	d := cfg.RetryBase
	for i := 1; i < n; i++ {
		d *= 2
	}
	return min(d, cfg.RetryMax)
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.RetryBase, cfg.RetryMax = time.Second, 30*time.Second
	l, err := New(cfg, queuetest.NewFake(queuetest.Config{}), queuetest.NewFake(queuetest.Config{}), HandlerFunc(nil), nil, nil, nil)
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
	started, finish := make(chan struct{}), make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		runs.Add(1)
		close(started)
		<-finish
		return Outcome{Action: Delete}
	})
	cfg := testConfig()
	cfg.VisibilityTimeout, cfg.HeartbeatInterval = 3*time.Second, time.Second
	hs, stop := setup(t, cfg, h, []string{"slow"})
	<-started
	// Five intervals: the job outlives its first visibility timeout by
	// far, and every beat renews it before it runs out.
	for beat := 1; beat <= 5; beat++ {
		hs.waiters(t, 2) // the next beat, the job's deadline
		hs.advance(cfg.HeartbeatInterval)
		eventually(t, func() bool { return len(hs.q.VisibilityChanges()) == beat }, "beat %d extends the job", beat)
		require.Equal(t, cfg.VisibilityTimeout, hs.q.VisibilityChanges()[beat-1].Visibility)
		require.Zero(t, hs.q.Stats().Visible, "beat %d: the running job's message stays hidden", beat)
	}
	close(finish)
	eventually(t, func() bool { return hs.held() == 0 }, "deleted")
	require.NoError(t, stop())
	require.Equal(t, int32(1), runs.Load(), "the job was redelivered while it ran")
	require.Equal(t, 5.0, testutil.ToFloat64(hs.loop.m.extended))
	require.Equal(t, 5.0, testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("heartbeat", "ok")))
}

func TestLoopHeartbeatSkipsJobsNotDue(t *testing.T) {
	t.Parallel()
	finish := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome { <-finish; return Outcome{Action: Delete} })
	cfg := testConfig()
	cfg.VisibilityTimeout, cfg.HeartbeatInterval = 45*time.Second, 10*time.Second
	hs, stop := setup(t, cfg, h, []string{"a"})
	eventually(t, func() bool { return testutil.ToFloat64(hs.loop.m.inflight) == 1 }, "in flight")
	// At t0+10s and t0+20s the visibility (t0+45s) ends beyond two
	// intervals: no call. Each beat is over once the next one waits.
	for range 2 {
		hs.waiters(t, 2) // the next beat, the job's deadline
		hs.advance(cfg.HeartbeatInterval)
		hs.waiters(t, 2)
		require.Empty(t, hs.q.VisibilityChanges(), "a beat extended a job not due")
	}
	// At t0+30s it ends within two intervals: renewed.
	hs.advance(cfg.HeartbeatInterval)
	// The queue records the change before the call returns and the loop
	// counts it: wait for the count, then check nothing else was renewed.
	eventually(t, func() bool { return testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("heartbeat", "ok")) == 1 }, "the due beat extends")
	require.Len(t, hs.q.VisibilityChanges(), 1)
	close(finish)
	eventually(t, func() bool { return hs.held() == 0 }, "deleted")
	require.NoError(t, stop())
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
	cfg.VisibilityTimeout = time.Hour // no advance below exposes a message in a job
	hs, stop := setup(t, cfg, h, []string{"boom", "fine"})
	eventually(t, func() bool { hs.advance(cfg.RetryMax); return hs.held() == 0 }, "both deleted in the end")
	require.NoError(t, stop())
	require.Equal(t, 1.0, testutil.ToFloat64(hs.loop.m.panics))
	require.Equal(t, 1.0, testutil.ToFloat64(hs.loop.m.jobs.WithLabelValues("panic")))
	require.Equal(t, 2.0, testutil.ToFloat64(hs.loop.m.jobs.WithLabelValues("done")))
	require.Equal(t, 2, hs.state(t, "msg-1").Receives)
}

func TestLoopDrain(t *testing.T) {
	t.Parallel()
	var causes sync.Map
	finish := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		switch string(m.Body) {
		case "quick":
			return Outcome{Action: Delete, Label: "done"}
		case "finishes-in-drain":
			<-finish
			return Outcome{Action: Delete, Label: "done"}
		}
		<-ctx.Done()
		causes.Store(m.ID, context.Cause(ctx))
		return Outcome{Action: Retry, Label: "retry", Err: ctx.Err()}
	})
	cfg := testConfig()
	hs, stop := setup(t, cfg, h, []string{"quick", "finishes-in-drain", "stuck", "stuck"})
	eventually(t, func() bool { return testutil.ToFloat64(hs.loop.m.inflight) == 3 }, "three in flight")
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	eventually(t, hs.loop.Draining, "draining")

	// During the drain a job may still finish and be deleted...
	close(finish)
	eventually(t, func() bool { return hs.state(t, "msg-2").Deleted }, "the job finishing in the drain is deleted")
	// ...while the others keep running until the hard context ends: the
	// loop keeps no drain timer of its own, so its clock passing the
	// drain timeout changes nothing.
	hs.waiters(t, 3) // the next beat, the two stuck jobs' deadlines: no drain timer
	hs.advance(cfg.DrainTimeout)
	hs.waiters(t, 3)
	select {
	case err := <-stopped:
		t.Fatalf("Run returned before its hard context ended: %v", err)
	default:
	}
	require.Empty(t, hs.q.VisibilityChanges(), "nothing handed back before the hard context ended")

	hs.endDrain()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return when its hard context ended")
	}
	require.True(t, hs.state(t, "msg-1").Deleted)
	for _, id := range []string{"msg-3", "msg-4"} {
		m := hs.state(t, id)
		require.False(t, m.Deleted)
		require.False(t, m.VisibleAt.After(hs.q.Now()), "%s not visible at once", id)
		c, ok := causes.Load(id)
		require.True(t, ok)
		require.ErrorIs(t, c.(error), ErrDraining)
	}
	vis := hs.q.VisibilityChanges()
	require.Len(t, vis, 2)
	for _, v := range vis {
		require.Zero(t, v.Visibility)
	}
	require.Equal(t, 2.0, testutil.ToFloat64(hs.loop.m.jobs.WithLabelValues("released")))
}

// Run standalone, with no hard context, the loop has no drain: ctx is its
// own hard context, so the jobs are cancelled with ErrDraining and handed
// back as soon as ctx is.
func TestLoopWithoutAHardContextDoesNotDrain(t *testing.T) {
	t.Parallel()
	causes := make(chan error, 2)
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return Outcome{Action: Retry, Label: "retry", Err: ctx.Err()}
	})
	clk := clock.NewFake(t0)
	q := queuetest.NewFake(queuetest.Config{Clock: clk})
	q.Enqueue([]byte("a"), []byte("b"))
	l, err := New(testConfig(), q, queuetest.NewFake(queuetest.Config{Clock: clk}), h, clk, nil, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	eventually(t, func() bool { return q.Stats().Received == 2 }, "both running")
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run waited for a drain with no hard context")
	}
	for range 2 {
		require.ErrorIs(t, <-causes, ErrDraining)
	}
	st := q.Stats()
	require.Equal(t, 2, st.Visible, "both handed back at once")
	require.Zero(t, st.Deleted)
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
	hs, stop := setup(t, cfg, h, []string{"x"})
	hs.waiters(t, 2) // the next beat, the job's deadline
	hs.advance(cfg.JobTimeout)
	select {
	case err := <-got:
		require.ErrorIs(t, err, ErrJobTimeout)
	case <-time.After(5 * time.Second):
		t.Fatal("job not timed out")
	}
	eventually(t, func() bool { return len(hs.q.VisibilityChanges()) >= 1 }, "backoff set")
	require.NoError(t, stop())
}

func TestLoopSurvivesQueueFaults(t *testing.T) {
	t.Parallel()
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome { return Outcome{Action: Delete, Label: "done"} })
	cfg := testConfig()
	receiveFaults, deleteFaults := 2, 3
	hs, stop := setup(t, cfg, h, bodies(5), withFault(func(op queuetest.Op, _ queuetest.Entry) error {
		// Called under the fake's lock: the counters need no other.
		switch {
		case op == queuetest.OpReceive && receiveFaults > 0:
			receiveFaults--
			return errors.New("unavailable")
		case op == queuetest.OpDelete && deleteFaults > 0:
			deleteFaults--
			return errors.New("InternalError")
		}
		return nil
	}))
	// Each failed receive waits its backoff (at most its ceiling) before
	// the next: with the next beat, two wait on the clock.
	for i := 1; i <= 2; i++ {
		hs.waiters(t, 2)
		hs.advance(receiveBackoff.Ceiling(i))
	}
	done := func() float64 { return testutil.ToFloat64(hs.loop.m.jobs.WithLabelValues("done")) }
	eventually(t, func() bool { return done() == 5 && testutil.ToFloat64(hs.loop.m.inflight) == 0 }, "every job ran once")
	require.Equal(t, 3.0, testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("delete", "error")))
	require.Equal(t, 2.0, testutil.ToFloat64(hs.loop.m.deleted))
	require.Equal(t, 3, hs.held(), "a failed delete leaves the message to its visibility timeout")
	// Then it comes back and is deleted.
	hs.advance(cfg.VisibilityTimeout)
	eventually(t, func() bool { return hs.held() == 0 }, "all deleted despite faults")
	require.NoError(t, stop())
	require.Equal(t, 2.0, testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("receive", "error")))
	require.Equal(t, 5.0, testutil.ToFloat64(hs.loop.m.deleted))
	require.Equal(t, 8.0, done())
}

func TestLoopBacksOffAfterFailedReceives(t *testing.T) {
	t.Parallel()
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome { return Outcome{Action: Delete, Label: "done"} })
	faults := 3
	hs, stop := setup(t, testConfig(), h, []string{"a"}, withFault(func(op queuetest.Op, _ queuetest.Entry) error {
		if op == queuetest.OpReceive && faults > 0 {
			faults--
			return errors.New("unavailable")
		}
		return nil
	}))
	receiveErrors := func() float64 { return testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("receive", "error")) }
	// Each backoff ends within its ceiling, which grows with each failure
	// in a row: a poll resumes only once the clock passes it.
	for i := 1; i <= 3; i++ {
		eventually(t, func() bool { return receiveErrors() == float64(i) }, "failed receive %d", i)
		hs.waiters(t, 2) // the next beat, the backoff
		hs.advance(receiveBackoff.Ceiling(i))
	}
	eventually(t, func() bool { return hs.held() == 0 }, "received and deleted after the faults")
	require.NoError(t, stop())
	require.Equal(t, 3.0, receiveErrors())
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, testConfig().Validate())
	bad := Config{Concurrency: 0, WaitTime: 30 * time.Second, VisibilityTimeout: 30 * time.Second, HeartbeatInterval: 20 * time.Second, RetryBase: 2 * time.Second, RetryMax: time.Second}
	err := bad.Validate()
	for _, w := range []string{"concurrency", "wait time", "heartbeat interval", "job timeout", "drain timeout", "retry base", "max receive count", "call timeout"} {
		require.ErrorContains(t, err, w)
	}
}

func TestLoopHandsBackWhatTheLastPollBrings(t *testing.T) {
	t.Parallel()
	var ran atomic.Int32
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome { ran.Add(1); return Outcome{Action: Delete} })
	hs, stop := setup(t, testConfig(), h, nil, longPolls)
	eventually(t, func() bool { return len(hs.q.ReceiveAsks()) == 1 }, "a poll in flight")
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	eventually(t, hs.loop.Draining, "draining")
	id := hs.q.Enqueue([]byte("late"))[0]
	require.NoError(t, <-stopped)
	require.Zero(t, ran.Load(), "a message received after shutdown began was run")
	m := hs.state(t, id)
	require.False(t, m.Deleted)
	require.Equal(t, 1, m.Receives)
	require.False(t, m.VisibleAt.After(hs.q.Now()), "not handed back at once")
	require.Equal(t, 1.0, testutil.ToFloat64(hs.loop.m.jobs.WithLabelValues("released")))
}

// TestLoopDLQCopyKeepsTheTraceContext dead-letters a message sent in a
// trace: its DLQ copy keeps the message's attributes, traceparent among
// them, beside the reason.
func TestLoopDLQCopyKeepsTheTraceContext(t *testing.T) {
	t.Parallel()
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		return Outcome{Action: Poison, Label: "poison", Reason: "not a JSON review event"}
	})
	hs, stop := setup(t, testConfig(), h, nil)
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	require.NoError(t, hs.q.Send(context.Background(), []pipeline.OutMessage{{Body: []byte("bad"), Attributes: map[string]pipeline.Attribute{
		pipeline.TraceParentAttribute: pipeline.StringAttribute(tp), "run_id": pipeline.StringAttribute("r1"),
	}}}))
	eventually(t, func() bool { return len(hs.dlq.Messages()) == 1 }, "dead-lettered")
	require.NoError(t, stop())
	got := hs.dlq.Messages()[0].Attributes
	require.Equal(t, tp, got[pipeline.TraceParentAttribute].Value)
	require.Equal(t, "r1", got["run_id"].Value)
	require.Equal(t, "not a JSON review event", got[AttrErrorReason].Value)
}
