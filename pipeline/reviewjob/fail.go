package reviewjob

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// fail decides what a failed attempt means: a stopped review and a
// permanent failure are recorded and deleted; a retryable one is handed
// back with a backoff, and on the last delivery before the DLQ it is
// recorded as failed first. A drain hands the message back untouched, a
// lost lease leaves it alone, and a dependency that is down holds it.
func (h *Handler) fail(ctx context.Context, j *job, err error) jobloop.Outcome {
	cause := context.Cause(ctx)
	if out, ok := interrupted(cause, err); ok {
		return out
	}
	disp, after, err := classify(cause, err)
	if disp == pipeline.Hold {
		return held(err)
	}
	v := j.base
	v.FinishedAt = h.clk.Now().UTC()
	v.Error = truncate(err.Error(), 4000)
	switch disp {
	case pipeline.Stopped:
		return h.recordStopped(ctx, v, err)
	case pipeline.GiveUp:
		v.Status = pipeline.StatusFailed
		return h.recordEnd(ctx, v, err, "failed")
	default:
		return h.retry(ctx, j, v, err, after)
	}
}

// interrupted is the outcome of a job cut short by the loop (ok true):
// released on a drain; left alone when its lease is lost, since another
// pod may run the review now, so nothing is recorded.
func interrupted(cause, err error) (jobloop.Outcome, bool) {
	switch {
	case errors.Is(cause, jobloop.ErrDraining):
		return jobloop.Outcome{Action: jobloop.Release, Label: "released", Err: err}, true
	case errors.Is(cause, jobloop.ErrLeaseLost):
		return jobloop.Outcome{Action: jobloop.Leave, Label: "lease_lost", Err: err}, true
	}
	return jobloop.Outcome{}, false
}

// classify is pipeline.Classify with the job's cancellation cause: a job
// timeout is retryable, and a review cancelled by a stop signal is stopped
// (err then is the *pipeline.StoppedError).
func classify(cause, err error) (pipeline.Disposition, time.Duration, error) {
	if errors.Is(cause, jobloop.ErrJobTimeout) {
		err = pipeline.Retryable(fmt.Errorf("%w: %w", jobloop.ErrJobTimeout, err), 0)
	}
	disp, after := pipeline.Classify(err)
	if disp == pipeline.RetryLater {
		var stopped *pipeline.StoppedError
		if errors.As(cause, &stopped) {
			disp, err = pipeline.Stopped, stopped
		}
	}
	return disp, after, err
}

// recordStopped records a stopped review with the stop's reason.
func (h *Handler) recordStopped(ctx context.Context, v pipeline.Verdict, err error) jobloop.Outcome {
	v.Status = pipeline.StatusStopped
	var stopped *pipeline.StoppedError
	if errors.As(err, &stopped) {
		v.Error = truncate(stopped.Reason, 4000)
	}
	return h.recordEnd(ctx, v, err, "stopped")
}

// recordEnd records the verdict that ends a job and deletes its message
// with label; a failed record is retried, or held while MySQL is down.
func (h *Handler) recordEnd(ctx context.Context, v pipeline.Verdict, err error, label string) jobloop.Outcome {
	if serr := h.record(ctx, v); serr != nil {
		return retryOrHold(errors.Join(err, serr), serr)
	}
	return jobloop.Outcome{Action: jobloop.Delete, Label: label, Err: err}
}

// retry hands a retryable failure back with its backoff. On the last
// delivery the queue's redrive takes the message to the DLQ on its next
// receive, so the row records why first.
func (h *Handler) retry(ctx context.Context, j *job, v pipeline.Verdict, err error, after time.Duration) jobloop.Outcome {
	if !j.m.Final {
		return jobloop.Outcome{Action: jobloop.Retry, Label: "retry", After: after, Err: err}
	}
	v.Status = pipeline.StatusFailed
	if serr := h.record(ctx, v); serr != nil {
		err = errors.Join(err, serr)
	}
	return jobloop.Outcome{Action: jobloop.Retry, Label: "failed_final", After: after, Err: err}
}

// truncate bounds a stored text by runes, never splitting one.
func truncate(s string, n int) string { return pipeline.ClipRunes(s, n) }
