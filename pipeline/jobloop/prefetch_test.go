package jobloop

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline/queuetest"
)

func TestPrefetchHoldsMessagesAheadOfSlotsButRunsNoMore(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		<-release
		return Outcome{Action: Delete}
	})
	cfg := testConfig()
	cfg.Concurrency, cfg.Pollers, cfg.Prefetch = 3, 1, 2
	hs, stop := setup(t, cfg, h, []string{"a", "b", "c", "d", "e", "f", "g"})
	inflight := func() float64 { return testutil.ToFloat64(hs.loop.m.inflight) }
	eventually(t, func() bool { return inflight() == 3 && hs.q.Stats().Received == 5 }, "three running, two held ahead")
	require.Equal(t, 3.0, inflight(), "prefetched messages do not run")
	// A finished job's slot goes to a held message at once.
	release <- struct{}{}
	eventually(t, func() bool { return hs.q.Stats().Deleted == 1 && inflight() == 3 }, "the held message took the slot")
	close(release)
	eventually(t, func() bool { return hs.held() == 0 }, "all deleted")
	require.NoError(t, stop())
	require.Equal(t, 7, hs.q.Stats().Received, "no message was received twice")
}

func TestPrefetchedMessagesAreHandedBackOnShutdown(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return Outcome{Action: Delete}
	})
	cfg := testConfig()
	cfg.Concurrency, cfg.Pollers, cfg.Prefetch = 1, 1, 1
	hs, stop := setup(t, cfg, h, []string{"a", "b"})
	eventually(t, func() bool { return hs.q.Stats().Received == 2 }, "one running, one held")
	done := make(chan error, 1)
	go func() { done <- stop() }()
	eventually(t, func() bool { return hs.q.Stats().Visible == 1 }, "the held message handed back while the job still runs")
	close(release)
	require.NoError(t, <-done)
	st := hs.q.Stats()
	require.Equal(t, 1, st.Deleted, "the running job finished")
	require.Equal(t, 1, st.Held, "the held message went back")
	require.Equal(t, 1, st.Visible, "and is visible at once")
}

func TestPrefetchValidate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Prefetch = -1
	require.Error(t, cfg.Validate())
	cfg.Prefetch = cfg.Concurrency + 1
	require.Error(t, cfg.Validate())
	cfg.Prefetch = cfg.Concurrency
	require.NoError(t, cfg.Validate())
}

// A prefetched message that waits for a slot until half its visibility
// has passed (every slot busy, as with jobs held through an outage) is
// kept invisible instead of handed back, so its receive count is not
// spent; with MaxHold 0 it is handed back as before. The wait runs on the
// loop's clock.
func TestPrefetchedMessagesWaitingLongAreExtendedNotHandedBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		maxHold  time.Duration
		extended bool
	}{{"extended", time.Hour, true}, {"handed back without max hold", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return Outcome{Action: Delete}
			})
			cfg := testConfig() // visibility 30 s
			cfg.Concurrency, cfg.Pollers, cfg.Prefetch, cfg.MaxHold = 1, 1, 1, tc.maxHold
			hs, stop := setup(t, cfg, h, []string{"a", "b"})
			extends := func() float64 {
				return testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("prefetch_extend", "ok"))
			}
			eventually(t, func() bool { return hs.q.Received() == 2 }, "one running, one waiting for the slot")
			// The next beat (it keeps the running job's lease), the job's
			// deadline, the wait for the slot.
			hs.waiters(t, 3)
			hs.advance(cfg.VisibilityTimeout / 2)
			if tc.extended {
				eventually(t, func() bool { return extends() == 1 }, "extended at half its visibility")
				hs.waiters(t, 3) // waiting again
				hs.advance(cfg.VisibilityTimeout / 2)
				eventually(t, func() bool { return extends() == 2 }, "extended again half a visibility after the first extension")
				require.Zero(t, hs.q.Stats().Visible, "and never handed back")
			} else {
				// Handed back, the poller receives it again at once.
				eventually(t, func() bool { return hs.q.Received() >= 3 }, "the waiting message was handed back and received again")
				require.Zero(t, extends())
			}
			close(release)
			eventually(t, func() bool { return hs.q.Stats().Deleted == 2 }, "both done")
			require.NoError(t, stop())
			if tc.extended {
				require.Equal(t, 2, hs.q.Stats().Received, "no message was received twice")
			}
		})
	}
}

// A prefetched message's lease is what SQS was told, counted from the call
// that told it: a message that waited for a slot for nearly half its
// visibility starts with only the rest of it, and the heartbeat extends it
// before it ends; one still waiting is extended half a visibility after
// its receive, however long the messages before it waited.
func TestPrefetchedLeaseCountsFromTheReceive(t *testing.T) {
	t.Parallel()
	started := make(chan string, 4)
	release := map[string]chan struct{}{"a": make(chan struct{}), "x": make(chan struct{}), "b": make(chan struct{}), "c": make(chan struct{})}
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		started <- string(m.Body)
		select {
		case <-release[string(m.Body)]:
		case <-ctx.Done():
		}
		return Outcome{Action: Delete}
	})
	cfg := testConfig() // visibility 30 s, heartbeat 10 s
	cfg.Concurrency, cfg.Pollers, cfg.Prefetch = 2, 1, 2
	hs, stop := setup(t, cfg, h, []string{"a", "x", "b", "c"})
	// Started, a and x tell that the batch's lease was taken; b and c wait
	// for a slot.
	require.ElementsMatch(t, []string{"a", "x"}, []string{<-started, <-started})
	require.Equal(t, 4, hs.q.Received(), "b and c received with a and x at t0")
	beats := func() float64 { return testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("heartbeat", "ok")) }

	// t0+10 s: the leases of a and x end at t0+30 s, within two heartbeat
	// intervals: the beat extends them to t0+40 s.
	hs.waiters(t, 4) // the next beat, the deadlines of a and x, b's wait for a slot
	hs.advance(10 * time.Second)
	eventually(t, func() bool { return beats() == 1 }, "the first beat")
	hs.waiters(t, 4)

	// t0+14 s: a ends; b takes its slot with 16 s of its lease left.
	hs.advance(4 * time.Second)
	close(release["a"])
	require.Equal(t, "b", <-started)

	// t0+20 s: c has waited past half its visibility (t0+15 s): the poller
	// extends it. The leases of b (t0+30 s) and x (t0+40 s) end within
	// two heartbeat intervals: the beat extends them.
	hs.waiters(t, 4) // the next beat, the deadlines of x and b, c's wait for a slot
	hs.advance(6 * time.Second)
	eventually(t, func() bool { return beats() == 2 }, "the second beat")
	require.Equal(t, 4.0, testutil.ToFloat64(hs.loop.m.extended), "the heartbeat extended a and x, then b with x")
	eventually(t, func() bool {
		return testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("prefetch_extend", "ok")) == 1
	}, "c extended while it waits")
	vis := cfg.VisibilityTimeout
	require.ElementsMatch(t, []queuetest.VisibilityChange{{ID: "msg-1", Visibility: vis}, {ID: "msg-2", Visibility: vis},
		{ID: "msg-4", Visibility: vis}, {ID: "msg-2", Visibility: vis}, {ID: "msg-3", Visibility: vis}},
		hs.q.VisibilityChanges())
	hs.waiters(t, 4)

	// t0+31 s: past the visibility of the receive, none came back.
	hs.advance(11 * time.Second)
	for _, id := range []string{"msg-2", "msg-3", "msg-4"} {
		require.True(t, hs.state(t, id).VisibleAt.After(hs.q.Now()), "%s still invisible", id)
	}
	close(release["b"])
	require.Equal(t, "c", <-started)
	close(release["c"])
	close(release["x"])
	eventually(t, func() bool { return hs.q.Stats().Deleted == 4 }, "all done")
	require.NoError(t, stop())
	require.Equal(t, 4, hs.q.Stats().Received, "no message was received twice")
	require.Zero(t, testutil.ToFloat64(hs.loop.m.leaseLost))
}
