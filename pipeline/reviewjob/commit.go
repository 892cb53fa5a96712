package reviewjob

import (
	"context"
	"fmt"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// saveDoneFunc writes a done verdict for a job; released says that the
// save also dropped the job's claim.
type saveDoneFunc func(ctx context.Context, j *job, v pipeline.Verdict) (committed, released bool, err error)

// chooseSaveDone picks, once, how done verdicts are written: with the
// claim's release in the same transaction when the claims live in the
// store's database and the store can (pipeline.ReleasingSaver), else a
// plain Save followed by the claim's own release.
func (h *Handler) chooseSaveDone(deps Deps) saveDoneFunc {
	rs, ok := deps.Store.(pipeline.ReleasingSaver)
	if !ok || deps.Claims == nil || !deps.ClaimsInStore {
		return func(ctx context.Context, _ *job, v pipeline.Verdict) (bool, bool, error) {
			committed, err := h.store.Save(ctx, v)
			return committed, false, err
		}
	}
	return func(ctx context.Context, j *job, v pipeline.Verdict) (bool, bool, error) {
		if j.claim == nil {
			committed, err := h.store.Save(ctx, v)
			return committed, false, err
		}
		// No renewal may write the claim back once the save dropped it;
		// renewals keep it at least a third of its TTL from expiry.
		j.claim.stopRenewals()
		committed, err := rs.SaveReleasing(ctx, v, j.claim.owner)
		return committed, err == nil, err
	}
}

// commitDone saves the job's done verdict with its event (written in the
// save's transaction, withVerdictEvent), then offers it to the Mirror when
// the save committed it. A save that fails while
// MySQL is down holds the job and keeps the verdict for its next run
// (unsaved.go). released says that the save dropped the claim.
func (h *Handler) commitDone(ctx context.Context, j *job, v pipeline.Verdict) (out jobloop.Outcome, released bool) {
	v.FinishedAt = h.clk.Now().UTC()
	v = h.withVerdictEvent(ctx, v)
	if h.actions != nil {
		var err error
		if v, err = h.actions.Plan(ctx, v, h.actionSource(ctx, j)); err != nil {
			out := h.fail(ctx, j, fmt.Errorf("review: plan actions: %w", err))
			if out.Action == jobloop.Hold {
				h.unsaved.put(j.m, v)
			}
			return out, false
		}
		pipeline.SetActionOffenders(v.Actions, h.reviewer)
	}
	committed, released, err := h.saveDone(ctx, j, v)
	h.lap(j, "save")
	if err != nil {
		out := h.fail(ctx, j, fmt.Errorf("review: save verdict: %w", err))
		if out.Action == jobloop.Hold {
			h.unsaved.put(j.m, v)
		}
		return out, released
	}
	h.observeStages(v)
	if committed {
		h.observeFreshness(j, v)
		if h.actions != nil {
			h.actions.Committed(v)
		}
		if h.mirror != nil && j.msgs != nil {
			h.mirror.Offer(v, j.ev, j.msgs)
		}
	}
	return jobloop.Outcome{Action: jobloop.Delete, Label: "done"}, released
}

// actionSource is where a job's verdict came from, for its actions: an
// interactive review (a moderator's on-demand one) is on_demand whatever
// its event says.
func (h *Handler) actionSource(ctx context.Context, j *job) pipeline.ActionSource {
	return pipeline.ActionSourceOf(j.ev.Source, pipeline.ClassFrom(ctx, j.ev.Class()) == pipeline.ClassInteractive)
}

// observeFreshness counts a committed done verdict's window messages
// (chatguard_review_messages_covered_total) and records its freshness, from
// its window's newest and oldest message to now (the commit), under the
// event's source; an event without one came from a batch publisher that
// predates the field. A window without messages has no freshness.
func (h *Handler) observeFreshness(j *job, v pipeline.Verdict) {
	source := j.ev.Source
	if source == "" {
		source = pipeline.SourceBatch
	}
	covered := 0
	for _, m := range j.msgs {
		// As MessageSpan reads the window: its messages, not the context
		// before it nor the trim notice.
		if !m.Context && m.MessageID != pipeline.TrimNoticeID && !m.SentAt.Before(j.ev.WindowStart) && m.SentAt.Before(j.ev.WindowEnd) {
			covered++
		}
	}
	h.m.covered.WithLabelValues(string(source)).Add(float64(covered))
	if v.NewestMessageAt.IsZero() {
		return
	}
	now := h.clk.Now()
	h.m.freshness.WithLabelValues(string(source)).Observe(max(now.Sub(v.NewestMessageAt), 0).Seconds())
	h.m.freshnessOldest.WithLabelValues(string(source)).Observe(max(now.Sub(v.OldestMessageAt), 0).Seconds())
}

// save writes a verdict with a bounded context of its own, so that a
// failure caused by the job's deadline can still be recorded.
func (h *Handler) save(ctx context.Context, v pipeline.Verdict) error {
	_, err := h.commit(ctx, v)
	return err
}

// record saves the verdict that ends a job (as save does) with its
// verdict event, which the store writes only when the save commits it: a
// stopped or failed verdict that the done-guard kept out of the store (the
// review was done meanwhile) must not tell the lake otherwise.
func (h *Handler) record(ctx context.Context, v pipeline.Verdict) error {
	_, err := h.commit(ctx, h.withVerdictEvent(ctx, v))
	return err
}

// commit is save, reporting whether the store committed v. SaveTimeout
// bounds a call to MySQL, on real time like the driver's own timeouts.
func (h *Handler) commit(ctx context.Context, v pipeline.Verdict) (bool, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.SaveTimeout)
	defer cancel()
	committed, err := h.store.Save(sctx, v)
	if err != nil {
		return false, fmt.Errorf("review: save %s verdict: %w", v.Status, err)
	}
	return committed, nil
}
