package pipeline

import (
	"context"
	"time"
)

// StopOutcome is what became of an operator's stop request.
type StopOutcome string

// The stop outcomes an audit entry records.
const (
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
	// Identity is the authenticated name; "" when the request was refused.
	Identity   string
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

// StopAudit is the append-only record of operator stops. RecordStop
// returns an error when the entry could not be stored; the caller logs the
// entry then, so the log stays a second trail. It honours ctx.
type StopAudit interface {
	RecordStop(ctx context.Context, e StopAuditEntry) error
}
