package reviewjob

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/health"
	"github.com/chatguard/chatguard/pipeline/jobloop"
	"github.com/chatguard/chatguard/storage/storetest"
)

// The handler turns a failure of a dependency that is down into a hold,
// even on the last delivery (no failed verdict, no DLQ).
func TestReviewHoldsWhenMySQLIsDown(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	mon, err := health.New(health.Config{Failures: 2, OpenFor: time.Minute}, nil, nil)
	require.NoError(t, err)
	r.build(Gated(r.deps(), mon))
	r.store.GetErr = func(pipeline.ReviewKey) error { return pipeline.Retryable(errors.New("mysql: connection refused"), 0) }
	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.Equal(t, jobloop.Retry, out.Action, "one failure is not an outage")
	out = r.h.Handle(context.Background(), msg(r.body(t), 5, 5))
	require.Equal(t, jobloop.Hold, out.Action, "the second opens the breaker: held, even on the last delivery")
	require.Equal(t, pipeline.DepMySQL, out.Dep)
	out = r.h.Handle(context.Background(), msg(r.body(t), 5, 5))
	require.Equal(t, jobloop.Hold, out.Action, "refused while open")
	require.Zero(t, r.rev.calls.Load())

	// A job-specific failure (the room does not exist) is no outage.
	r2 := setupReview(t)
	mon2, err := health.New(health.Config{Failures: 1, OpenFor: time.Minute}, nil, nil)
	require.NoError(t, err)
	r2.build(Gated(r2.deps(), mon2))
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
	clk := clock.NewFake(r.now().UTC())
	mon, err := health.New(health.Config{Failures: 1, OpenFor: time.Minute}, nil, nil, health.WithClock(clk))
	require.NoError(t, err)
	r.build(Gated(r.deps(), mon))
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
	require.Equal(t, jobloop.Hold, out.Action)
	require.Equal(t, int32(1), r.rev.calls.Load())
	down.Store(false)
	clk.Advance(time.Minute) // the open time ends; the rerun's first call probes
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
	clk := clock.NewFake(r.now().UTC())
	mon, err := health.New(health.Config{Failures: 1, OpenFor: time.Minute}, nil, nil, health.WithClock(clk))
	require.NoError(t, err)
	r.build(Gated(r.deps(), mon))
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
	require.Equal(t, jobloop.Hold, out.Action)
	require.Equal(t, int32(1), r.rev.calls.Load())
	// A long outage: the event is now older than MaxAge.
	r.clk.Advance(r.cfg.MaxAge + time.Hour)
	down.Store(false)
	clk.Advance(time.Minute)
	out = r.h.Handle(context.Background(), m)
	require.Equal(t, jobloop.Delete, out.Action)
	require.Equal(t, "done", out.Label, "the verdict produced is saved, not expired")
	require.Equal(t, int32(1), r.rev.calls.Load(), "no model call repeated")
	require.Equal(t, int32(1), r.chat.calls.Load())
	v, err := r.store.Get(context.Background(), r.key())
	require.NoError(t, err)
	require.Equal(t, pipeline.StatusDone, v.Status)
	require.Equal(t, pipeline.LabelAbusive, v.Label)
	require.Zero(t, testutil.ToFloat64(r.m.admissions.WithLabelValues("expired")))
}

// The gate keeps a store that can release claims on save able to, and
// does not make one that cannot look as if it could.
func TestGatedKeepsWhatTheStoreCanDo(t *testing.T) {
	t.Parallel()
	mon, err := health.New(health.Config{Failures: 2, OpenFor: time.Minute}, nil, nil)
	require.NoError(t, err)
	_, releasing := Gated(Deps{Store: storetest.NewMemory()}, mon).Store.(pipeline.ReleasingSaver)
	require.False(t, releasing)
	shared := &sharedDBStore{Memory: storetest.NewMemory()}
	_, releasing = Gated(Deps{Store: shared}, mon).Store.(pipeline.ReleasingSaver)
	require.True(t, releasing)
}
