package reviewjob

import (
	"context"
	"fmt"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// obtain produces the job's done verdict: the chat history (with the
// window's context, context.go), then the Reviewer's stages. On a failure it returns the job's outcome (ok false),
// the stages that ran kept on the failed row.
func (h *Handler) obtain(ctx context.Context, j *job) (pipeline.Verdict, jobloop.Outcome, bool) {
	msgs, err := h.history(ctx, j.ev)
	h.lap(j, "chat")
	if err != nil {
		return pipeline.Verdict{}, h.fail(ctx, j, fmt.Errorf("review: chat history: %w", err)), false
	}
	j.msgs = msgs
	v, err := h.runReviewer(ctx, j.ev, msgs, j.m.ReceiveCount)
	h.lap(j, "review")
	if err != nil {
		j.base.Stages = v.Stages
		return pipeline.Verdict{}, h.fail(ctx, j, fmt.Errorf("review: %w", err)), false
	}
	v.Key, v.RunID, v.PublishedAt, v.StartedAt, v.Attempts = j.key, j.ev.RunID, j.ev.PublishedAt, j.start.UTC(), j.m.ReceiveCount
	v.Status, v.Error = pipeline.StatusDone, ""
	v.OldestMessageAt, v.NewestMessageAt = pipeline.MessageSpan(msgs, j.ev.WindowStart, j.ev.WindowEnd)
	return v, jobloop.Outcome{}, true
}

// runReviewer calls the Reviewer, turning a panic into an error so that it
// counts as a failed attempt like any other.
func (h *Handler) runReviewer(ctx context.Context, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage, attempt int) (v pipeline.Verdict, err error) {
	defer func() {
		if r := recover(); r != nil {
			h.m.loop.CountPanic()
			err = fmt.Errorf("reviewer panicked: %v", r)
		}
	}()
	// The event's source sets the class of every model call the review
	// makes: a real-time review is served before batch work.
	return h.reviewer.Review(pipeline.WithClass(ctx, ev.Class()), ev, msgs, attempt)
}
