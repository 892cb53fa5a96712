package pipeline

import (
	"errors"
	"fmt"
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

// UnusableAnswerError is a stage call whose every answer was unusable:
// invalid for the stage's schema or cut at the token limit, on every
// attempt the router made. The models answered, so it says nothing about
// their health; what the chat made them write is the cause, and running
// the job again would only pay for the same answers. The job loop records
// it as a failed verdict with the reason and does not retry it.
type UnusableAnswerError struct {
	Stage    StageName
	Attempts int
	// Err is the last answer's problem.
	Err error
}

// Error implements error.
func (e *UnusableAnswerError) Error() string {
	return fmt.Sprintf("%s: no usable answer in %d attempts, last: %v", e.Stage, e.Attempts, e.Err)
}

// Unwrap returns the last answer's problem.
func (e *UnusableAnswerError) Unwrap() error { return e.Err }

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
	// Hold: a dependency the job needs is down; keep the message (its
	// visibility extended, its receive count unspent) and run the job again
	// once the dependency is back.
	Hold
)

// Classify sorts an error into a Disposition and the minimum delay before a
// retry. A failure of a dependency known to be down is held; unknown errors
// are retryable: losing work to a misclassified transient error is worse
// than retrying a permanent one a bounded number of times. A content
// failure (IsContentFailure) is given up: its retry would fail the same way.
func Classify(err error) (Disposition, time.Duration) {
	var (
		retry   *RetryableError
		stopped *StoppedError
		dep     *DependencyError
	)
	switch {
	case errors.As(err, &stopped):
		return Stopped, 0
	case IsContentFailure(err):
		return GiveUp, 0
	case errors.As(err, &dep) && dep.Down:
		return Hold, 0
	case errors.As(err, &retry):
		return RetryLater, retry.After
	default:
		return RetryLater, 0
	}
}

// Dependency names a service every job needs; each has its own health
// state (pipeline/health) fed by the outcomes of real calls.
type Dependency string

// The dependencies of a review job. The model pools count as one: the
// fallback covers the primary, so models are down only when both are.
const (
	DepMySQL   Dependency = "mysql"
	DepChatAPI Dependency = "chat_api"
	DepModels  Dependency = "models"
)

// Dependencies lists every Dependency in a fixed order (metrics, /readyz).
var Dependencies = []Dependency{DepMySQL, DepChatAPI, DepModels}

// DependencyError is a failure of a call to a dependency that is not
// specific to the job: a timeout, a refused connection, a 5xx, or a call
// not made because the dependency's breaker is open. Down is true when the
// dependency was known to be down (its breaker open or probing) after the
// call: the job failed because of an outage and must be held, not retried.
type DependencyError struct {
	Dep  Dependency
	Down bool
	Err  error
}

// Error implements error.
func (e *DependencyError) Error() string {
	if e.Down {
		return string(e.Dep) + " down: " + e.Err.Error()
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *DependencyError) Unwrap() error { return e.Err }

// IsContentFailure reports whether err was caused by what the job holds,
// not by how a dependency behaved: a permanent failure, an invalid event,
// or model answers that were unusable on every attempt
// (*UnusableAnswerError).
func IsContentFailure(err error) bool {
	var (
		perm     *PermanentError
		invalid  *InvalidEventError
		unusable *UnusableAnswerError
	)
	return errors.As(err, &perm) || errors.As(err, &invalid) || errors.As(err, &unusable)
}

// IsJobSpecific reports whether err from a dependency call is the job's own
// problem (nil, a content failure, a missing verdict, an operator stop),
// which says nothing about the dependency's health: only transport errors,
// 5xx, 429 and timeouts do. Cancellation is neither: the caller gave up,
// the dependency did not fail.
func IsJobSpecific(err error) bool {
	var stopped *StoppedError
	return err == nil || IsContentFailure(err) || errors.As(err, &stopped) || errors.Is(err, ErrVerdictNotFound)
}
