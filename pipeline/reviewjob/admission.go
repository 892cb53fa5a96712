package reviewjob

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// decode reads the message's event and checks it against the limits; an
// event that can never be processed is poison (ok false).
func (h *Handler) decode(m jobloop.Message, now time.Time) (pipeline.ReviewEvent, jobloop.Outcome, bool) {
	ev, err := pipeline.DecodeReviewEvent(m.Body)
	if err == nil {
		err = h.cfg.Limits.Check(ev, now)
	}
	if err == nil {
		return ev, jobloop.Outcome{}, true
	}
	h.m.admissions.WithLabelValues("invalid").Inc()
	var inv *pipeline.InvalidEventError
	reason := err.Error()
	if errors.As(err, &inv) {
		reason = inv.Reason
	}
	h.log.Warn("review: poison message", "message_id", m.ID, "reason", reason)
	return ev, jobloop.Outcome{Action: jobloop.Poison, Label: "poison", Reason: reason, Err: err}, false
}

// enter marks a review running in this process; false when it already
// runs. Two copies of one event in one receive batch (a republished run)
// would both miss the duplicate check and pay twice for the models. With
// cross-pod claims the second copy waits for the first instead (claim),
// which spends no receive count, so enter lets every job in.
func (h *Handler) enter(k pipeline.ReviewKey) bool {
	if h.claims != nil {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, busy := h.active[k]; busy {
		return false
	}
	h.active[k] = struct{}{}
	return true
}

// leave ends what enter began.
func (h *Handler) leave(k pipeline.ReviewKey) {
	if h.claims != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.active, k)
}

// admit looks the review up: a done verdict makes the job a duplicate,
// and a failed lookup a failed attempt (ok false: the job ends).
func (h *Handler) admit(ctx context.Context, j *job) (jobloop.Outcome, bool) {
	old, err := h.store.Get(ctx, j.key)
	h.lap(j, "admit")
	switch {
	case err == nil && old.Status == pipeline.StatusDone:
		h.m.admissions.WithLabelValues("duplicate").Inc()
		// The verdict's own save wrote its event to the outbox. One
		// saved without it (a console's on-demand review, a build from
		// before the outbox) gets it here, best effort; a copy that did
		// leave shares its id and partition, and the lake's _dedup views
		// keep one.
		h.publish(old)
		return jobloop.Outcome{Action: jobloop.Delete, Label: "duplicate"}, false
	case err != nil && !errors.Is(err, pipeline.ErrVerdictNotFound):
		return h.fail(ctx, j, fmt.Errorf("review: look up verdict: %w", err)), false
	}
	return jobloop.Outcome{}, true
}

// expire records an event older than MaxAge as expired (ok false: the
// job ends).
// A job held because its verdict could not be saved (MySQL down) saves
// the verdict it already paid for when it runs again (kept), however old
// the event has grown meanwhile.
func (h *Handler) expire(ctx context.Context, j *job, kept bool) (jobloop.Outcome, bool) {
	age := j.age()
	if kept || h.cfg.MaxAge <= 0 || age <= h.cfg.MaxAge {
		return jobloop.Outcome{}, true
	}
	h.m.admissions.WithLabelValues("expired").Inc()
	v := j.base
	v.Status = pipeline.StatusExpired
	v.Error = fmt.Sprintf("event is %s old, over the %s limit", age.Round(time.Second), h.cfg.MaxAge)
	v.FinishedAt = h.clk.Now().UTC()
	if err := h.save(ctx, v); err != nil {
		return jobloop.Outcome{Action: jobloop.Retry, Label: "retry", Err: err}, false
	}
	return jobloop.Outcome{Action: jobloop.Delete, Label: "expired"}, false
}
