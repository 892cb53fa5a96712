package pipeline

import (
	"context"
	"time"
)

// ActionRecord is a protective action as a verdict's save writes it: the
// body, and for a notice the end of the suppression period it claims.
type ActionRecord struct {
	ProtectiveAction
	// Key is the verdict the action is about (kept with its row for the
	// console and the report; the body carries it only inside its key).
	Key ReviewKey
	// SuppressUntil, on a notice, is the end of the period in which no
	// other notice of its rule about its account in its room is written:
	// a store that finds the period held by another notice writes neither
	// this action nor its queue message. Zero on other actions.
	SuppressUntil time.Time
	// Offender is the acted-on account's keyed pseudonym
	// (SubjectPseudonymizer) for the action's lake event; empty when the
	// producer has no key. Never a raw id.
	Offender string
}

// ActionStateQuery asks what limits the actions about one verdict.
type ActionStateQuery struct {
	RoomID string
	// Accounts are the offenders; Rules the policy's rule ids.
	Accounts []string
	Rules    []string
	// Now is the evaluation's time: rule counts start at its UTC day,
	// heavy counts 24 hours before it, and clearances must end after it.
	Now time.Time
}

// ActionState is what the store knows that limits a decision: counts and
// marks the policy's evaluation reads and never writes.
type ActionState struct {
	// RuleToday counts each rule's actions (dry run included) this UTC
	// day.
	RuleToday map[string]int
	// HeavyToday counts heavy actions per account in the last 24 hours.
	HeavyToday map[string]int
	// Suppressed holds ActionSuppressKey(room, account, rule) of the
	// notices whose suppression period has not ended.
	Suppressed map[string]bool
	// Cleared holds ActionClearedKey(account, rule) of the accounts an
	// overturn cleared for a rule, until their expiry.
	Cleared map[string]bool
}

// ActionSuppressKey names a notice's suppression slot in ActionState.
func ActionSuppressKey(room, account, rule string) string {
	return room + "\x00" + account + "\x00" + rule
}

// ActionClearedKey names a cleared state in ActionState.
func ActionClearedKey(account, rule string) string { return account + "\x00" + rule }

// ActionClearance is a cleared state: account is not acted on under rule
// until Until.
type ActionClearance struct {
	Account, Rule string
	Until         time.Time
}

// ActionLedger is the store's record of protective actions, as the
// worker's planner reads it. A verdict's save writes the actions
// themselves (Verdict.Actions). Methods honour ctx and wrap their errors
// with the adapter's prefix.
type ActionLedger interface {
	// ActionState reads what limits the actions of one verdict.
	ActionState(ctx context.Context, q ActionStateQuery) (ActionState, error)
}

// ActionPlanner decides a done verdict's protective actions
// (pipeline/protect's Planner): the worker's review handler and the
// console's on-demand reviews call the one implementation. Plan returns v
// with them attached (replacing any an earlier attempt attached); an
// error means the verdict must not be saved without the actions it owes.
// Committed is told of each verdict the store committed.
type ActionPlanner interface {
	Plan(ctx context.Context, v Verdict, src ActionSource) (Verdict, error)
	Committed(v Verdict)
}

// AtRevision returns r as the same rule's same action about the same
// account for revision rev of its verdict: its verdict_revision and its
// key (ForwardActionKey) derived again. A store that numbers a revision
// only inside the save's transaction (a re-review's, Revise) rebinds the
// planned actions with it, so that two revisions never share a key. A
// reversal, or a record already at rev, is returned unchanged.
func (r ActionRecord) AtRevision(rev int) ActionRecord {
	if r.Reverses != "" || r.Action.ID.Reversal() || r.VerdictRevision == rev {
		return r
	}
	rule := ""
	if len(r.Rules) > 0 {
		rule = r.Rules[0].ID
	}
	r.VerdictRevision = rev
	r.IdempotencyKey = ForwardActionKey(r.Key, rev, rule, r.Action.ID, r.Creator.ID)
	return r
}

// ActionStore is a verdict store that keeps the record of protective
// actions: Save writes a committed verdict's actions (Verdict.Actions) in
// its transaction, each notice only when it wins its suppression slot
// (ActionRecord.SuppressUntil), each action once per IdempotencyKey, with
// its lake event (ActionWrittenEvent) and, when `on`, its queue message
// in the store's outbox; ActionState reads them back as the planner
// needs them; RecordClearances writes an overturn's (or a retracted
// rule's) cleared states. storetest.RunActionStoreConformance holds an
// implementation to this contract.
type ActionStore interface {
	VerdictStore
	ActionLedger
	// RecordClearances writes cs at now, each replacing an earlier
	// cleared state of its account and rule; decisionID (0: none) is the
	// moderator's decision that cleared them.
	RecordClearances(ctx context.Context, now time.Time, decisionID int64, cs []ActionClearance) error
}
