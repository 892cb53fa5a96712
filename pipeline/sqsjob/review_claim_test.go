package sqsjob

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

// claimRig is a review handler with cross-pod claims on a manual clock;
// waits and renewals call the test's functions instead of sleeping.
type claimRig struct {
	*reviewRig
	clock  *storetest.ManualClock
	claims *storetest.Claims
}

func setupClaims(t *testing.T) *claimRig {
	t.Helper()
	r := setupReview(t)
	clock := storetest.NewManualClock(r.now)
	claims := storetest.NewClaims(clock.Now)
	r.h.cfg.Claims, r.h.cfg.Owner = claims, "pod-a"
	r.h.now = clock.Now
	// Renewals wait for the job to end unless a test drives them.
	r.h.renewWait = func(ctx context.Context, _ time.Duration) error { <-ctx.Done(); return ctx.Err() }
	return &claimRig{reviewRig: r, clock: clock, claims: claims}
}

func TestClaimDuplicateWaitsAndAcknowledgesTheHoldersVerdict(t *testing.T) {
	t.Parallel()
	r := setupClaims(t)
	ctx := context.Background()
	held, err := r.claims.Claim(ctx, r.key(), "pod-b/1", time.Minute)
	require.NoError(t, err)
	require.True(t, held.Held)
	waits := 0
	r.h.wait = func(ctx context.Context, d time.Duration) error {
		waits++
		require.Equal(t, DefaultClaimPoll, d)
		r.clock.Advance(d)
		if waits == 3 { // the holder finishes
			v := abusive()
			v.Key, v.RunID, v.PublishedAt = r.key(), "run-1", r.window.Add(time.Hour)
			require.NoError(t, r.store.Save(ctx, v))
		}
		return nil
	}
	out := r.h.Handle(ctx, msg(r.body(t), 1, 5))
	require.Equal(t, Delete, out.Action)
	require.Equal(t, "duplicate", out.Label)
	require.Equal(t, 3, waits)
	require.Zero(t, r.rev.calls.Load(), "no model call for a review another pod ran")
	require.Zero(t, r.chat.calls.Load())
	require.Equal(t, 1.0, testutil.ToFloat64(r.m.admissions.WithLabelValues("claimed_elsewhere")))
}

func TestClaimOfADeadHolderIsTakenOverAtExpiry(t *testing.T) {
	t.Parallel()
	r := setupClaims(t)
	ctx := context.Background()
	_, err := r.claims.Claim(ctx, r.key(), "pod-b/1", 12*time.Second)
	require.NoError(t, err)
	var waited []time.Duration
	r.h.wait = func(ctx context.Context, d time.Duration) error {
		waited = append(waited, d)
		r.clock.Advance(d)
		return nil
	}
	out := r.h.Handle(ctx, msg(r.body(t), 1, 5))
	require.Equal(t, "done", out.Label)
	require.Equal(t, []time.Duration{5 * time.Second, 5 * time.Second, 2 * time.Second}, waited, "polls, the last one up to the expiry")
	require.Equal(t, int32(1), r.rev.calls.Load())
	require.Zero(t, r.claims.Len(), "released when the review ends")
}

func TestClaimReleasedAfterEveryOutcome(t *testing.T) {
	t.Parallel()
	r := setupClaims(t)
	r.chat.err = pipeline.Permanent(errors.New("room does not exist"))
	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.Equal(t, "failed", out.Label)
	require.Zero(t, r.claims.Len())
}

func TestClaimErrorIsARetryableFailureWithoutModelCalls(t *testing.T) {
	t.Parallel()
	r := setupClaims(t)
	r.claims.Err = func() error { return pipeline.Retryable(errors.New("mysql: connection refused"), 0) }
	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.Equal(t, Retry, out.Action)
	require.Zero(t, r.rev.calls.Load())
}

// A claim that cannot be renewed before it expires cancels the review with
// ErrLeaseLost; nothing is recorded, the message is left to the loop.
func TestClaimLostCancelsTheReview(t *testing.T) {
	t.Parallel()
	r := setupClaims(t)
	renew := make(chan struct{})
	r.h.renewWait = func(ctx context.Context, d time.Duration) error {
		require.Equal(t, DefaultClaimTTL/3, d)
		select {
		case <-renew:
			r.clock.Advance(d)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	cause := make(chan error, 1)
	r.rev.review = func(ctx context.Context, _ pipeline.ReviewEvent, _ []pipeline.ChatMessage, _ int) (pipeline.Verdict, error) {
		r.claims.Err = func() error { return errors.New("mysql: connection refused") }
		renew <- struct{}{} // +40 s: fails, 80 s left: retry
		renew <- struct{}{} // +80 s: fails, 40 s left, not more than a renewal: lost
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return pipeline.Verdict{}, ctx.Err()
	}
	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.ErrorIs(t, <-cause, ErrLeaseLost)
	require.Equal(t, "lease_lost", out.Label)
	_, err := r.store.Get(context.Background(), r.key())
	require.ErrorIs(t, err, pipeline.ErrVerdictNotFound, "nothing recorded")
	require.Equal(t, 1.0, testutil.ToFloat64(r.m.leaseLost))
}
