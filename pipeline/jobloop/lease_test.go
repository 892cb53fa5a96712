package jobloop

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline/queuetest"
)

// A job whose visibility cannot be extended is cancelled with ErrLeaseLost
// one interval before its lease ends, and its message is left alone: no
// delete (the receipt may be stale), no visibility change.
func TestLoopCancelsJobBeforeItsLeaseEnds(t *testing.T) {
	t.Parallel()
	var failing atomic.Bool
	cause := make(chan error, 1)
	started := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		// A handler that ignores the cause and asks for a delete must
		// still not get one.
		return Outcome{Action: Delete, Label: "done"}
	})
	cfg := testConfig() // visibility 30 s, heartbeat 10 s
	hs, stop := setup(t, cfg, h, []string{"a"}, withFault(func(op queuetest.Op, _ queuetest.Entry) error {
		if op == queuetest.OpChangeVisibility && failing.Load() {
			return errors.New("sqs unreachable")
		}
		return nil
	}))
	<-started
	failing.Store(true)
	// t0+10s: due (ends t0+30s, within two intervals), extension fails,
	// but the next beat (t0+20s) still comes before the end: keep going.
	hs.waiters(t, 2) // the next beat, the job's deadline
	hs.advance(10 * time.Second)
	eventually(t, func() bool { return testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("heartbeat", "error")) == 1 }, "first failed beat")
	select {
	case err := <-cause:
		t.Fatalf("cancelled too early: %v", err)
	default:
	}
	// t0+20s: fails again; the next beat would be at the end: cancel now,
	// 10 s before the lease ends.
	hs.waiters(t, 2)
	hs.advance(10 * time.Second)
	require.ErrorIs(t, <-cause, ErrLeaseLost)
	eventually(t, func() bool { return testutil.ToFloat64(hs.loop.m.jobs.WithLabelValues("lease_lost")) == 1 }, "settled as lease_lost")
	require.Equal(t, 1.0, testutil.ToFloat64(hs.loop.m.leaseLost))
	require.False(t, hs.state(t, "msg-1").Deleted, "no delete with a lost lease")
	require.Zero(t, testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("delete", "ok")))
	require.Zero(t, testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("change_visibility", "ok")))
	require.Empty(t, hs.q.VisibilityChanges(), "nothing changed its visibility")
	failing.Store(false)
	require.NoError(t, stop())
}

// A heartbeat that could not even run in time (a stalled process) finds the
// job past its lease and cancels it without trying to extend it.
func TestLoopCancelsJobWhoseLeaseAlreadyEnded(t *testing.T) {
	t.Parallel()
	cause := make(chan error, 1)
	started := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		if m.ReceiveCount > 1 { // the redelivery, once the lease ended
			return Outcome{Action: Delete, Label: "done"}
		}
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return Outcome{Action: Retry}
	})
	cfg := testConfig()
	hs, stop := setup(t, cfg, h, []string{"a"})
	<-started
	// The beat due at t0+10s runs only once the clock reads t0+31s.
	hs.waiters(t, 2) // the next beat, the job's deadline
	hs.advance(cfg.VisibilityTimeout + time.Second)
	require.ErrorIs(t, <-cause, ErrLeaseLost)
	eventually(t, func() bool { return testutil.ToFloat64(hs.loop.m.jobs.WithLabelValues("lease_lost")) == 1 }, "settled as lease_lost")
	require.Zero(t, testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("heartbeat", "ok")))
	// The message came back when its lease ended, and only its redelivery
	// settled it: the cancelled job changed nothing.
	eventually(t, func() bool { return hs.state(t, "msg-1").Deleted }, "the redelivery deletes it")
	require.Empty(t, hs.q.VisibilityChanges())
	require.NoError(t, stop())
}
