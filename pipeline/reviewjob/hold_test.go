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

// heldAtSave is a job held because MySQL went down at its save, after
// its model calls: one model call made, the breaker open on the health
// clock until the test ends the outage.
type heldAtSave struct {
	*reviewRig
	job  jobloop.Message
	mon  *clock.Fake // the health monitor's clock
	down atomic.Bool
}

// holdAtSave runs a job whose save fails because MySQL is down, and
// checks that it is held after one model call.
func holdAtSave(t *testing.T) *heldAtSave {
	t.Helper()
	h := &heldAtSave{reviewRig: setupReview(t)}
	h.mon = clock.NewFake(h.now().UTC())
	mon, err := health.New(health.Config{Failures: 1, OpenFor: time.Minute}, nil, nil, health.WithClock(h.mon))
	require.NoError(t, err)
	h.build(Gated(h.deps(), mon))
	h.down.Store(true)
	h.store.SaveErr = func(pipeline.Verdict) error {
		if h.down.Load() {
			return pipeline.Retryable(errors.New("mysql: connection refused"), 0)
		}
		return nil
	}
	h.job = msg(h.body(t), 1, 5)
	out := h.h.Handle(context.Background(), h.job)
	require.Equal(t, jobloop.Hold, out.Action)
	require.Equal(t, int32(1), h.rev.calls.Load())
	return h
}

// recover brings MySQL back and lets the breaker's open time end, so that
// the job's next run probes, and runs the job again.
func (h *heldAtSave) recover() jobloop.Outcome {
	h.down.Store(false)
	h.mon.Advance(time.Minute)
	return h.h.Handle(context.Background(), h.job)
}

// requireKept checks the rerun saved the verdict it had, calling neither
// the models nor the chat API again.
func (h *heldAtSave) requireKept(t *testing.T) pipeline.Verdict {
	t.Helper()
	require.Equal(t, int32(1), h.rev.calls.Load(), "the verdict was kept, not reviewed again")
	require.Equal(t, int32(1), h.chat.calls.Load())
	v, err := h.store.Get(context.Background(), h.key())
	require.NoError(t, err)
	require.Equal(t, pipeline.StatusDone, v.Status)
	return v
}

// A job held because MySQL went down after its model calls saves the
// verdict it already has when it runs again: no second set of calls.
func TestHeldSaveKeepsTheVerdict(t *testing.T) {
	t.Parallel()
	h := holdAtSave(t)
	out := h.recover()
	require.Equal(t, "done", out.Label)
	h.requireKept(t)
}

// A held job whose event grew past MaxAge during the outage still saves
// the verdict the models already produced: it is done, not expired, and
// no model is called again.
func TestHeldSaveKeepsTheVerdictPastMaxAge(t *testing.T) {
	t.Parallel()
	h := holdAtSave(t)
	// A long outage: the event is now older than MaxAge.
	h.clk.Advance(h.cfg.MaxAge + time.Hour)
	out := h.recover()
	require.Equal(t, jobloop.Delete, out.Action)
	require.Equal(t, "done", out.Label, "the verdict produced is saved, not expired")
	v := h.requireKept(t)
	require.Equal(t, pipeline.LabelAbusive, v.Label)
	require.Zero(t, testutil.ToFloat64(h.m.admissions.WithLabelValues("expired")))
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
