package pipeline

import (
	"context"
	"time"
)

// StopOutcome is what became of an operator's stop request.
type StopOutcome string

// The stop outcomes an audit entry records.
const (
	// StopPending: authenticated and valid, recorded before it is
	// published; the outcome follows on the same entry. An entry left
	// pending means the stop may have taken effect (the process ended
	// between the publish and the outcome, or the outcome could not be
	// written).
	StopPending StopOutcome = "pending"
	// StopAccepted: authenticated, valid, published.
	StopAccepted StopOutcome = "accepted"
	// StopRefused: no bearer token, or one that matches no configured token.
	StopRefused StopOutcome = "refused"
	// StopInvalid: authenticated, but the body is not a valid stop.
	StopInvalid StopOutcome = "invalid"
	// StopFailed: authenticated and valid, but publishing failed (Redis).
	StopFailed StopOutcome = "failed"
)

// StopAuditEntry is one operator stop request as the audit trail keeps it:
// who asked (the name of the token that authenticated the request, never
// the token), when, from where, the target, the TTL, the reason and what
// became of it.
type StopAuditEntry struct {
	RequestedAt time.Time
	// FinishedAt is when the outcome was known; zero while pending.
	FinishedAt time.Time
	// Identity is the authenticated name; "" when the request was refused.
	Identity string
	// Moderator is the console moderator a stop was sent for (the
	// request's Moderator), "" for an operator's own.
	Moderator  string
	RemoteAddr string
	Outcome    StopOutcome
	HTTPStatus int
	// Scope and the target fields are what the request named; empty when
	// the body could not be read.
	Scope       StopScope
	RoomID      string
	RunID       string
	WindowStart time.Time
	WindowEnd   time.Time
	TTL         time.Duration
	// Reason is the operator's reason, with contact details already masked.
	Reason string
	// Detail says why a request was refused, invalid or failed.
	Detail string
}

// StopAudit is the append-only record of operator stops. A stop is
// recorded before it acts: BeginStop appends the entry as pending and
// returns its id, and once the stop was published (or failed to be),
// FinishStop records the outcome on that entry, once; an entry that is no
// longer pending cannot change. RecordStop appends an entry that never
// acts (refused, invalid, disabled) with its outcome. Each returns an
// error when the entry could not be stored; the caller must not act on a
// stop whose BeginStop failed, and logs the entry, so the log stays a
// second trail. Each honours ctx.
type StopAudit interface {
	RecordStop(ctx context.Context, e StopAuditEntry) error
	BeginStop(ctx context.Context, e StopAuditEntry) (id int64, err error)
	FinishStop(ctx context.Context, id int64, e StopAuditEntry) error
}
