package sqsjob

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
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

// A prefetched message that waits longer than half its visibility timeout
// for a slot (every slot busy, as with jobs held through an outage) is
// kept invisible instead of handed back, so its receive count is not
// spent; with MaxHold 0 it is handed back as before.
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
			cfg := testConfig()
			cfg.Concurrency, cfg.Pollers, cfg.Prefetch, cfg.MaxHold = 1, 1, 1, tc.maxHold
			// The shortest visibility the loop accepts: the wait for a
			// slot is cut every half of it (real time; the queue's clock
			// does not move, so nothing expires on its own).
			cfg.VisibilityTimeout, cfg.HeartbeatInterval = time.Second, 300*time.Millisecond
			hs, stop := setup(t, cfg, h, []string{"a", "b"})
			extends := func() float64 {
				return testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("prefetch_extend", "ok"))
			}
			if tc.extended {
				eventually(t, func() bool { return extends() >= 2 }, "the waiting message was extended twice")
				require.Zero(t, hs.q.Stats().Visible, "and never handed back")
			} else {
				// Handed back, the poller receives it again at once.
				eventually(t, func() bool { return hs.q.Stats().Received >= 3 }, "the waiting message was handed back and received again")
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
