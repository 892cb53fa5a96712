package reviewjob

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// Claim defaults (Config.ClaimTTL, ClaimPoll).
const (
	DefaultClaimTTL  = 2 * time.Minute
	DefaultClaimPoll = 5 * time.Second
)

// claim takes the cross-pod claim on a review before its first model call
// (without claims it does nothing). While another worker holds a live
// claim this job waits (the loop's heartbeat keeps its message invisible,
// so the wait spends no receive count), polling every ClaimPoll: when the
// holder's done verdict appears the message is acknowledged as a
// duplicate without a model call; when the holder's claim expires (it
// died) this job takes it over. Once held, the claim is renewed every
// third of its TTL; a claim that cannot be renewed before it expires
// cancels the job with jobloop.ErrLeaseLost, since another pod may then
// take the review over.
//
// It returns the job's context (cancelled when the claim is lost), or the
// outcome of a job that must not go on (ok false).
func (h *Handler) claim(ctx context.Context, j *job) (context.Context, jobloop.Outcome, bool) {
	if h.claims == nil {
		return ctx, jobloop.Outcome{}, true
	}
	// One owner per delivery: a held job run again after an outage finds
	// the claim it took before (and could not release) still its own.
	owner := fmt.Sprintf("%s/%s/%d", h.cfg.Owner, j.m.ID, j.m.ReceiveCount)
	c, out, ok := h.awaitClaim(ctx, j, owner)
	if !ok {
		return nil, out, false
	}
	jobCtx, lose := context.WithCancelCause(ctx)
	renewCtx, stopRenew := context.WithCancel(jobCtx)
	j.claim = &heldClaim{h: h, ctx: ctx, key: j.key, owner: owner, lose: lose, stopRenew: stopRenew}
	j.claim.renewals.Go(func() { h.renewClaim(renewCtx, lose, j.key, owner, c.Expires) })
	return jobCtx, jobloop.Outcome{}, true
}

// awaitClaim polls for the claim until this job holds it, or returns the
// job's outcome: a duplicate when the holder's done verdict appears, a
// failure when a call fails or the job's context ends.
func (h *Handler) awaitClaim(ctx context.Context, j *job, owner string) (pipeline.Claim, jobloop.Outcome, bool) {
	for waited := false; ; waited = true {
		c, err := h.claims.Claim(ctx, j.key, owner, h.cfg.ClaimTTL)
		if err != nil {
			return c, h.fail(ctx, j, fmt.Errorf("review: claim: %w", err)), false
		}
		if c.Held {
			return c, jobloop.Outcome{}, true
		}
		if !waited {
			h.m.admissions.WithLabelValues("claimed_elsewhere").Inc()
		}
		old, err := h.store.Get(ctx, j.key)
		switch {
		case err == nil && old.Status == pipeline.StatusDone:
			h.m.admissions.WithLabelValues("duplicate").Inc()
			return c, jobloop.Outcome{Action: jobloop.Delete, Label: "duplicate"}, false
		case err != nil && !errors.Is(err, pipeline.ErrVerdictNotFound):
			return c, h.fail(ctx, j, fmt.Errorf("review: look up verdict: %w", err)), false
		}
		wait := min(h.cfg.ClaimPoll, max(c.Expires.Sub(h.clk.Now()), time.Millisecond))
		if err := clock.Sleep(ctx, h.clk, wait); err != nil {
			return c, h.fail(ctx, j, fmt.Errorf("review: waiting for the claim of %s: %w", c.Owner, context.Cause(ctx))), false
		}
	}
}

// endClaim ends the job's claim when it holds one (see heldClaim.end).
func (h *Handler) endClaim(j *job, released bool) {
	if j.claim == nil {
		return
	}
	t := h.clk.Now()
	j.claim.end(released)
	h.m.loop.ObservePhase("release", h.clk.Now().Sub(t))
}

// heldClaim is the review claim a job holds, renewed until the review ends.
type heldClaim struct {
	h         *Handler
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
	if err := c.h.claims.Release(rctx, c.key, c.owner); err != nil {
		c.h.log.Warn("review: claim not released; a duplicate waits until it expires", "room_id", c.key.RoomID, "err", err)
	}
}

// renewClaim renews the claim every third of its TTL until ctx ends; when
// the claim is taken over, or cannot be renewed in time, it cancels the job
// with jobloop.ErrLeaseLost one renewal before the claim expires.
func (h *Handler) renewClaim(ctx context.Context, lose context.CancelCauseFunc, key pipeline.ReviewKey, owner string, expires time.Time) {
	every := h.cfg.ClaimTTL / 3
	for {
		if clock.Sleep(ctx, h.clk, every) != nil {
			return
		}
		c, err := h.claims.Claim(ctx, key, owner, h.cfg.ClaimTTL)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil && c.Held:
			expires = c.Expires
			continue
		case err == nil: // taken over: ours had expired
		case expires.After(h.clk.Now().Add(every)):
			h.log.Warn("review: claim renewal failed; retrying", "room_id", key.RoomID, "err", err)
			continue
		}
		h.m.loop.CountLeaseLost()
		h.log.Warn("review: claim lost; cancelling the review", "room_id", key.RoomID, "err", fmt.Sprint(err))
		lose(jobloop.ErrLeaseLost)
		return
	}
}
