package shadow_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/shadow"
	"github.com/chatguard/chatguard/storage/redislimits"
)

// Two pods share one budget in the real Redis: once one review's spend
// fills it, each pod's next review is refused its charge and that pod drops
// offers (counted) until the budget has room again.
func TestSpentBudgetDropsAndCountsOnEveryPod(t *testing.T) {
	t.Parallel()
	store := redislimits.New(stacktest.Redis(t), stacktest.Unique("shadowbudget")+":")
	clk := clock.NewFake(t0)
	// The candidate spends 1,100 tokens and 0.005 USD a review: two
	// reviews overspend a 2,000-token minute.
	budget := shadow.Budget{Store: store, Name: "managed-large", TokensPerMinute: 2000, USDPerDay: 100, CallTimeout: 5 * time.Second}
	pod := func() (*shadow.Runner, *candidate, sink) {
		cand, events := &candidate{mode: "ok", entered: make(chan struct{}, 64)}, make(sink, 64)
		r, err := shadow.New(shadow.Config{Rate: 1, Concurrency: 1, Timeout: time.Minute, Candidate: "managed-large",
			Budget: budget, Registerer: prometheus.NewRegistry()}, cand, events, clk)
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.Close(context.Background()) })
		return r, cand, events
	}
	a, _, aEvents := pod()
	b, _, bEvents := pod()
	keys := sampledKeys(6, 1)

	a.Offer(live(keys[0]), pipeline.ReviewEvent{}, nil)
	require.Equal(t, pipeline.ShadowOK, next(t, aEvents).Outcome, "1,100 of 2,000 tokens")
	b.Offer(live(keys[1]), pipeline.ReviewEvent{}, nil)
	require.Equal(t, pipeline.ShadowOK, next(t, bEvents).Outcome, "the charge of 1,100 more is refused: b pauses")
	a.Offer(live(keys[2]), pipeline.ReviewEvent{}, nil)
	require.Equal(t, pipeline.ShadowOK, next(t, aEvents).Outcome, "a learns of the spent budget from its own charge")

	for _, r := range []*shadow.Runner{a, b} {
		r.Offer(live(keys[3]), pipeline.ReviewEvent{}, nil)
		require.Equal(t, 1.0, testutilCount(r, "dropped_budget"), "dropped at the offer, counted")
	}
	require.Empty(t, aEvents)
	require.Empty(t, bEvents)

	// The pod's pause ends with the budget's RetryAfter (under a minute
	// here): the next offer runs.
	clk.Advance(2 * time.Minute)
	a.Offer(live(keys[4]), pipeline.ReviewEvent{}, nil)
	require.Equal(t, pipeline.ShadowOK, next(t, aEvents).Outcome)
}

func testutilCount(r *shadow.Runner, outcome string) float64 {
	return testutil.ToFloat64(r.Metrics().WithLabelValues(outcome))
}

func TestBudgetValidate(t *testing.T) {
	t.Parallel()
	err := shadow.Config{Rate: 0.1, Concurrency: 1, Timeout: time.Second, Candidate: "c",
		Budget: shadow.Budget{Store: redislimits.New(nil, ""), TokensPerMinute: -1, USDPerDay: 5}}.Validate()
	require.ErrorContains(t, err, "must not be negative")
	require.ErrorContains(t, err, "call timeout")
}
