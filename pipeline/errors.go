package pipeline

import (
	"errors"
	"time"
)

// PermanentError wraps a failure that will not go away by retrying: a room
// that does not exist, a malformed event, a rejected request. The job loop
// records it and stops retrying.
type PermanentError struct {
	Err error
}

// Error implements error.
func (e *PermanentError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as a *PermanentError; nil stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// RetryableError wraps a transient failure. After, when positive, is the
// earliest time the work should be tried again (for example a Retry-After
// header); zero leaves the delay to the caller's backoff.
type RetryableError struct {
	Err   error
	After time.Duration
}

// Error implements error.
func (e *RetryableError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *RetryableError) Unwrap() error { return e.Err }

// Retryable wraps err as a *RetryableError with an optional minimum delay;
// nil stays nil.
func Retryable(err error, after time.Duration) error {
	if err == nil {
		return nil
	}
	return &RetryableError{Err: err, After: after}
}

// StoppedError is the cancellation cause of a review stopped by an operator
// (see the stop signals). Reason is the operator's text.
type StoppedError struct {
	Reason string
}

// Error implements error.
func (e *StoppedError) Error() string { return "stopped: " + e.Reason }

// Disposition is how the job loop treats a failed attempt.
type Disposition int

// The dispositions Classify returns.
const (
	// RetryLater: hand the message back for a later attempt.
	RetryLater Disposition = iota
	// GiveUp: record the failure and never retry.
	GiveUp
	// Stopped: an operator stopped the review.
	Stopped
)

// Classify sorts an error into a Disposition and the minimum delay before a
// retry. Unknown errors are retryable: losing work to a misclassified
// transient error is worse than retrying a permanent one a bounded number of
// times.
func Classify(err error) (Disposition, time.Duration) {
	var (
		perm    *PermanentError
		invalid *InvalidEventError
		retry   *RetryableError
		stopped *StoppedError
	)
	switch {
	case errors.As(err, &stopped):
		return Stopped, 0
	case errors.As(err, &perm), errors.As(err, &invalid):
		return GiveUp, 0
	case errors.As(err, &retry):
		return RetryLater, retry.After
	default:
		return RetryLater, 0
	}
}
