package jobloop

import (
	"context"
	"errors"
	"sync/atomic"
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
	claims := storetest.NewClaims(clock)
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
			storetest.MustSave(t, ctx, r.store, v)
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

// sharedDBStore is the in-memory store with claims in the same "database":
// SaveReleasing saves and drops the claim together.
type sharedDBStore struct {
	*storetest.Memory
	claims        *storetest.Claims
	calls         int
	renewalsOver  *atomic.Bool
	renewedAtSave bool
	failNextSave  error
}

func (s *sharedDBStore) SaveReleasing(ctx context.Context, v pipeline.Verdict, owner string) (bool, error) {
	s.calls++
	s.renewedAtSave = !s.renewalsOver.Load()
	if err := s.failNextSave; err != nil {
		s.failNextSave = nil
		return false, err
	}
	committed, err := s.Save(ctx, v)
	if err != nil {
		return false, err
	}
	return committed, s.claims.Release(ctx, v.Key, owner)
}

// countingClaims counts the separate releases.
type countingClaims struct {
	pipeline.ReviewClaims
	releases atomic.Int32
}

func (c *countingClaims) Release(ctx context.Context, k pipeline.ReviewKey, owner string) error {
	c.releases.Add(1)
	return c.ReviewClaims.Release(ctx, k, owner)
}

func TestClaimIsReleasedByTheVerdictsSaveWhenTheyShareADatabase(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	clock := storetest.NewManualClock(r.now)
	claims := storetest.NewClaims(clock)
	var over atomic.Bool
	store := &sharedDBStore{Memory: r.store, claims: claims, renewalsOver: &over}
	counted := &countingClaims{ReviewClaims: claims}
	r.h = NewReviewHandler(ReviewConfig{MaxAge: 6 * time.Hour, Claims: counted, ClaimsInStore: true, Owner: "pod-a"}, store, r.chat, r.rev, r.sink, r.m, nil)
	r.h.now = clock.Now
	r.h.renewWait = func(ctx context.Context, _ time.Duration) error {
		<-ctx.Done()
		over.Store(true)
		return ctx.Err()
	}

	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.Equal(t, "done", out.Label)
	require.Equal(t, 1, store.calls, "one SaveReleasing")
	require.False(t, store.renewedAtSave, "renewals stopped before the save, so none can write the claim back")
	require.Zero(t, counted.releases.Load(), "no separate release")
	require.Zero(t, claims.Len(), "the claim went with the save")

	// A failed save leaves the claim to the separate release.
	over.Store(false)
	store.failNextSave = pipeline.Retryable(errors.New("mysql: save: boom"), 0)
	out = r.h.Handle(context.Background(), msg(r.body(t, func(e *pipeline.ReviewEvent) { e.RoomID = "room-2" }), 1, 5))
	require.Equal(t, Retry, out.Action)
	require.Equal(t, int32(1), counted.releases.Load())
	require.Zero(t, claims.Len())

	// Without ClaimsInStore the store's SaveReleasing is never used.
	r.h = NewReviewHandler(ReviewConfig{MaxAge: 6 * time.Hour, Claims: counted, Owner: "pod-a"}, store, r.chat, r.rev, r.sink, r.m, nil)
	r.h.now = clock.Now
	out = r.h.Handle(context.Background(), msg(r.body(t, func(e *pipeline.ReviewEvent) { e.RoomID = "room-3" }), 1, 5))
	require.Equal(t, "done", out.Label)
	require.Equal(t, 2, store.calls)
	require.Equal(t, int32(2), counted.releases.Load())
}

// A lost claim is a lost lease: the loop leaves the message to its
// visibility rather than handing it back with visibility 0, which would
// spend a receive count at once and let another pod start the review
// while this one's claim may still look live.
func TestLoopLeavesTheMessageOfALostClaim(t *testing.T) {
	t.Parallel()
	r := setupClaims(t)
	renew := make(chan struct{})
	r.h.renewWait = func(ctx context.Context, d time.Duration) error {
		select {
		case <-renew:
			r.clock.Advance(d)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.rev.review = func(ctx context.Context, _ pipeline.ReviewEvent, _ []pipeline.ChatMessage, _ int) (pipeline.Verdict, error) {
		r.claims.Err = func() error { return errors.New("mysql: connection refused") }
		renew <- struct{}{} // +40 s: fails, 80 s left: retry
		renew <- struct{}{} // +80 s: fails, 40 s left: lost
		<-ctx.Done()
		return pipeline.Verdict{}, ctx.Err()
	}
	hs, stop := setup(t, testConfig(), r.h, []string{string(r.body(t))})
	eventually(t, func() bool { return testutil.ToFloat64(hs.loop.m.jobs.WithLabelValues("lease_lost")) == 1 }, "settled as lease_lost")
	require.NoError(t, stop())
	require.Empty(t, hs.q.VisibilityChanges(), "no hand-back: the message keeps its visibility")
	require.Zero(t, testutil.ToFloat64(hs.loop.m.calls.WithLabelValues("change_visibility", "ok")))
	st := hs.state(t, "msg-1")
	require.False(t, st.Deleted)
	require.Equal(t, 1, st.Receives)
	require.True(t, st.VisibleAt.After(hs.q.Now()), "still invisible until its visibility ends")
	_, err := r.store.Get(context.Background(), r.key())
	require.ErrorIs(t, err, pipeline.ErrVerdictNotFound, "nothing recorded")
}
