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
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/queuetest"
)

func testConfig() Config {
	c := DefaultConfig()
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

// t0 is the fake queue's clock when a test starts; it moves only when the
// test advances it.
var t0 = time.Date(2026, 11, 3, 4, 0, 0, 0, time.UTC)

type harness struct {
	q, dlq *queuetest.Fake
	loop   *Loop
	reg    *prometheus.Registry
	// tick drives the heartbeat; drain fires the drain timeout (when
	// the test asked for a manual one); waits records receive backoffs.
	tick   chan time.Time
	drain  chan time.Time
	waits  *waitLog
	done   chan error
	fault  queuetest.Fault
	health Health
	// timers, when set (clockTimers), are the loop's timers on the
	// queue's clock; advance fires them.
	timers *fakeTimers
}

// waitLog records the loop's backoff waits instead of waiting.
type waitLog struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waitLog) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.d = append(w.d, d)
	w.mu.Unlock()
	return context.Cause(ctx)
}

func (w *waitLog) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.d...)
}

type option func(*harness, *queuetest.Config)

// manualDrain makes the drain timeout fire only when the test sends on
// harness.drain.
func manualDrain(h *harness, _ *queuetest.Config) { h.drain = make(chan time.Time) }

// clockTimers runs the loop's timers (a prefetched message's wait for a
// slot, the drain timeout) on the queue's clock: they fire only when the
// test moves it with harness.advance.
func clockTimers(h *harness, _ *queuetest.Config) {
	h.timers = &fakeTimers{pending: map[*fakeTimer]struct{}{}}
}

// withFault injects fault into the queue before the loop starts.
func withFault(fault queuetest.Fault) option {
	return func(h *harness, _ *queuetest.Config) { h.fault = fault }
}

// longPolls makes the fake's long polls last as long as asked.
func longPolls(_ *harness, c *queuetest.Config) { c.MaxWait = time.Minute }

// setup starts a loop over a fake queue whose clock stands still unless
// the test advances it, with a heartbeat that beats only on harness.tick;
// stop() drains it and returns Run's error.
func setup(t *testing.T, cfg Config, h Handler, bodies []string, opts ...option) (*harness, func() error) {
	t.Helper()
	hs := &harness{reg: prometheus.NewRegistry(), tick: make(chan time.Time), waits: &waitLog{}, done: make(chan error, 1)}
	qcfg := queuetest.Config{MaxReceive: cfg.MaxReceiveCount, Clock: clock.NewFake(t0)}
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
	l, err := New(cfg, hs.q, hs.dlq, h, NewMetrics(hs.reg), nil)
	require.NoError(t, err)
	l.now = hs.q.Now
	l.sleep = hs.waits.sleep
	l.ticker = func(time.Duration) (<-chan time.Time, func()) { return hs.tick, func() {} }
	if hs.health != nil {
		l.HoldOn(hs.health)
	}
	if hs.timers != nil {
		require.Nil(t, hs.drain, "clockTimers and manualDrain do not mix")
		hs.timers.now = hs.q.Now
		l.timer = hs.timers.timer
	}
	if hs.drain != nil {
		l.timer = func(d time.Duration) (<-chan time.Time, func() bool) {
			require.Equal(t, cfg.DrainTimeout, d)
			return hs.drain, func() bool { return true }
		}
	}
	hs.loop = l
	ctx, cancel := context.WithCancel(context.Background())
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
	require.Eventually(t, cond, 10*time.Second, 2*time.Millisecond, fmt.Sprintf(msg, args...))
}

func (hs *harness) held() int { return hs.q.Stats().Held }

// advance moves the queue's clock on by d and fires the timers it passes.
func (hs *harness) advance(d time.Duration) {
	hs.q.Advance(d)
	if hs.timers != nil {
		hs.timers.fire()
	}
}

// fakeTimers are timers on a fake clock: each fires when fire finds the
// clock at or past its time.
type fakeTimers struct {
	now     func() time.Time
	mu      sync.Mutex
	pending map[*fakeTimer]struct{}
}

type fakeTimer struct {
	at time.Time
	c  chan time.Time
}

func (f *fakeTimers) timer(d time.Duration) (<-chan time.Time, func() bool) {
	t := &fakeTimer{at: f.now().Add(d), c: make(chan time.Time, 1)}
	f.mu.Lock()
	f.pending[t] = struct{}{}
	f.mu.Unlock()
	f.fire()
	return t.c, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		_, ok := f.pending[t]
		delete(f.pending, t)
		return ok
	}
}

func (f *fakeTimers) fire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	for t := range f.pending {
		if !t.at.After(now) {
			t.c <- now
			delete(f.pending, t)
		}
	}
}

// waiting counts the timers set and not yet fired or stopped.
func (f *fakeTimers) waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
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
		hs.q.Advance(cfg.RetryMax)
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
	l, err := New(cfg, queuetest.NewFake(queuetest.Config{}), queuetest.NewFake(queuetest.Config{}), HandlerFunc(nil), nil, nil)
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
		hs.q.Advance(cfg.HeartbeatInterval)
		hs.tick <- hs.q.Now()
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
	cfg := testConfig() // visibility 30s, heartbeat 10s
	hs, stop := setup(t, cfg, h, []string{"a"})
	eventually(t, func() bool { return testutil.ToFloat64(hs.loop.m.inflight) == 1 }, "in flight")
	// At t0+5s the visibility (t0+30s) ends beyond two intervals: no call.
	hs.q.Advance(5 * time.Second)
	hs.tick <- hs.q.Now()
	// At t0+10s it ends within two intervals: renewed.
	hs.q.Advance(5 * time.Second)
	hs.tick <- hs.q.Now()
	eventually(t, func() bool { return len(hs.q.VisibilityChanges()) == 1 }, "the due beat extends")
	// The tick channel is unbuffered: the beat at t0+5s was over before
	// the second was taken, so one change means it made none.
	require.Equal(t, 1.0, testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("heartbeat", "ok")))
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
	eventually(t, func() bool { hs.q.Advance(cfg.RetryMax); return hs.held() == 0 }, "both deleted in the end")
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
	hs, stop := setup(t, cfg, h, []string{"quick", "finishes-in-drain", "stuck", "stuck"}, manualDrain)
	eventually(t, func() bool { return testutil.ToFloat64(hs.loop.m.inflight) == 3 }, "three in flight")
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	eventually(t, hs.loop.Draining, "draining")

	// During the drain a job may still finish and be deleted...
	close(finish)
	eventually(t, func() bool { return hs.state(t, "msg-2").Deleted }, "the job finishing in the drain is deleted")
	// ...while the others keep running until the drain timeout.
	select {
	case err := <-stopped:
		t.Fatalf("Run returned before the drain timeout: %v", err)
	default:
	}
	require.Empty(t, hs.q.VisibilityChanges(), "nothing handed back before the drain timeout")

	hs.drain <- time.Now()
	require.NoError(t, <-stopped)
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
	done := func() float64 { return testutil.ToFloat64(hs.loop.m.jobs.WithLabelValues("done")) }
	eventually(t, func() bool { return done() == 5 && testutil.ToFloat64(hs.loop.m.inflight) == 0 }, "every job ran once")
	require.Equal(t, 3.0, testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("delete", "error")))
	require.Equal(t, 2.0, testutil.ToFloat64(hs.loop.m.deleted))
	require.Equal(t, 3, hs.held(), "a failed delete leaves the message to its visibility timeout")
	// Then it comes back and is deleted.
	hs.q.Advance(cfg.VisibilityTimeout)
	eventually(t, func() bool { return hs.held() == 0 }, "all deleted despite faults")
	require.NoError(t, stop())
	require.Equal(t, 2.0, testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("receive", "error")))
	require.Equal(t, 5.0, testutil.ToFloat64(hs.loop.m.deleted))
	require.Equal(t, 8.0, done())
	require.Len(t, hs.waits.all(), 2, "one backoff per failed receive")
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
	eventually(t, func() bool { return hs.held() == 0 }, "received and deleted after the faults")
	require.NoError(t, stop())
	require.Equal(t, 3.0, testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("receive", "error")))
	waits := hs.waits.all()
	require.Len(t, waits, 3)
	for i, w := range waits {
		require.LessOrEqual(t, w, receiveBackoff.Ceiling(i+1), "the backoff grows with each failure in a row")
	}
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
