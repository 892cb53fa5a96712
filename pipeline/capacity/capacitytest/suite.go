// Package capacitytest is the conformance suite of the fleet-wide limits:
// storage/redislimits (against real Redis) and capacity.Local both pass it,
// so a router test on Local means what it would mean on Redis.
package capacitytest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// Store is what the suite tests: one value implementing both ports.
type Store interface {
	pipeline.LeaseSemaphore
	pipeline.RateBudget
}

// NewStore returns a fresh store and the clock it keeps time on: a
// clock.Fake for an in-process store, so the suite moves lease expiry and
// budget refill by hand, or the wall clock for a store that keeps its own
// time (Redis), which the suite then waits on.
type NewStore func(t *testing.T) (Store, clock.Clock)

var seq atomic.Int64

// name returns a semaphore or budget name no other run uses: the random
// part keeps two processes on one shared store apart.
func name(t *testing.T) string {
	return fmt.Sprintf("cap-%s-%x-%d", t.Name(), rand.Uint64(), seq.Add(1))
}

// elapse lets d pass on c: a Fake moves at once, the wall clock is waited
// on (the store's own time must pass; nothing else is waited for).
func elapse(t *testing.T, c clock.Clock, d time.Duration) {
	if f, ok := c.(*clock.Fake); ok {
		f.Advance(d)
		return
	}
	require.NoError(t, clock.Sleep(t.Context(), c, d))
}

// Run runs the suite on the stores newStore returns.
func Run(t *testing.T, newStore NewStore) {
	t.Run("LeasesUpToTheLimit", func(t *testing.T) { leasesUpToTheLimit(t, newStore) })
	t.Run("ReserveByLimitPerClass", func(t *testing.T) { reserveByLimitPerClass(t, newStore) })
	t.Run("LeasesExpireUnlessRenewed", func(t *testing.T) { leasesExpireUnlessRenewed(t, newStore) })
	t.Run("BudgetAllowsTheBurstThenTheRate", func(t *testing.T) { budgetAllowsTheBurstThenTheRate(t, newStore) })
	t.Run("BudgetRefillsAtTheRate", func(t *testing.T) { budgetRefillsAtTheRate(t, newStore) })
	t.Run("BudgetKeepLeavesAReserve", func(t *testing.T) { budgetKeepLeavesAReserve(t, newStore) })
	t.Run("CanceledContext", func(t *testing.T) { canceledContext(t, newStore) })
}

func leasesUpToTheLimit(t *testing.T, newStore NewStore) {
	s, _ := newStore(t)
	ctx, n := t.Context(), name(t)
	for i := range 3 {
		ok, held, err := s.Acquire(ctx, n, fmt.Sprint("l", i), 3, time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, i+1, held)
	}
	ok, held, err := s.Acquire(ctx, n, "l3", 3, time.Minute)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, 3, held)
	// Another name is another semaphore.
	ok, _, err = s.Acquire(ctx, n+"-other", "l3", 3, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.Release(ctx, n, "l1"))
	require.NoError(t, s.Release(ctx, n, "never-held"))
	ok, held, err = s.Acquire(ctx, n, "l3", 3, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 3, held)
}

func reserveByLimitPerClass(t *testing.T, newStore NewStore) {
	s, _ := newStore(t)
	ctx, n := t.Context(), name(t)
	const limit, reserved = 4, 1
	for i := range limit - reserved {
		ok, _, err := s.Acquire(ctx, n, fmt.Sprint("batch", i), limit-reserved, time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
	}
	ok, _, err := s.Acquire(ctx, n, "batch-x", limit-reserved, time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "batch may not take the reserve")
	ok, _, err = s.Acquire(ctx, n, "interactive", limit, time.Minute)
	require.NoError(t, err)
	require.True(t, ok, "interactive takes the reserved slot")
	ok, _, err = s.Acquire(ctx, n, "interactive-2", limit, time.Minute)
	require.NoError(t, err)
	require.False(t, ok)
}

func leasesExpireUnlessRenewed(t *testing.T, newStore NewStore) {
	s, c := newStore(t)
	ctx, n := t.Context(), name(t)
	ok, _, err := s.Acquire(ctx, n, "short", 2, 30*time.Millisecond)
	require.NoError(t, err)
	require.True(t, ok)
	ok, _, err = s.Acquire(ctx, n, "long", 2, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	got, err := s.Renew(ctx, n, []string{"long", "absent"}, time.Minute)
	require.NoError(t, err)
	require.Equal(t, 1, got)
	// The short lease runs out: its slot comes back without a release.
	// A store on its own clock may expire a key a little late, hence the
	// bounded retry after the wait.
	elapse(t, c, 31*time.Millisecond)
	require.Eventually(t, func() bool {
		ok, _, err := s.Acquire(ctx, n, "next", 2, time.Minute)
		return err == nil && ok
	}, 5*time.Second, 10*time.Millisecond)
	got, err = s.Renew(ctx, n, []string{"short"}, time.Minute)
	require.NoError(t, err)
	require.Zero(t, got, "an expired lease is not renewed back to life")
}

func budgetAllowsTheBurstThenTheRate(t *testing.T, newStore NewStore) {
	s, _ := newStore(t)
	ctx, n := t.Context(), name(t)
	rate := pipeline.Rate{PerMinute: 600, Burst: 5} // one per 100 ms
	for i := range 5 {
		res, err := s.Take(ctx, n, rate, 1)
		require.NoError(t, err)
		require.True(t, res.Allowed, i)
		// Redis's float arithmetic may round one down.
		require.InDelta(t, 4-i, res.Remaining, 1)
	}
	res, err := s.Take(ctx, n, rate, 1)
	require.NoError(t, err)
	require.False(t, res.Allowed)
	require.Positive(t, res.RetryAfter)
	require.LessOrEqual(t, res.RetryAfter, 100*time.Millisecond)
	// More than the burst never fits.
	res, err = s.Take(ctx, n+"-big", rate, 6)
	require.NoError(t, err)
	require.False(t, res.Allowed)
	// A refusal took nothing: the other budget is still whole.
	res, err = s.Take(ctx, n+"-big", rate, 5)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	require.LessOrEqual(t, res.Remaining, 1)
}

func budgetRefillsAtTheRate(t *testing.T, newStore NewStore) {
	s, c := newStore(t)
	ctx, n := t.Context(), name(t)
	rate := pipeline.Rate{PerMinute: 6000, Burst: 1} // one per 10 ms
	res, err := s.Take(ctx, n, rate, 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	elapse(t, c, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		res, err := s.Take(ctx, n, rate, 1)
		return err == nil && res.Allowed
	}, 5*time.Second, 5*time.Millisecond)
}

func canceledContext(t *testing.T, newStore NewStore) {
	s, _ := newStore(t)
	n := name(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := s.Acquire(ctx, n, "x", 1, time.Minute)
	require.Error(t, err)
	_, err = s.Take(ctx, n, pipeline.Rate{PerMinute: 60, Burst: 1}, 1)
	require.Error(t, err)
}

// budgetKeepLeavesAReserve: a take with Keep is refused while it would
// leave fewer than Keep units, and a take without Keep still spends them.
func budgetKeepLeavesAReserve(t *testing.T, newStore NewStore) {
	s, _ := newStore(t)
	ctx, n := t.Context(), name(t)
	// One unit a minute: nothing refills while the test runs.
	low := pipeline.Rate{PerMinute: 1, Burst: 5, Keep: 2}
	for i := range 3 {
		res, err := s.Take(ctx, n, low, 1)
		require.NoError(t, err)
		require.True(t, res.Allowed, i)
		require.Equal(t, 4-i, res.Remaining, "Remaining counts the kept units too")
	}
	res, err := s.Take(ctx, n, low, 1)
	require.NoError(t, err)
	require.False(t, res.Allowed, "a fourth would leave fewer than Keep")
	require.Equal(t, 2, res.Remaining)
	require.InDelta(t, time.Minute, res.RetryAfter, float64(time.Second), "until one more unit refills")
	high := low
	high.Keep = 0
	for range 2 {
		res, err := s.Take(ctx, n, high, 1)
		require.NoError(t, err)
		require.True(t, res.Allowed, "the reserve is there for a take without Keep")
	}
	res, err = s.Take(ctx, n, high, 1)
	require.NoError(t, err)
	require.False(t, res.Allowed, "and then the budget is spent")
}
