package jobloop

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/health"
	"github.com/chatguard/chatguard/pipeline/queuetest"
	"github.com/chatguard/chatguard/storage/storetest"
)

// fakeHealth is a dependency gate the test opens and closes.
type fakeHealth struct {
	up      chan struct{} // closed when every dependency is back
	waiting chan string   // what the loop waits for, as it starts waiting
}

func newFakeHealth() *fakeHealth {
	return &fakeHealth{up: make(chan struct{}), waiting: make(chan string, 64)}
}

func (f *fakeHealth) wait(ctx context.Context, what string) error {
	select {
	case <-f.up:
		return nil
	default:
	}
	f.waiting <- what
	select {
	case <-f.up:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (f *fakeHealth) WaitNotOpen(ctx context.Context) error { return f.wait(ctx, "receive") }
func (f *fakeHealth) WaitProbe(ctx context.Context, d pipeline.Dependency) error {
	return f.wait(ctx, "probe "+string(d))
}

// A job that fails because MySQL is down is held: its message stays
// invisible, the loop stops receiving, and once MySQL is back the job runs
// again on the same delivery, its receive count unspent.
func TestLoopHoldsJobsThroughAnOutage(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		if runs.Add(1) == 1 {
			return Outcome{Action: Hold, Label: "held", Dep: pipeline.DepMySQL, Err: errors.New("mysql down")}
		}
		return Outcome{Action: Delete, Label: "done"}
	})
	cfg := testConfig()
	cfg.Concurrency, cfg.Pollers = 1, 1
	fh := newFakeHealth()
	hs, stop := setupHeld(t, cfg, h, []string{"a", "b"}, receiveOnly{fh})
	require.Equal(t, "probe mysql", <-fh.waiting, "held, waiting for MySQL")
	require.Equal(t, 1.0, testutil.ToFloat64(hs.loop.m.held))
	hs.q.Advance(10 * time.Second)
	hs.tick <- hs.q.Now()
	eventually(t, func() bool { return len(hs.q.VisibilityChanges()) == 1 }, "the heartbeat extends the held job")
	require.Equal(t, cfg.VisibilityTimeout, hs.q.VisibilityChanges()[0].Visibility)
	require.Equal(t, 1, hs.q.Stats().Received, "the only slot is held: nothing else received")
	close(fh.up)
	eventually(t, func() bool { return hs.held() == 0 }, "both done")
	require.NoError(t, stop())
	require.Equal(t, 1, hs.state(t, "msg-1").Receives, "the outage spent no receive")
	require.Equal(t, 1.0, testutil.ToFloat64(hs.loop.m.holdRetries))
	require.Zero(t, testutil.ToFloat64(hs.loop.m.held))
	require.Zero(t, hs.dlq.Stats().Held)
}

// While a dependency is down the pollers do not call receive at all.
func TestLoopStopsReceivingWhileADependencyIsDown(t *testing.T) {
	t.Parallel()
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome { return Outcome{Action: Delete, Label: "done"} })
	cfg := testConfig()
	fh := newFakeHealth() // down at start
	hs, stop := setupHeld(t, cfg, h, []string{"a"}, fh)
	require.Equal(t, "receive", <-fh.waiting)
	require.Zero(t, hs.q.Stats().Received)
	require.Zero(t, testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("receive", "ok")))
	close(fh.up)
	eventually(t, func() bool { return hs.held() == 0 }, "received and done once up")
	require.NoError(t, stop())
}

// A hold that outlasts MaxHold becomes an ordinary failed attempt.
func TestLoopHoldEndsAfterMaxHold(t *testing.T) {
	t.Parallel()
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		return Outcome{Action: Hold, Dep: pipeline.DepModels, Err: errors.New("models down")}
	})
	cfg := testConfig()
	cfg.MaxHold = time.Nanosecond
	fh := &fakeHealth{up: make(chan struct{}), waiting: make(chan string, 64)}
	hs, stop := setupHeld(t, cfg, h, []string{"a"}, receiveOnly{fh})
	eventually(t, func() bool { return testutil.ToFloat64(hs.loop.m.jobs.WithLabelValues("hold_timeout")) >= 1 }, "hold timed out")
	require.NoError(t, stop())
	require.NotEmpty(t, hs.q.VisibilityChanges(), "retried with a backoff")
}

// receiveOnly lets receives through but never lets a probe through.
type receiveOnly struct{ *fakeHealth }

func (receiveOnly) WaitNotOpen(context.Context) error { return nil }

func setupHeld(t *testing.T, cfg Config, h Handler, bodies []string, hl Health) (*harness, func() error) {
	t.Helper()
	return setup(t, cfg, h, bodies, func(hs *harness, _ *queuetest.Config) { hs.health = hl })
}

// The handler turns a failure of a dependency that is down into a hold,
// even on the last delivery (no failed verdict, no DLQ).
func TestReviewHoldsWhenMySQLIsDown(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	mon, err := health.New(health.Config{Failures: 2, OpenFor: time.Minute}, nil, nil)
	require.NoError(t, err)
	r.h.gate(mon)
	r.store.GetErr = func(pipeline.ReviewKey) error { return pipeline.Retryable(errors.New("mysql: connection refused"), 0) }
	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.Equal(t, Retry, out.Action, "one failure is not an outage")
	out = r.h.Handle(context.Background(), msg(r.body(t), 5, 5))
	require.Equal(t, Hold, out.Action, "the second opens the breaker: held, even on the last delivery")
	require.Equal(t, pipeline.DepMySQL, out.Dep)
	out = r.h.Handle(context.Background(), msg(r.body(t), 5, 5))
	require.Equal(t, Hold, out.Action, "refused while open")
	require.Zero(t, r.rev.calls.Load())

	// A job-specific failure (the room does not exist) is no outage.
	r2 := setupReview(t)
	mon2, err := health.New(health.Config{Failures: 1, OpenFor: time.Minute}, nil, nil)
	require.NoError(t, err)
	r2.h.gate(mon2)
	r2.chat.err = pipeline.Permanent(errors.New("room not found"))
	out = r2.h.Handle(context.Background(), msg(r2.body(t), 1, 5))
	require.Equal(t, "failed", out.Label)
	require.Equal(t, health.Closed, mon2.State(pipeline.DepChatAPI))
}

// A job held because MySQL went down after its model calls saves the
// verdict it already has when it runs again: no second set of calls.
func TestHeldSaveKeepsTheVerdict(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	clock := storetest.NewManualClock(r.now)
	mon, err := health.New(health.Config{Failures: 1, OpenFor: time.Minute}, nil, nil, health.WithClock(clock))
	require.NoError(t, err)
	r.h.gate(mon)
	var down atomic.Bool
	down.Store(true)
	r.store.SaveErr = func(pipeline.Verdict) error {
		if down.Load() {
			return pipeline.Retryable(errors.New("mysql: connection refused"), 0)
		}
		return nil
	}
	m := msg(r.body(t), 1, 5)
	out := r.h.Handle(context.Background(), m)
	require.Equal(t, Hold, out.Action)
	require.Equal(t, int32(1), r.rev.calls.Load())
	down.Store(false)
	clock.Advance(time.Minute) // the open time ends; the rerun's first call probes
	out = r.h.Handle(context.Background(), m)
	require.Equal(t, "done", out.Label)
	require.Equal(t, int32(1), r.rev.calls.Load(), "the verdict was kept, not reviewed again")
	require.Equal(t, int32(1), r.chat.calls.Load())
	v, err := r.store.Get(context.Background(), r.key())
	require.NoError(t, err)
	require.Equal(t, pipeline.StatusDone, v.Status)
}

// A held job whose event grew past MaxAge during the outage still saves
// the verdict the models already produced: it is done, not expired, and
// no model is called again.
func TestHeldSaveKeepsTheVerdictPastMaxAge(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	clock := storetest.NewManualClock(r.now)
	mon, err := health.New(health.Config{Failures: 1, OpenFor: time.Minute}, nil, nil, health.WithClock(clock))
	require.NoError(t, err)
	r.h.gate(mon)
	var down atomic.Bool
	down.Store(true)
	r.store.SaveErr = func(pipeline.Verdict) error {
		if down.Load() {
			return pipeline.Retryable(errors.New("mysql: connection refused"), 0)
		}
		return nil
	}
	m := msg(r.body(t), 1, 5)
	out := r.h.Handle(context.Background(), m)
	require.Equal(t, Hold, out.Action)
	require.Equal(t, int32(1), r.rev.calls.Load())
	// A long outage: the event is now older than MaxAge.
	r.now = r.now.Add(r.h.cfg.MaxAge + time.Hour)
	down.Store(false)
	clock.Advance(time.Minute)
	out = r.h.Handle(context.Background(), m)
	require.Equal(t, Delete, out.Action)
	require.Equal(t, "done", out.Label, "the verdict produced is saved, not expired")
	require.Equal(t, int32(1), r.rev.calls.Load(), "no model call repeated")
	require.Equal(t, int32(1), r.chat.calls.Load())
	v, err := r.store.Get(context.Background(), r.key())
	require.NoError(t, err)
	require.Equal(t, pipeline.StatusDone, v.Status)
	require.Equal(t, pipeline.LabelAbusive, v.Label)
	require.Zero(t, testutil.ToFloat64(r.m.admissions.WithLabelValues("expired")))
}
