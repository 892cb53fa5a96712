package chatapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// ActionSchemaVersion is the action contract version the stand-in reads.
const ActionSchemaVersion = 1

// The action ids the chat service acts on. Escalations are chatguard's own
// (the moderators' queue): the stand-in ignores them if one reaches it.
const (
	ActWarnCounterpart    = "warn_counterpart"
	ActWarnSender         = "warn_sender"
	ActHoldTransaction    = "hold_transaction"
	ActRestrictSender     = "restrict_sender"
	ActEscalate           = "escalate"
	ActRetractNotice      = "retract_notice"
	ActReleaseTransaction = "release_transaction"
	ActLiftRestriction    = "lift_restriction"
)

// NoticeSender is the sender id of every notice the stand-in shows.
const NoticeSender = "chatguard"

// Action is one protective action as the chat service reads it: the
// envelope of the contract (docs/actions.md) around the fields named as
// Coop's action requests name them. Unknown fields are ignored.
type Action struct {
	SchemaVersion   int       `json:"schema_version"`
	IdempotencyKey  string    `json:"idempotency_key"`
	PolicyVersion   string    `json:"policy_version"`
	VerdictRevision int       `json:"verdict_revision"`
	Source          string    `json:"source"`
	Mode            string    `json:"mode"`
	ExpiresAt       time.Time `json:"expires_at"`
	Reverses        string    `json:"reverses,omitempty"`
	Item            ItemRef   `json:"item"`
	Creator         ItemRef   `json:"creator"`
	Action          struct {
		ID string `json:"id"`
	} `json:"action"`
	Custom ActionCustom `json:"custom"`
}

// ItemRef is Coop's {id, typeId} reference to a room or an account.
type ItemRef struct {
	ID     string `json:"id"`
	TypeID string `json:"typeId"`
}

// ActionCustom holds what the chat service needs beyond Coop's fields.
type ActionCustom struct {
	Template    string    `json:"template,omitempty"`
	Locale      string    `json:"locale,omitempty"`
	Counterpart string    `json:"counterpart,omitempty"`
	Transaction string    `json:"transaction,omitempty"`
	Until       time.Time `json:"until,omitzero"`
}

// maxActionBytes bounds an action body; a real one is well under 2 KiB.
const maxActionBytes = 64 << 10

// DecodeAction parses and checks one action body. Every failure names
// every problem at once; it is a *RejectError.
func DecodeAction(body []byte) (Action, error) {
	var a Action
	if len(body) > maxActionBytes {
		return a, reject("body of %d bytes is over %d", len(body), maxActionBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&a); err != nil {
		return a, reject("not an action: %v", err)
	}
	var p []string
	if a.SchemaVersion != ActionSchemaVersion {
		p = append(p, fmt.Sprintf("schema_version %d is not %d", a.SchemaVersion, ActionSchemaVersion))
	}
	if a.IdempotencyKey == "" || len(a.IdempotencyKey) > 128 {
		p = append(p, "idempotency_key must be 1 to 128 bytes")
	}
	if a.Action.ID == "" {
		p = append(p, "action.id is missing")
	}
	if a.Item.ID == "" {
		p = append(p, "item.id (the room) is missing")
	}
	if a.ExpiresAt.IsZero() {
		p = append(p, "expires_at is missing")
	}
	if reversal(a.Action.ID) != (a.Reverses != "") {
		p = append(p, fmt.Sprintf("reverses must be set on a reversal and only on one (action %q)", a.Action.ID))
	}
	if len(p) > 0 {
		return a, reject("%s", strings.Join(p, "; "))
	}
	return a, nil
}

func reversal(id string) bool {
	return slices.Contains([]string{ActRetractNotice, ActReleaseTransaction, ActLiftRestriction}, id)
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
	// OutcomeRejected: refused with a reason; dead-lettered.
	OutcomeRejected Outcome = "rejected"
)

// Outcomes lists every outcome, for counters.
var Outcomes = []Outcome{OutcomeApplied, OutcomeDuplicate, OutcomeSuperseded, OutcomeIgnored, OutcomeRejected}

// Restriction is a sender's messaging restriction.
type Restriction struct {
	Until time.Time `json:"until"`
	Key   string    `json:"key"`
}

// Transaction is a fake safe-payment transaction's settlement state.
type Transaction struct {
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
	Applied map[string]int64 `json:"applied"`
	// Refused counts messages refused at intake from restricted senders.
	Refused int64 `json:"refused"`
}

// errJournal marks a failure to record an applied key: the delivery is
// left for the queue to redeliver, never acknowledged unrecorded.
var errJournal = errors.New("chatapi: journal")
