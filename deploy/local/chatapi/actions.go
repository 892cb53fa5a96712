package chatapi

import (
	"errors"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// The chat service's side of protective actions. chatguard publishes each
// action to the SQS queue "actions" at least once; every copy carries the
// same idempotency key, and the chat service applies each key once. The
// stand-in keeps the keys it applied (and, with Config.ActionsJournal, a
// journal of them that a restart reads back), shows notices as system
// messages under pipeline.ActionNoticeID, holds and releases fake
// transactions and refuses the messages of a restricted sender until the
// restriction expires. An action it cannot apply is rejected with a reason:
// the consumer dead-letters it and counts it.

// NoticeSender is the sender id of every notice the stand-in shows.
const NoticeSender = "chatguard"

// DecodeAction reads one action body with chatguard's tolerant reader
// (pipeline.DecodeProtectiveAction); a body it cannot apply is a
// *RejectError with the reader's reason.
func DecodeAction(body []byte) (pipeline.ProtectiveAction, error) {
	a, err := pipeline.DecodeProtectiveAction(body)
	var inv *pipeline.InvalidActionError
	if errors.As(err, &inv) {
		return a, reject("%s", inv.Reason)
	}
	if err != nil {
		return a, reject("%v", err)
	}
	return a, nil
}

// RejectError is an action the chat service refuses: it is dead-lettered
// with Reason, never retried.
type RejectError struct{ Reason string }

// Error implements error.
func (e *RejectError) Error() string { return "action rejected: " + e.Reason }

func reject(format string, args ...any) error {
	return &RejectError{Reason: pipeline.ClipRunes(fmt.Sprintf(format, args...), 512)}
}

// Outcome is what applying one delivery of an action did.
type Outcome string

// The outcomes of Apply.
const (
	// OutcomeApplied: the action took effect now.
	OutcomeApplied Outcome = "applied"
	// OutcomeDuplicate: its key was applied before; nothing changed.
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeSuperseded: its reversal came first; it never takes effect.
	OutcomeSuperseded Outcome = "superseded"
	// OutcomeIgnored: not the chat service's to act on (an escalation).
	OutcomeIgnored Outcome = "ignored"
	// OutcomeDropped: not in mode on, or delivered past its expiry; it
	// is acknowledged and never applied, as the contract says.
	OutcomeDropped Outcome = "dropped"
	// OutcomeRejected: refused with a reason; dead-lettered.
	OutcomeRejected Outcome = "rejected"
)

// Outcomes lists every outcome, for counters.
var Outcomes = []Outcome{OutcomeApplied, OutcomeDuplicate, OutcomeSuperseded, OutcomeIgnored, OutcomeDropped, OutcomeRejected}

// Restriction is a sender's messaging restriction.
type Restriction struct {
	Until time.Time `json:"until"`
	Key   string    `json:"key"`
}

// Transaction is a fake safe-payment transaction's settlement state.
type Transaction struct {
	ID    string `json:"id"`
	State string `json:"state"` // held | released
	Key   string `json:"key"`   // the key of the hold
}

// Transaction states.
const (
	TxHeld     = "held"
	TxReleased = "released"
)

// ActionStats counts what the stand-in did with actions.
type ActionStats struct {
	// Outcomes counts deliveries by outcome.
	Outcomes map[Outcome]int64 `json:"outcomes"`
	// Applied counts applied actions by action id.
	Applied map[pipeline.ActionKind]int64 `json:"applied"`
	// Refused counts messages refused at intake from restricted senders.
	Refused int64 `json:"refused"`
}

// errJournal marks a failure to record an applied key: the delivery is
// left for the queue to redeliver, never acknowledged unrecorded.
var errJournal = errors.New("chatapi: journal")
