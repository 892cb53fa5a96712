package moderation

import (
	"context"
	"errors"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// Reversal is what an overturn asks of the protective actions written
// about its verdict (docs/actions.md): their reversal, and a cleared
// state for each account and rule they acted under.
type Reversal struct {
	// Key is the overturned verdict's review key.
	Key pipeline.ReviewKey
	// DecisionID is the overturning decision (recorded with the cleared
	// states).
	DecisionID uint64
	// At is when the overturn was decided; the reversals' issued_at.
	At time.Time
	// ClearedUntil ends the cleared states (the policy's cleared_for
	// after At); ExpiresAt the reversals' expires_at.
	ClearedUntil, ExpiresAt time.Time
}

// ProtectiveActions is the moderation core's port onto the protective
// actions. The console calls it after the overturn's decision is
// recorded, and so after its audit record (ActionDecide) is.
type ProtectiveActions interface {
	// ReverseActions, in one transaction: every written action about
	// r.Key that is not reversed is marked reversed; each `on` one that
	// can be undone gets its reversal (retract_notice,
	// release_transaction or lift_restriction under
	// pipeline.ReversalActionKey, source moderator) with its outbox
	// message, and its own outbox message, when not sent yet, is
	// cancelled so that no stale action leaves after its reversal; and
	// each account and rule acted on is cleared until r.ClearedUntil. It
	// returns the reversals written (none when nothing was written about
	// the verdict, or everything is reversed already: a second call is a
	// no-op). Safe for concurrent use; an error means nothing was
	// written.
	ReverseActions(ctx context.Context, r Reversal) ([]pipeline.ProtectiveAction, error)
	// ReapplyActions undoes ReverseActions when the overturn r.DecisionID
	// is undone, in one transaction: every action about r.Key that this
	// overturn's reversal marked is written again (not one a moderator
	// reversed by its key, nor one a policy change retracted: those stay
	// reversed); each `on` one that was reversed
	// is re-applied under pipeline.ReapplyActionKey (reverses: the
	// original key; issued at r.At, with the original's time to live
	// and restriction length) with its outbox message, and the cleared
	// states the overturn recorded are deleted. It returns the
	// re-applications written; a second call is a no-op.
	ReapplyActions(ctx context.Context, r Reversal) ([]pipeline.ProtectiveAction, error)
}

// The states of a protective action's row.
const (
	// ActionWritten: taken (and, in mode on, sent or about to be).
	ActionWritten = "written"
	// ActionReversed: a reversal (an overturn's) undid it.
	ActionReversed = "reversed"
)

// RoomAction is one protective action of a room as its row keeps it, for
// the console's room page: no chat text, no model text, no moderator
// e-mail.
type RoomAction struct {
	Key    string
	Action pipeline.ActionKind
	Mode   pipeline.ActionMode
	Source pipeline.ActionSource
	// Rule is the policy rule that decided it; Account the account acted
	// on ("" for an escalation).
	Rule, Account string
	// Reverses is, on a reversal, the key it undoes.
	Reverses string
	// State is ActionWritten or ActionReversed.
	State string
	// Verdict is the key of the verdict that decided it and
	// VerdictRevision its revision.
	Verdict         pipeline.ReviewKey
	VerdictRevision int
	PolicyVersion   string
	PolicyHash      string
	CreatedAt       time.Time
	ExpiresAt       time.Time
	// ConfirmedBy is the moderator who confirmed the action ("" while
	// nobody has) and ConfirmedAt when (ActionControl.ConfirmAction).
	ConfirmedBy string
	ConfirmedAt time.Time
}

// Confirmable reports whether a moderator may confirm a: a forward
// action, not reversed, not confirmed yet.
func (a RoomAction) Confirmable() bool {
	return a.State == ActionWritten && a.Reverses == "" && a.ConfirmedBy == ""
}

// InForce reports whether a is a forward action that is not reversed and
// has an undo.
func (a RoomAction) InForce() bool {
	return a.State == ActionWritten && a.Reverses == "" && a.Action.ReversedBy() != ""
}

// ActionHistory lists a room's protective actions for the console. Safe
// for concurrent use; it returns an error wrapping ctx's when ctx ends
// first.
type ActionHistory interface {
	// RoomActions returns the room's actions (reversals included), newest
	// first, at most limit.
	RoomActions(ctx context.Context, roomID string, limit int) ([]RoomAction, error)
}

// KeyReversal asks for the reversal of one protective action by its
// idempotency key: a moderator's from the room page, or a policy's
// retraction of its rule.
type KeyReversal struct {
	// RoomID and Key name the action: an action of another room is not
	// found.
	RoomID, Key string
	// At is when the reversal was asked for (its issued_at); ExpiresAt
	// its expires_at.
	At, ExpiresAt time.Time
	// ClearedUntil, when set, clears the action's account for its rule
	// until then (as an overturn does); zero records no cleared state.
	ClearedUntil time.Time
	// Source is the reversal's source: pipeline.ActionSourceModerator, or
	// pipeline.ActionSourcePolicy for a retraction.
	Source pipeline.ActionSource
}

// KeyReversed is what ReverseAction did.
type KeyReversed struct {
	// Reversed is true when this call marked the action reversed; false
	// when it was reversed already (nothing is done twice).
	Reversed bool
	// Reversal is the reversing action written with its outbox message
	// (retract_notice, release_transaction or lift_restriction); nil for
	// an action in dry run or with no undo, which is only marked.
	Reversal *pipeline.ProtectiveAction
}

// ErrActionNotFound: no forward action of the room has the key.
var ErrActionNotFound = errors.New("no such protective action in the room")

// ActionControl is the moderation core's port onto one protective action
// by its key (the console's Reverse and Confirm, the policy's
// retraction). Safe for concurrent use; every method returns an error
// wrapping ctx's when ctx ends first, and an error means nothing was
// written.
type ActionControl interface {
	// ReverseAction, in one transaction, marks the forward action r.Key
	// of r.RoomID reversed and, when it is `on` and can be undone, writes
	// its reversal under pipeline.ReversalActionKey (source r.Source) with
	// its outbox message, cancels its own message if it has not left, and
	// records the cleared state r.ClearedUntil asks for. A reversed
	// action is left as it is (Reversed false). An unknown key, a key of
	// another room or a reversal's key is ErrActionNotFound.
	ReverseAction(ctx context.Context, r KeyReversal) (KeyReversed, error)
	// ConfirmAction records that moderator confirmed the forward action
	// key of roomID at at; confirmed is false when someone confirmed it
	// already (the first confirmation stays). ErrActionNotFound as for
	// ReverseAction.
	ConfirmAction(ctx context.Context, roomID, key, moderator string, at time.Time) (confirmed bool, err error)
}
