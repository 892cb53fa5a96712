package moderation

import (
	"context"
	"errors"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// Reversal of protective actions. When a moderator overturns a verdict,
// every protective action in force in its room is reversed (a notice
// retracted, a hold released, a restriction lifted): each reversal is an
// action of its own, under its own key (pipeline.ReversalActionKey),
// written with its outbox message in one transaction, so that it reaches
// the chat service at least once and is applied once. The overturn also
// records a cleared state for each account and rule reversed, so that the
// next window's verdict cannot act on the same person for the same thing
// until it expires. A later confirm that undoes the overturn re-applies
// what it reversed (pipeline.ReapplyActionKey) and removes the cleared
// states. The decision's audit row, written before the decision is saved,
// is the audit of its reversals.

// The states of a protective action's row.
const (
	// ActionWritten: taken (and, in mode on, sent or about to be).
	ActionWritten = "written"
	// ActionReversed: a later action reverses it.
	ActionReversed = "reversed"
)

// RoomAction is one protective action of a room as its row keeps it: no
// chat text, no model text, no moderator e-mail.
type RoomAction struct {
	Key    string
	Action pipeline.ActionKind
	Mode   pipeline.ActionMode
	Source pipeline.ActionSource
	// Rule is the policy rule that decided it; Account the account acted
	// on ("" for an escalation).
	Rule, Account string
	// Reverses is, on a reversal or a re-application, the key it undoes
	// or re-applies.
	Reverses string
	// State is ActionWritten or ActionReversed.
	State string
	// Verdict is the key of the verdict that decided it (a zero window
	// on a moderator's reversal) and VerdictRevision its revision.
	Verdict         pipeline.ReviewKey
	VerdictRevision int
	PolicyVersion   string
	PolicyHash      string
	CreatedAt       time.Time
	ExpiresAt       time.Time
}

// InForce reports whether a is a forward action (or a re-application)
// that is not reversed and has an undo.
func (a RoomAction) InForce() bool {
	return a.State == ActionWritten && a.Action.ReversedBy() != ""
}

// Reversal is what one overturn (or its undo) writes, in one transaction.
type Reversal struct {
	At time.Time
	// DecisionID is the decision that caused it.
	DecisionID uint64
	// Actions are the reversals (each with Reverses, the key it undoes,
	// whose row becomes ActionReversed) or the re-applications (each with
	// Reverses, the key it re-applies). The `on` ones get outbox messages.
	Actions []pipeline.ActionRecord
	// Clear are cleared states to record; Unclear those to remove (an
	// undone overturn).
	Clear, Unclear []pipeline.ActionClearance
}

// ProtectiveActions is the moderation side's record of protective actions.
// Methods are safe for concurrent use and return an error wrapping ctx's
// when ctx ends first.
type ProtectiveActions interface {
	// RoomActions returns the room's actions, newest first, at most
	// limit.
	RoomActions(ctx context.Context, roomID string, limit int) ([]RoomAction, error)
	// WriteReversal writes r in one transaction: each action's row (a key
	// written before keeps its row: a retried overturn writes nothing
	// twice), the reversed keys' state, the outbox messages of the `on`
	// actions, and the cleared states. An action the strict writer
	// refuses is a *pipeline.PermanentError and nothing is written.
	WriteReversal(ctx context.Context, r Reversal) error
}

// ReversalConfig is what reversing and re-applying need beyond the rows.
type ReversalConfig struct {
	// ClearedFor is how long an overturn clears an account for a rule.
	ClearedFor time.Duration
	// RestrictFor is how long a re-applied restriction lasts.
	RestrictFor time.Duration
	// TTL is how long a reversal stays worth applying (its expires_at).
	TTL time.Duration
	// Locale is the locale of the notices a re-application shows.
	Locale string
}

// DefaultReversalConfig returns the defaults, those of the shipped policy.
func DefaultReversalConfig() ReversalConfig {
	return ReversalConfig{ClearedFor: 720 * time.Hour, RestrictFor: 24 * time.Hour, TTL: 24 * time.Hour, Locale: "ko"}
}

// Validate reports every problem at once.
func (c ReversalConfig) Validate() error {
	var errs []error
	if c.ClearedFor <= 0 || c.RestrictFor <= 0 || c.TTL <= 0 {
		errs = append(errs, errors.New("cleared-for, restrict-for and the reversal TTL must be positive"))
	}
	if !pipeline.KnownNoticeLocale(c.Locale) {
		errs = append(errs, errors.New("the notice locale must be one of ko, en"))
	}
	return errors.Join(errs...)
}
