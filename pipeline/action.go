package pipeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Protective actions: what chatguard asks the chat and payment services to
// do about a verdict (show a notice, hold a transaction, restrict an
// account, put the room at the head of the queue) and the reversals of
// those. The worker writes them in the verdict's own transaction through
// the outbox (destination OutboxActions); the relay publishes them to the
// SQS queue "actions" at least once, every copy under the same
// IdempotencyKey, and the consumer applies each key once. docs/actions.md
// is the contract.
//
// The body's fields are named as Coop's action requests name them (item,
// creator, action, policies, rules, custom) inside chatguard's envelope,
// so that a platform serving Coop's action endpoints needs a thin relay
// only. A body carries ids and enumerations, never chat text, model
// text, a moderator's e-mail or a free-text note.

// ActionSchemaVersion is the action-body schema version this build
// writes; a breaking change bumps it.
const ActionSchemaVersion = 1

// MaxActionBytes bounds an action body: a few hundred bytes of ids and
// tokens, with room for fields a newer writer adds.
const MaxActionBytes = 16 << 10

// ActionKind names a protective action or a reversal of one (the body's
// action.id).
type ActionKind string

// The protective actions and their reversals.
const (
	// ActionWarnCounterpart shows a safety notice in the room to the
	// other party (the one the verdict is not about).
	ActionWarnCounterpart ActionKind = "warn_counterpart"
	// ActionWarnSender shows a notice to the offender.
	ActionWarnSender ActionKind = "warn_sender"
	// ActionHoldTransaction asks the payment service to hold settlement
	// of the room's safe-payment transaction.
	ActionHoldTransaction ActionKind = "hold_transaction"
	// ActionRestrictSender restricts the offender's messaging until
	// custom.until.
	ActionRestrictSender ActionKind = "restrict_sender"
	// ActionEscalate puts the room at the head of the moderators' queue.
	ActionEscalate ActionKind = "escalate"
	// ActionRetractNotice withdraws a notice (either warn action).
	ActionRetractNotice ActionKind = "retract_notice"
	// ActionReleaseTransaction releases a held transaction.
	ActionReleaseTransaction ActionKind = "release_transaction"
	// ActionLiftRestriction lifts a restriction before its expiry.
	ActionLiftRestriction ActionKind = "lift_restriction"
)

// ProtectiveActionKinds lists the forward actions, lightest first: the
// fixed label set of the action metrics and the policy's vocabulary.
var ProtectiveActionKinds = []ActionKind{
	ActionEscalate, ActionWarnCounterpart, ActionWarnSender, ActionHoldTransaction, ActionRestrictSender,
}

// ReversalActionKinds lists the reversals.
var ReversalActionKinds = []ActionKind{ActionRetractNotice, ActionReleaseTransaction, ActionLiftRestriction}

// Known reports whether k is a forward action or a reversal.
func (k ActionKind) Known() bool { return k.Protective() || k.Reversal() }

// Protective reports whether k is a forward action.
func (k ActionKind) Protective() bool {
	for _, p := range ProtectiveActionKinds {
		if k == p {
			return true
		}
	}
	return false
}

// Reversal reports whether k undoes another action.
func (k ActionKind) Reversal() bool {
	for _, r := range ReversalActionKinds {
		if k == r {
			return true
		}
	}
	return false
}

// Heavy reports whether k takes something from an account or a
// transaction (a restriction, a hold): such actions need stronger
// evidence by default and are rate-limited per account.
func (k ActionKind) Heavy() bool { return k == ActionHoldTransaction || k == ActionRestrictSender }

// Notice reports whether k shows a notice in the room.
func (k ActionKind) Notice() bool { return k == ActionWarnCounterpart || k == ActionWarnSender }

// ReversedBy names the action that undoes k; "" for an action with no
// undo (escalate: a moderator's queue entry is the moderators' own to
// close) and for a reversal.
func (k ActionKind) ReversedBy() ActionKind {
	switch k {
	case ActionWarnCounterpart, ActionWarnSender:
		return ActionRetractNotice
	case ActionHoldTransaction:
		return ActionReleaseTransaction
	case ActionRestrictSender:
		return ActionLiftRestriction
	}
	return ""
}

// ActionMode is how a policy rule's action runs: off (not evaluated),
// dry_run (decided and recorded, never sent to the chat service) or on.
type ActionMode string

// The action modes.
const (
	ModeOff    ActionMode = "off"
	ModeDryRun ActionMode = "dry_run"
	ModeOn     ActionMode = "on"
)

// Known reports whether m is one of the modes.
func (m ActionMode) Known() bool { return m == ModeOff || m == ModeDryRun || m == ModeOn }

// ActionSource is where the verdict behind an action came from: a review
// source, or on_demand for a verdict a moderator's on-demand review saved
// from the console.
type ActionSource string

// The action sources.
const (
	ActionSourceRealtime ActionSource = "realtime"
	ActionSourceBatch    ActionSource = "batch"
	ActionSourceSweep    ActionSource = "sweep"
	ActionSourceOnDemand ActionSource = "on_demand"
	// ActionSourceModerator marks a reversal a moderator's overturn
	// caused.
	ActionSourceModerator ActionSource = "moderator"
	// ActionSourceCampaign is a campaign re-review (SourceCampaign): the
	// policy lets it escalate and nothing else (policy.OutcomeOldChat).
	ActionSourceCampaign ActionSource = "campaign"
	// ActionSourcePolicy marks a reversal a policy change caused: the
	// new policy file removed the action's rule or took its action off
	// `on`.
	ActionSourcePolicy ActionSource = "policy"
)

// Known reports whether s is one of the sources.
func (s ActionSource) Known() bool {
	switch s {
	case ActionSourceRealtime, ActionSourceBatch, ActionSourceSweep, ActionSourceOnDemand, ActionSourceModerator, ActionSourceCampaign,
		ActionSourcePolicy:
		return true
	}
	return false
}

// ActionSourceOf maps a verdict's review source (and whether it was an
// on-demand, interactive review) to an action source. A campaign
// re-review is campaign even when it ran interactively (the console runs
// it on its on-demand path): its escalate-only rule wins. An event from a
// publisher that predates the source field counts as batch.
func ActionSourceOf(src ReviewSource, interactive bool) ActionSource {
	switch {
	case src == SourceCampaign:
		return ActionSourceCampaign
	case interactive:
		return ActionSourceOnDemand
	case src == SourceRealtime:
		return ActionSourceRealtime
	case src == SourceSweep:
		return ActionSourceSweep
	}
	return ActionSourceBatch
}

// The entity types of item and creator.
const (
	EntityRoom    = "room"
	EntityAccount = "account"
)

// ActionEntity is an item or a creator as Coop names them: an id and the
// id's type.
type ActionEntity struct {
	ID     string `json:"id"`
	TypeID string `json:"typeId"`
}

// ActionRef is the body's action: which one.
type ActionRef struct {
	ID ActionKind `json:"id"`
}

// Penalty is a Coop-style penalty level, derived from a verdict's
// severity.
type Penalty string

// The penalty levels.
const (
	PenaltyNone   Penalty = "NONE"
	PenaltyLow    Penalty = "LOW"
	PenaltyMedium Penalty = "MEDIUM"
	PenaltyHigh   Penalty = "HIGH"
	PenaltySevere Penalty = "SEVERE"
)

// PenaltyFromSeverity maps the judge's severity (1–5) to a penalty: 1–2
// low, 3 medium, 4 high, 5 severe; anything else none.
func PenaltyFromSeverity(severity int) Penalty {
	switch {
	case severity == 5:
		return PenaltySevere
	case severity == 4:
		return PenaltyHigh
	case severity == 3:
		return PenaltyMedium
	case severity == 1 || severity == 2:
		return PenaltyLow
	}
	return PenaltyNone
}

// ActionPolicy is one policy the action enforces: the verdict's category
// (id and name) and the penalty its severity gives.
type ActionPolicy struct {
	ID      Category `json:"id"`
	Name    string   `json:"name"`
	Penalty Penalty  `json:"penalty"`
}

// ActionRule is the policy rule that decided the action.
type ActionRule struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// ActionCustom carries what the consumer needs beyond Coop's fields.
type ActionCustom struct {
	// Template names the notice the chat service shows (a notice action
	// and retract_notice); the chat service holds its localized text.
	// Never model text.
	Template string `json:"template,omitempty"`
	// Locale is the notice's locale (ko, en).
	Locale string `json:"locale,omitempty"`
	// Counterpart is the role (buyer|seller) that warn_counterpart shows
	// its notice to: the side the verdict is not about.
	Counterpart SenderRole `json:"counterpart,omitempty"`
	// Transaction is the safe-payment transaction a hold or release is
	// about; empty means the room's current one, as the payment service
	// knows it (chatguard does not see transactions).
	Transaction string `json:"transaction,omitempty"`
	// Until is when a restriction ends by itself (restrict_sender).
	Until *time.Time `json:"until,omitempty"`
}

// ProtectiveAction is the body of one "actions" queue message.
type ProtectiveAction struct {
	SchemaVersion int `json:"schema_version"`
	// IdempotencyKey is the same on every copy of one action: the
	// consumer applies each key once. Deterministic (ActionKey) from the
	// verdict, its revision, the rule and the action, so a redelivered
	// review writes the same key.
	IdempotencyKey string `json:"idempotency_key"`
	// PolicyVersion is the policy's declared version and PolicyHash the
	// SHA-256 (hex) of the policy file that decided the action.
	PolicyVersion string `json:"policy_version"`
	PolicyHash    string `json:"policy_hash"`
	// VerdictRevision is the verdict's revision of its review key; a
	// consumer that has applied a reversal for a key ignores a late copy
	// of the key it reverses.
	VerdictRevision int          `json:"verdict_revision"`
	Source          ActionSource `json:"source"`
	Mode            ActionMode   `json:"mode"`
	// IssuedAt is when chatguard decided the action; MessageAt the
	// sent_at of the newest message of the reviewed window (zero when
	// unknown), what protection latency is measured from.
	IssuedAt  time.Time  `json:"issued_at"`
	MessageAt *time.Time `json:"message_at,omitempty"`
	// ExpiresAt is when the action is stale: a copy delivered after it
	// is not applied (a notice hours late protects nobody).
	ExpiresAt time.Time `json:"expires_at"`
	// Reverses is the key of the action a reversal undoes; empty on a
	// forward action.
	Reverses string         `json:"reverses,omitempty"`
	Item     ActionEntity   `json:"item"`
	Creator  ActionEntity   `json:"creator"`
	Action   ActionRef      `json:"action"`
	Policies []ActionPolicy `json:"policies"`
	Rules    []ActionRule   `json:"rules"`
	Custom   ActionCustom   `json:"custom"`
}

// ActionKey derives an idempotency key from the parts that identify one
// action (for a forward action: the verdict's review key, its revision,
// the rule, the action and the account). The same parts always give the
// same key; "a1-" and 40 hex digits.
func ActionKey(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "a1-" + hex.EncodeToString(h.Sum(nil))[:40]
}

// ForwardActionKey is the key of the forward action kind that rule takes
// on account for the verdict (key, revision).
func ForwardActionKey(key ReviewKey, revision int, rule string, kind ActionKind, account string) string {
	return ActionKey("fwd", key.RoomID, key.WindowStart.UTC().Format(time.RFC3339Nano),
		key.WindowEnd.UTC().Format(time.RFC3339Nano), key.PipelineVersion, fmt.Sprint(revision), rule, string(kind), account)
}

// ReversalActionKey is the key of a reversal of the action keyed
// reverses; generation is one more than the rows already naming that key
// in their reverses (its reversals and re-applications), so each is
// distinct: an overturn reverses with generation 1, an undone overturn
// re-applies, and a second overturn reverses with 3.
func ReversalActionKey(reverses string, generation int) string {
	return ActionKey("rev", reverses, fmt.Sprint(generation))
}

// ReapplyActionKey is the key under which the action keyed original is
// re-applied after its generation-th reversal was undone.
func ReapplyActionKey(original string, generation int) string {
	return ActionKey("reapply", original, fmt.Sprint(generation))
}

// InvalidActionError reports an action body that can never be applied;
// the consumer dead-letters it with Reason.
type InvalidActionError struct {
	Reason string
}

// Error implements error.
func (e *InvalidActionError) Error() string { return "invalid action: " + e.Reason }

// EncodeProtectiveAction is the strict writer: it refuses an action with
// any problem (naming every one) and otherwise returns its JSON body.
func EncodeProtectiveAction(a ProtectiveAction) ([]byte, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("action: encode: %w", err)
	}
	if len(b) > MaxActionBytes {
		return nil, &InvalidActionError{Reason: fmt.Sprintf("body of %d bytes is over the %d-byte bound", len(b), MaxActionBytes)}
	}
	return b, nil
}

// DecodeProtectiveAction is the tolerant reader: unknown fields are
// ignored, an unknown template or locale is kept for the consumer to fall
// back on its generic notice; what the consumer cannot apply safely (a
// newer schema, an unknown action or mode, a missing key or entity) is an
// *InvalidActionError naming every problem.
func DecodeProtectiveAction(body []byte) (ProtectiveAction, error) {
	if len(body) > MaxActionBytes {
		return ProtectiveAction{}, &InvalidActionError{Reason: fmt.Sprintf("body of %d bytes is over the %d-byte bound", len(body), MaxActionBytes)}
	}
	var a ProtectiveAction
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&a); err != nil {
		return ProtectiveAction{}, &InvalidActionError{Reason: "not a JSON action: " + trimErr(err)}
	}
	if dec.More() {
		return ProtectiveAction{}, &InvalidActionError{Reason: "trailing data after the JSON object"}
	}
	if probs := a.coreProblems(); len(probs) > 0 {
		return ProtectiveAction{}, &InvalidActionError{Reason: strings.Join(probs, "; ")}
	}
	a.IssuedAt = a.IssuedAt.UTC()
	a.ExpiresAt = a.ExpiresAt.UTC()
	return a, nil
}

// Validate reports every problem that makes a unwritable, joined into one
// *InvalidActionError: the reader's checks and the writer's stricter ones
// (known vocabulary, bounded ids, what each action needs).
func (a ProtectiveAction) Validate() error {
	probs := a.coreProblems()
	probs = append(probs, a.strictProblems()...)
	if len(probs) > 0 {
		return &InvalidActionError{Reason: strings.Join(probs, "; ")}
	}
	return nil
}

// coreProblems are what no consumer can apply past.
func (a ProtectiveAction) coreProblems() []string {
	var probs []string
	if a.SchemaVersion != ActionSchemaVersion {
		probs = append(probs, fmt.Sprintf("schema_version %d is not supported (want %d)", a.SchemaVersion, ActionSchemaVersion))
	}
	if p := idProblem("idempotency_key", a.IdempotencyKey, MaxOutboxEventID); p != "" {
		probs = append(probs, p)
	}
	if !a.Action.ID.Known() {
		probs = append(probs, fmt.Sprintf("action.id %q is not a known action", a.Action.ID))
	}
	if !a.Mode.Known() || a.Mode == ModeOff {
		probs = append(probs, fmt.Sprintf("mode %q is not dry_run or on", a.Mode))
	}
	if p := roomIDProblem(a.Item.ID); p != "" {
		probs = append(probs, "item: "+p)
	}
	if a.Action.ID != ActionEscalate {
		if p := idProblem("creator.id", a.Creator.ID, maxSenderIDLen); p != "" {
			probs = append(probs, p)
		}
	}
	if a.ExpiresAt.IsZero() {
		probs = append(probs, "expires_at is missing")
	}
	if a.Action.ID.Reversal() && a.Reverses == "" {
		probs = append(probs, "a reversal has no reverses key")
	}
	if a.Action.ID == ActionRestrictSender && (a.Custom.Until == nil || a.Custom.Until.IsZero()) {
		probs = append(probs, "restrict_sender has no custom.until")
	}
	return probs
}

// strictProblems are the writer's own checks on top of coreProblems.
func (a ProtectiveAction) strictProblems() []string {
	var probs []string
	if a.PolicyVersion == "" || len(a.PolicyVersion) > maxEnumLen*2 {
		probs = append(probs, "policy_version must be 1 to 64 bytes")
	}
	if len(a.PolicyHash) != 64 {
		probs = append(probs, "policy_hash must be 64 hex digits")
	}
	if a.VerdictRevision < 1 && a.Source != ActionSourceModerator && a.Source != ActionSourcePolicy {
		probs = append(probs, "verdict_revision must be 1 or more")
	}
	if !a.Source.Known() {
		probs = append(probs, fmt.Sprintf("source %q is not known", a.Source))
	}
	if a.IssuedAt.IsZero() {
		probs = append(probs, "issued_at is missing")
	} else if !a.ExpiresAt.After(a.IssuedAt) {
		probs = append(probs, "expires_at is not after issued_at")
	}
	if a.Item.TypeID != EntityRoom {
		probs = append(probs, "item.typeId must be "+EntityRoom)
	}
	if a.Creator.ID != "" && a.Creator.TypeID != EntityAccount {
		probs = append(probs, "creator.typeId must be "+EntityAccount)
	}
	if a.Reverses != "" && !a.Action.ID.Reversal() && a.Action.ID.ReversedBy() == "" {
		probs = append(probs, "reverses is set on an action that is neither a reversal nor re-applicable")
	}
	if len(a.Rules) == 0 {
		probs = append(probs, "rules is empty")
	}
	for _, r := range a.Rules {
		if p := tokenProblem("rules.id", r.ID); p != "" {
			probs = append(probs, p)
		}
		if len(r.Name) > 128 {
			probs = append(probs, "rules.name is longer than 128 bytes")
		}
	}
	for _, p := range a.Policies {
		if !p.ID.Valid() || p.ID == CategoryClean {
			probs = append(probs, fmt.Sprintf("policies.id %q is not an abuse category", p.ID))
		}
	}
	return append(probs, a.customProblems()...)
}

func (a ProtectiveAction) customProblems() []string {
	var probs []string
	c := a.Custom
	switch {
	case a.Action.ID.Notice():
		if !KnownNoticeTemplate(c.Template) {
			probs = append(probs, fmt.Sprintf("custom.template %q is not a known notice template", c.Template))
		}
		if !KnownNoticeLocale(c.Locale) {
			probs = append(probs, fmt.Sprintf("custom.locale %q is not a known locale", c.Locale))
		}
	case a.Action.ID == ActionRetractNotice:
		// A retraction names its notice by reverses; a template, when
		// given, must still be one.
		if c.Template != "" && !KnownNoticeTemplate(c.Template) {
			probs = append(probs, fmt.Sprintf("custom.template %q is not a known notice template", c.Template))
		}
	case c.Template != "" || c.Locale != "":
		probs = append(probs, "custom.template and custom.locale are for notices only")
	}
	if a.Action.ID == ActionWarnCounterpart && c.Counterpart != RoleBuyer && c.Counterpart != RoleSeller {
		probs = append(probs, "warn_counterpart needs custom.counterpart buyer or seller")
	}
	if c.Transaction != "" {
		if p := idProblem("custom.transaction", c.Transaction, maxMessageIDLen); p != "" {
			probs = append(probs, p)
		}
	}
	return probs
}

// NoticeLocales are the locales the notice templates exist in.
var NoticeLocales = []string{"ko", "en"}

// KnownNoticeLocale reports whether l is one of NoticeLocales.
func KnownNoticeLocale(l string) bool {
	for _, k := range NoticeLocales {
		if l == k {
			return true
		}
	}
	return false
}

// NoticeTemplate names the notice a warn action shows: the audience
// (counterpart or sender) and the category, e.g.
// "counterpart_external_payment"; "<audience>_generic" for a category
// with no notice of its own.
func NoticeTemplate(kind ActionKind, c Category) string {
	audience := "sender"
	if kind == ActionWarnCounterpart {
		audience = "counterpart"
	}
	if !c.Valid() || c == CategoryClean {
		return audience + "_generic"
	}
	return audience + "_" + string(c)
}

// KnownNoticeTemplate reports whether t is a template NoticeTemplate
// gives.
func KnownNoticeTemplate(t string) bool {
	audience, rest, ok := strings.Cut(t, "_")
	if !ok || (audience != "counterpart" && audience != "sender") {
		return false
	}
	return rest == "generic" || (Category(rest).Valid() && Category(rest) != CategoryClean)
}

// ActionOutboxMessage encodes a (strictly validated) action as the outbox
// message that sends it to the actions queue, under its idempotency key.
func ActionOutboxMessage(a ProtectiveAction) (OutboxMessage, error) {
	b, err := EncodeProtectiveAction(a)
	if err != nil {
		return OutboxMessage{}, fmt.Errorf("outbox: %w", err)
	}
	return OutboxMessage{Destination: OutboxActions, EventID: a.IdempotencyKey, Body: b}, nil
}
