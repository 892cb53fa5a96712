package reviewjob

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
	"github.com/chatguard/chatguard/storage/storetest"
)

// claimRig is a review handler with cross-pod claims, the claims on the
// handler's fake clock: a poll for the claim and a renewal wait on it
// until the test advances it.
type claimRig struct {
	*reviewRig
	claims *storetest.Claims
	calls  *countingClaims
}

func setupClaims(t *testing.T) *claimRig {
	t.Helper()
	r := setupReview(t)
	claims := storetest.NewClaims(r.clk)
	counted := &countingClaims{ReviewClaims: claims}
	r.cfg.Owner = "pod-a"
	d := r.deps()
	d.Claims = counted
	r.build(d)
	return &claimRig{reviewRig: r, claims: claims, calls: counted}
}

// bounded is a context that ends a test's wait that would otherwise hang.
func bounded(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// handleAsync runs the rig's handler on m in the background; read the
// outcome with result.
func (r *reviewRig) handleAsync(m jobloop.Message) <-chan jobloop.Outcome {
	out := make(chan jobloop.Outcome, 1)
	go func() { out <- r.h.Handle(context.Background(), m) }()
	return out
}

// result is the outcome handleAsync sends, or a failure after a bound.
func result(t *testing.T, out <-chan jobloop.Outcome) jobloop.Outcome {
	t.Helper()
	select {
	case o := <-out:
		return o
	case <-bounded(t).Done():
		t.Fatal("the job did not end")
		return jobloop.Outcome{}
	}
}

// step waits until the job waits on the clock, then moves the clock on by
// d, which must end that wait. It may run on the job's goroutine, so it
// reports a failure without stopping the test there.
func (r *reviewRig) step(t *testing.T, d time.Duration) {
	t.Helper()
	if err := r.clk.BlockUntilContext(bounded(t), 1); err != nil {
		t.Errorf("the job does not wait on the clock: %v", err)
		return
	}
	r.clk.Advance(d)
}

func TestClaimDuplicateWaitsAndAcknowledgesTheHoldersVerdict(t *testing.T) {
	t.Parallel()
	r := setupClaims(t)
	ctx := context.Background()
	held, err := r.claims.Claim(ctx, r.key(), "pod-b/1", time.Minute)
	require.NoError(t, err)
	require.True(t, held.Held)
	start := r.now()
	done := r.handleAsync(msg(r.body(t), 1, 5))
	r.step(t, DefaultClaimPoll)
	r.step(t, DefaultClaimPoll)
	require.NoError(t, r.clk.BlockUntilContext(bounded(t), 1))
	v := abusive() // the holder finishes during the third poll's wait
	v.Key, v.RunID, v.PublishedAt = r.key(), "run-1", r.window.Add(time.Hour)
	storetest.MustSave(t, ctx, r.store, v)
	r.clk.Advance(DefaultClaimPoll)
	out := result(t, done)
	require.Equal(t, jobloop.Delete, out.Action)
	require.Equal(t, "duplicate", out.Label)
	require.Equal(t, 3*DefaultClaimPoll, r.now().Sub(start), "three polls, ClaimPoll apart")
	require.Equal(t, int32(4), r.calls.claims.Load(), "one claim attempt per poll")
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
	done := r.handleAsync(msg(r.body(t), 1, 5))
	// Polls, the last one up to the expiry: a longer wait would not end
	// within these steps, a shorter one would claim once more.
	for _, d := range []time.Duration{5 * time.Second, 5 * time.Second, 2 * time.Second} {
		r.step(t, d)
	}
	out := result(t, done)
	require.Equal(t, "done", out.Label)
	require.Equal(t, int32(4), r.calls.claims.Load(), "three polls, then the take-over")
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
	require.Equal(t, jobloop.Retry, out.Action)
	require.Zero(t, r.rev.calls.Load())
}

// loseClaim is a review that fails the claim's renewals from its start
// and waits for its context to end: the renewal at +40 s fails with 80 s
// left (retried), the one at +80 s with 40 s left, not more than a
// renewal (lost). Renewals a third of the TTL apart end exactly there.
func (r *claimRig) loseClaim(t *testing.T, cause chan<- error) {
	r.rev.review = func(ctx context.Context, _ pipeline.ReviewEvent, _ []pipeline.ChatMessage, _ int) (pipeline.Verdict, error) {
		r.claims.Err = func() error { return errors.New("mysql: connection refused") }
		r.step(t, DefaultClaimTTL/3)
		r.step(t, DefaultClaimTTL/3)
		select {
		case <-ctx.Done():
		case <-bounded(t).Done():
		}
		cause <- context.Cause(ctx)
		return pipeline.Verdict{}, ctx.Err()
	}
}

// A claim that cannot be renewed before it expires cancels the review with
// ErrLeaseLost; nothing is recorded, the message is left to the loop.
func TestClaimLostCancelsTheReview(t *testing.T) {
	t.Parallel()
	r := setupClaims(t)
	cause := make(chan error, 1)
	r.loseClaim(t, cause)
	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.ErrorIs(t, <-cause, jobloop.ErrLeaseLost)
	require.Equal(t, "lease_lost", out.Label)
	_, err := r.store.Get(context.Background(), r.key())
	require.ErrorIs(t, err, pipeline.ErrVerdictNotFound, "nothing recorded")
	require.Equal(t, 1.0, sample(t, r.reg, "chatguard_worker_leases_lost_total"))
}

// sharedDBStore is the in-memory store with claims in the same "database":
// SaveReleasing saves and drops the claim together.
type sharedDBStore struct {
	*storetest.Memory
	claims        *storetest.Claims
	calls         int
	renewing      func() bool
	renewedAtSave bool
	failNextSave  error
}

func (s *sharedDBStore) SaveReleasing(ctx context.Context, v pipeline.Verdict, owner string) (bool, error) {
	s.calls++
	s.renewedAtSave = s.renewing()
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

// countingClaims counts the claim attempts and the separate releases.
type countingClaims struct {
	pipeline.ReviewClaims
	claims, releases atomic.Int32
}

func (c *countingClaims) Claim(ctx context.Context, k pipeline.ReviewKey, owner string, ttl time.Duration) (pipeline.Claim, error) {
	c.claims.Add(1)
	return c.ReviewClaims.Claim(ctx, k, owner, ttl)
}

func (c *countingClaims) Release(ctx context.Context, k pipeline.ReviewKey, owner string) error {
	c.releases.Add(1)
	return c.ReviewClaims.Release(ctx, k, owner)
}

// timerClock is a fake clock that counts its timers not yet stopped: a
// renewal waiting on the clock holds one until its wait ends.
type timerClock struct {
	*clock.Fake
	live atomic.Int32
}

func (c *timerClock) NewTimer(d time.Duration) clock.Timer {
	c.live.Add(1)
	return &countedTimer{Timer: c.Fake.NewTimer(d), c: c}
}

type countedTimer struct {
	clock.Timer
	c    *timerClock
	once sync.Once
}

func (t *countedTimer) Stop() bool {
	t.once.Do(func() { t.c.live.Add(-1) })
	return t.Timer.Stop()
}

func TestClaimIsReleasedByTheVerdictsSaveWhenTheyShareADatabase(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	clk := &timerClock{Fake: r.clk}
	claims := storetest.NewClaims(clk)
	store := &sharedDBStore{Memory: r.store, claims: claims, renewing: func() bool { return clk.live.Load() > 0 }}
	counted := &countingClaims{ReviewClaims: claims}
	r.cfg.Owner = "pod-a"
	deps := Deps{Store: store, Chat: r.chat, Reviewer: r.rev, Events: r.sink, Claims: counted, ClaimsInStore: true}
	r.h = New(r.cfg, deps, clk, r.m, nil)

	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.Equal(t, "done", out.Label)
	require.Equal(t, 1, store.calls, "one SaveReleasing")
	require.False(t, store.renewedAtSave, "renewals stopped before the save, so none can write the claim back")
	require.Zero(t, counted.releases.Load(), "no separate release")
	require.Zero(t, claims.Len(), "the claim went with the save")

	// A failed save leaves the claim to the separate release.
	store.failNextSave = pipeline.Retryable(errors.New("mysql: save: boom"), 0)
	out = r.h.Handle(context.Background(), msg(r.body(t, func(e *pipeline.ReviewEvent) { e.RoomID = "room-2" }), 1, 5))
	require.Equal(t, jobloop.Retry, out.Action)
	require.Equal(t, int32(1), counted.releases.Load())
	require.Zero(t, claims.Len())

	// Without ClaimsInStore the store's SaveReleasing is never used.
	deps.ClaimsInStore = false
	r.h = New(r.cfg, deps, clk, r.m, nil)
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
	r.loseClaim(t, make(chan error, 1))
	lr := runLoop(t, r.h, r.m.loop, []string{string(r.body(t))}, nil)
	eventually(t, func() bool { return sample(t, r.reg, "chatguard_worker_jobs_total", "outcome", "lease_lost") == 1 }, "settled as lease_lost")
	require.NoError(t, lr.stop())
	require.Empty(t, lr.q.VisibilityChanges(), "no hand-back: the message keeps its visibility")
	require.Zero(t, sample(t, r.reg, "chatguard_worker_sqs_calls_total", "op", "change_visibility", "outcome", "ok"))
	st, ok := lr.q.Message("msg-1")
	require.True(t, ok)
	require.False(t, st.Deleted)
	require.Equal(t, 1, st.Receives)
	require.True(t, st.VisibleAt.After(lr.q.Now()), "still invisible until its visibility ends")
	_, err := r.store.Get(context.Background(), r.key())
	require.ErrorIs(t, err, pipeline.ErrVerdictNotFound, "nothing recorded")
}
