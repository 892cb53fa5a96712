package jobloop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// Claim defaults (ReviewConfig.ClaimTTL, ClaimPoll).
const (
	DefaultClaimTTL  = 2 * time.Minute
	DefaultClaimPoll = 5 * time.Second
)

// claimReview takes the cross-pod claim on a review before its first model
// call. While another worker holds a live claim this job waits (the loop's
// heartbeat keeps its message invisible, so the wait spends no receive
// count), polling every ClaimPoll: when the holder's done verdict appears
// the message is acknowledged as a duplicate without a model call; when the
// holder's claim expires (it died) this job takes it over. Once held, the
// claim is renewed every third of its TTL; a claim that cannot be renewed
// before it expires cancels the job with ErrLeaseLost, since another pod
// may then take the review over.
//
// It returns the job's context (cancelled when the claim is lost) and the
// claim held, or the outcome of a job that must not go on.
func (h *ReviewHandler) claimReview(ctx context.Context, m Message, key pipeline.ReviewKey, base pipeline.Verdict) (context.Context, *heldClaim, *Outcome) {
	// One owner per delivery: a held job run again after an outage finds
	// the claim it took before (and could not release) still its own.
	owner := fmt.Sprintf("%s/%s/%d", h.cfg.Owner, m.ID, m.ReceiveCount)
	ttl := h.cfg.ClaimTTL
	waited := false
	var c pipeline.Claim
	for {
		var err error
		c, err = h.cfg.Claims.Claim(ctx, key, owner, ttl)
		if err != nil {
			out := h.fail(ctx, m, base, fmt.Errorf("review: claim: %w", err))
			return nil, nil, &out
		}
		if c.Held {
			break
		}
		if !waited {
			waited = true
			h.m.admissions.WithLabelValues("claimed_elsewhere").Inc()
		}
		old, err := h.store.Get(ctx, key)
		switch {
		case err == nil && old.Status == pipeline.StatusDone:
			h.m.admissions.WithLabelValues("duplicate").Inc()
			return nil, nil, &Outcome{Action: Delete, Label: "duplicate"}
		case err != nil && !errors.Is(err, pipeline.ErrVerdictNotFound):
			out := h.fail(ctx, m, base, fmt.Errorf("review: look up verdict: %w", err))
			return nil, nil, &out
		}
		wait := min(h.cfg.ClaimPoll, max(c.Expires.Sub(h.now()), time.Millisecond))
		if err := h.wait(ctx, wait); err != nil {
			out := h.fail(ctx, m, base, fmt.Errorf("review: waiting for the claim of %s: %w", c.Owner, context.Cause(ctx)))
			return nil, nil, &out
		}
	}

	jobCtx, lose := context.WithCancelCause(ctx)
	renewCtx, stopRenew := context.WithCancel(jobCtx)
	hc := &heldClaim{h: h, ctx: ctx, key: key, owner: owner, lose: lose, stopRenew: stopRenew}
	hc.renewals.Go(func() { h.renewClaim(renewCtx, lose, key, owner, c.Expires) })
	return jobCtx, hc, nil
}

// heldClaim is the review claim a job holds, renewed until the review ends.
type heldClaim struct {
	h         *ReviewHandler
	ctx       context.Context // the job's, before the claim
	key       pipeline.ReviewKey
	owner     string
	lose      context.CancelCauseFunc
	stopRenew context.CancelFunc
	renewals  sync.WaitGroup
}

// stopRenewals stops renewing the claim and waits until no renewal is in
// flight, so that none can write the claim back after the verdict's save
// released it. Calling it again does nothing.
func (c *heldClaim) stopRenewals() {
	c.stopRenew()
	c.renewals.Wait()
}

// end is called when the review ends: it stops the renewals and, unless
// the verdict's save already did (released), drops the claim.
func (c *heldClaim) end(released bool) {
	c.stopRenewals()
	c.lose(nil)
	if released {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), c.h.cfg.SaveTimeout)
	defer cancel()
	if err := c.h.cfg.Claims.Release(rctx, c.key, c.owner); err != nil {
		c.h.log.Warn("review: claim not released; a duplicate waits until it expires", "room_id", c.key.RoomID, "err", err)
	}
}

// renewClaim renews the claim every third of its TTL until ctx ends; when
// the claim is taken over, or cannot be renewed in time, it cancels the job
// with ErrLeaseLost one renewal before the claim expires.
func (h *ReviewHandler) renewClaim(ctx context.Context, lose context.CancelCauseFunc, key pipeline.ReviewKey, owner string, expires time.Time) {
	every := h.cfg.ClaimTTL / 3
	for {
		if h.renewWait(ctx, every) != nil {
			return
		}
		c, err := h.cfg.Claims.Claim(ctx, key, owner, h.cfg.ClaimTTL)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil && c.Held:
			expires = c.Expires
			continue
		case err == nil: // taken over: ours had expired
		case expires.After(h.now().Add(every)):
			h.log.Warn("review: claim renewal failed; retrying", "room_id", key.RoomID, "err", err)
			continue
		}
		h.m.leaseLost.Inc()
		h.log.Warn("review: claim lost; cancelling the review", "room_id", key.RoomID, "err", fmt.Sprint(err))
		lose(ErrLeaseLost)
		return
	}
}
