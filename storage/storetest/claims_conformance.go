package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// RunReviewClaimsConformance checks a pipeline.ReviewClaims built by
// newClaims on the clock c: one holder at a time, renewal by the holder,
// takeover after expiry only, release by the holder only, and exactly one
// winner among concurrent claimers.
func RunReviewClaimsConformance(t *testing.T, newClaims func(t *testing.T, c clock.Clock) pipeline.ReviewClaims) {
	t.Helper()
	claimsHolder(t, newClaims)
	claimsConcurrent(t, newClaims)
}

// claimsStart is the fake clock's start in the claims conformance suite.
var claimsStart = time.Date(2026, 11, 3, 5, 0, 0, 0, time.UTC)

// claimKey is the review key of room in the claims conformance suite.
func claimKey(room string) pipeline.ReviewKey {
	ws := time.Date(2026, 11, 3, 4, 0, 0, 0, time.UTC)
	return pipeline.ReviewKey{RoomID: room, WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "pv-claims"}
}

// claimsHolder checks one holder until expiry, renewal, takeover,
// release by the holder only, and independent keys.
func claimsHolder(t *testing.T, newClaims func(t *testing.T, c clock.Clock) pipeline.ReviewClaims) {
	t.Helper()
	t.Run("one holder until expiry, then takeover", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(claimsStart)
		c := newClaims(t, clk)
		ctx := context.Background()
		k := claimKey("room-1")
		got, err := c.Claim(ctx, k, "pod-a/1", time.Minute)
		require.NoError(t, err)
		require.Equal(t, pipeline.Claim{Held: true, Owner: "pod-a/1", Expires: claimsStart.Add(time.Minute)}, got)

		got, err = c.Claim(ctx, k, "pod-b/1", time.Minute)
		require.NoError(t, err)
		require.False(t, got.Held, "a live claim is not taken")
		require.Equal(t, "pod-a/1", got.Owner)
		require.Equal(t, claimsStart.Add(time.Minute), got.Expires)

		// A renewal at the very same instant changes nothing and is held.
		got, err = c.Claim(ctx, k, "pod-a/1", time.Minute)
		require.NoError(t, err)
		require.Equal(t, pipeline.Claim{Held: true, Owner: "pod-a/1", Expires: claimsStart.Add(time.Minute)}, got)

		// The holder renews; the other still waits.
		clk.Advance(40 * time.Second)
		got, err = c.Claim(ctx, k, "pod-a/1", time.Minute)
		require.NoError(t, err)
		require.True(t, got.Held)
		require.Equal(t, claimsStart.Add(100*time.Second), got.Expires)
		clk.Advance(40 * time.Second)
		got, err = c.Claim(ctx, k, "pod-b/1", time.Minute)
		require.NoError(t, err)
		require.False(t, got.Held, "renewed: still live at +80s")

		// The holder dies: at expiry anyone takes over.
		clk.Advance(20 * time.Second)
		got, err = c.Claim(ctx, k, "pod-b/1", time.Minute)
		require.NoError(t, err)
		require.True(t, got.Held, "an expired claim is taken over")
		require.Equal(t, "pod-b/1", got.Owner)

		// The old holder's release does not drop the new claim.
		require.NoError(t, c.Release(ctx, k, "pod-a/1"))
		got, err = c.Claim(ctx, k, "pod-a/1", time.Minute)
		require.NoError(t, err)
		require.False(t, got.Held)
		require.Equal(t, "pod-b/1", got.Owner)

		// Its holder's release frees it at once.
		require.NoError(t, c.Release(ctx, k, "pod-b/1"))
		got, err = c.Claim(ctx, k, "pod-a/2", time.Minute)
		require.NoError(t, err)
		require.True(t, got.Held)

		// Keys are independent.
		got, err = c.Claim(ctx, claimKey("room-2"), "pod-b/2", time.Minute)
		require.NoError(t, err)
		require.True(t, got.Held)
		other := k
		other.PipelineVersion = "pv-other"
		got, err = c.Claim(ctx, other, "pod-b/3", time.Minute)
		require.NoError(t, err)
		require.True(t, got.Held, "another pipeline version is another review")
	})
}

// claimsConcurrent checks one winner among concurrent claimers and a
// cancelled context.
func claimsConcurrent(t *testing.T, newClaims func(t *testing.T, c clock.Clock) pipeline.ReviewClaims) {
	t.Helper()
	t.Run("one winner among concurrent claimers", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(claimsStart)
		c := newClaims(t, clk)
		for round := range 5 {
			k := claimKey(fmt.Sprintf("race-%d", round))
			var wg sync.WaitGroup
			var held, failed atomic.Int32
			for i := range 8 {
				wg.Go(func() {
					got, err := c.Claim(context.Background(), k, fmt.Sprintf("pod-%d", i), time.Minute)
					switch {
					case err != nil:
						failed.Add(1)
					case got.Held:
						held.Add(1)
					}
				})
			}
			wg.Wait()
			require.Zero(t, failed.Load(), "round %d: claims failed", round)
			require.Equal(t, int32(1), held.Load(), "round %d", round)
		}
		// Racing to take over one expired claim: one winner too.
		k := claimKey("race-expired")
		_, err := c.Claim(context.Background(), k, "pod-dead", time.Minute)
		require.NoError(t, err)
		clk.Advance(2 * time.Minute)
		var wg sync.WaitGroup
		var held atomic.Int32
		for i := range 8 {
			wg.Go(func() {
				got, err := c.Claim(context.Background(), k, fmt.Sprintf("pod-new-%d", i), time.Minute)
				if err == nil && got.Held {
					held.Add(1)
				}
			})
		}
		wg.Wait()
		require.Equal(t, int32(1), held.Load(), "takeover of an expired claim")
	})

	t.Run("cancelled context", func(t *testing.T) {
		t.Parallel()
		c := newClaims(t, clock.NewFake(claimsStart))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := c.Claim(ctx, claimKey("room-3"), "pod-a", time.Minute)
		require.ErrorIs(t, err, context.Canceled)
	})
}
