package moderation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// ActionKind names a console action in the audit record.
type ActionKind string

// The console's actions. Each is recorded before it acts.
const (
	// ActionTake: a moderator takes one item.
	ActionTake ActionKind = "take"
	// ActionRelease: a moderator ends their take of one item.
	ActionRelease ActionKind = "release"
	// ActionOverrideTake: a moderator takes an item another moderator
	// holds (Holder), by an explicit override.
	ActionOverrideTake ActionKind = "override_take"
	// ActionOverrideDecided: a moderator decides an item another
	// moderator (Holder) decided after the deciding moderator's page was
	// drawn (DecisionID), by an explicit override.
	ActionOverrideDecided ActionKind = "override_decided"
	// ActionDecide: one decision on one item (a single item's, or one
	// room of a bulk decision).
	ActionDecide ActionKind = "decide"
	// ActionBulkDecide: a decision over a campaign page's open rooms
	// (Rooms of them); each room's decision is an ActionDecide of its own.
	ActionBulkDecide ActionKind = "bulk_decide"
	// ActionTakeCampaign: a moderator takes every open room of a campaign
	// (Rooms) that nobody else holds live.
	ActionTakeCampaign ActionKind = "take_campaign"
	// ActionReleaseCampaign: a moderator ends their takes of a campaign's
	// rooms.
	ActionReleaseCampaign ActionKind = "release_campaign"
	// ActionStop: a moderator stops a room's reviews through the operator
	// API (whose own record, stop_signals, names the moderator too).
	ActionStop ActionKind = "stop"
	// ActionReveal: a moderator reveals one masked contact value of a
	// room's chat; Detail names the message, the value's index and the
	// reason chosen (RevealReasons), never the value.
	ActionReveal ActionKind = "reveal"
	// ActionReverseAction: one protective action reversed by its key
	// (Detail names the key): a moderator's, or the policy's own when a
	// new policy file retracts the action's rule (Moderator is then
	// PolicyActor's).
	ActionReverseAction ActionKind = "reverse_action"
	// ActionConfirmAction: a moderator confirms one protective action
	// (Detail names the key).
	ActionConfirmAction ActionKind = "confirm_action"
)

// PolicyActor is the audit record's actor of what a policy file does by
// itself (the retraction of a removed rule's actions): "policy:" and the
// file's version, never a moderator's id.
func PolicyActor(version string) string { return "policy:" + version }

// RevealReasons are the reasons a moderator may give for revealing a
// masked contact value: a fixed list, so the audit record's detail holds
// no free text.
var RevealReasons = []string{
	"compare with a user report",
	"match an account or phone across rooms",
	"legal or law-enforcement request",
	"check the masked text is a contact value",
}

// IsRevealReason reports whether reason is one of RevealReasons.
func IsRevealReason(reason string) bool {
	for _, r := range RevealReasons {
		if r == reason {
			return true
		}
	}
	return false
}

// ActionKinds lists every ActionKind, in the order above.
var ActionKinds = []ActionKind{ActionTake, ActionRelease, ActionOverrideTake, ActionOverrideDecided, ActionDecide,
	ActionBulkDecide, ActionTakeCampaign, ActionReleaseCampaign, ActionStop, ActionReveal, ActionReverseAction, ActionConfirmAction}

// AuditRecord is one console action as the audit record keeps it: who
// asked for what, on which item or campaign, at what time. It carries
// pseudonymous moderator ids and verdict fields only, never chat text or
// an e-mail.
type AuditRecord struct {
	// At is when the action was asked for (UTC, microseconds).
	At time.Time
	// Moderator is the acting moderator's pseudonymous id.
	Moderator string
	Action    ActionKind
	// VerdictID and RoomID name the item (zero and "" for a campaign-wide
	// action).
	VerdictID uint64
	RoomID    string
	// Mark names the campaign of a campaign action ("" otherwise).
	Mark string
	// Decision, Label and Category are what a decide or bulk_decide asks
	// for ("" otherwise).
	Decision string
	Label    pipeline.Label
	Category pipeline.Category
	// Override is true when the moderator asked to act over someone
	// else's take or decision.
	Override bool
	// Holder is the other moderator an override acts over: the holder of
	// the take (override_take) or the decider (override_decided).
	Holder string
	// DecisionID is the decision an override_decided acts over.
	DecisionID uint64
	// Rooms is the number of rooms a campaign action concerns.
	Rooms int
	// Detail is a short, fixed-vocabulary note (a stop's TTL, a bulk
	// decision's skipped rooms); never chat text. Kept to
	// MaxAuditDetailRunes.
	Detail string
}

// MaxAuditDetailRunes bounds AuditRecord.Detail; a longer one is stored
// cut.
const MaxAuditDetailRunes = 500

// Validate reports every problem that makes r unrecordable: no time, a
// moderator of 0 or over 128 bytes, an unknown action, a room id or mark
// over their column sizes.
func (r AuditRecord) Validate() error {
	var errs []error
	if r.At.IsZero() {
		errs = append(errs, errors.New("a time is required"))
	}
	if r.Moderator == "" || len(r.Moderator) > 128 {
		errs = append(errs, errors.New("moderator must be 1..128 bytes"))
	}
	known := false
	for _, k := range ActionKinds {
		known = known || k == r.Action
	}
	if !known {
		errs = append(errs, fmt.Errorf("unknown action %q", r.Action))
	}
	if len(r.RoomID) > 128 || len(r.Mark) > 40 || len(r.Holder) > 128 {
		errs = append(errs, errors.New("room id over 128, mark over 40 or holder over 128 bytes"))
	}
	if r.Rooms < 0 {
		errs = append(errs, errors.New("rooms must not be negative"))
	}
	return errors.Join(errs...)
}

// ActionLog is the moderation side's audit record: append-only, one
// entry per console action, written before the action acts. The console
// refuses an action whose entry could not be recorded, so every effect
// on the queue has its entry; an entry whose action then failed or was
// refused (a take someone else holds) stays, with the effect tables
// saying what happened.
type ActionLog interface {
	// RecordAction appends r and returns its id, greater than every id
	// before it. An invalid r (AuditRecord.Validate) is a
	// *pipeline.PermanentError. Any error means nothing was recorded and
	// the caller must not act. Safe for concurrent use; it returns an
	// error wrapping ctx's when ctx ends first.
	RecordAction(ctx context.Context, r AuditRecord) (uint64, error)
}
