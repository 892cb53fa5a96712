package capacity_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/capacity"
	"github.com/chatguard/chatguard/pipeline/capacity/capacitytest"
)

func TestLocalConformance(t *testing.T) {
	capacitytest.Run(t, func(*testing.T) (capacitytest.Store, clock.Clock) {
		c := clock.NewFake(time.Unix(1_000_000, 0))
		return capacity.NewLocal(c), c
	})
}

func TestLocalOutageSwitch(t *testing.T) {
	l := capacity.NewLocal(nil)
	l.SetFailing(true)
	_, _, err := l.Acquire(t.Context(), "n", "a", 1, time.Second)
	require.ErrorIs(t, err, capacity.ErrUnavailable)
	_, err = l.Take(t.Context(), "n", pipeline.Rate{PerMinute: 1, Burst: 1}, 1)
	require.ErrorIs(t, err, capacity.ErrUnavailable)
	l.SetFailing(false)
	ok, _, err := l.Acquire(t.Context(), "n", "a", 1, time.Second)
	require.NoError(t, err)
	require.True(t, ok)
}

func TestLocalGCRAOnAMovedClock(t *testing.T) {
	c := clock.NewFake(time.Unix(1_000_000, 0))
	l := capacity.NewLocal(c)
	rate := pipeline.Rate{PerMinute: 60, Burst: 2}
	for range 2 {
		res, err := l.Take(t.Context(), "b", rate, 1)
		require.NoError(t, err)
		require.True(t, res.Allowed)
	}
	res, err := l.Take(t.Context(), "b", rate, 1)
	require.NoError(t, err)
	require.False(t, res.Allowed)
	require.InDelta(t, time.Second, res.RetryAfter, float64(time.Millisecond))
	c.Advance(time.Second)
	res, err = l.Take(t.Context(), "b", rate, 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
}
