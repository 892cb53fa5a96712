package pipeline

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
)

// The protective actions' lake events (table protective_action). Each
// action has two: "written", which the store writes through the outbox in
// the transaction that writes the action's row (a dry-run action and a
// reversal included; a notice the store found suppressed has neither row
// nor event), and, for an `on` action, "published", which the outbox's
// relay writes when the actions queue has accepted it. Analysts count
// actions per rule from the first and measure protection latency
// (message_at to published_at) from the second. Neither carries a raw
// account id, chat text or model text: the offender is a keyed pseudonym,
// and only on the written event of a forward action.

// The phases of an action event.
const (
	ActionPhaseWritten   = "written"
	ActionPhasePublished = "published"
)

// ActionEvent is the payload of a protective_action event.
type ActionEvent struct {
	IdempotencyKey string `json:"idempotency_key"`
	Phase          string `json:"phase"`
	// RoomID and the window name the verdict the action is about, as in
	// the other tables; the window and pipeline version are absent on a
	// published event (join its written one on the key).
	RoomID          string       `json:"room_id"`
	WindowStart     *time.Time   `json:"window_start,omitempty"`
	WindowEnd       *time.Time   `json:"window_end,omitempty"`
	PipelineVersion string       `json:"pipeline_version,omitempty"`
	VerdictRevision int          `json:"verdict_revision"`
	Action          ActionKind   `json:"action"`
	Mode            ActionMode   `json:"mode"`
	Source          ActionSource `json:"source"`
	RuleID          string       `json:"rule_id"`
	Category        Category     `json:"category,omitempty"`
	Penalty         Penalty      `json:"penalty,omitempty"`
	PolicyVersion   string       `json:"policy_version"`
	PolicyHash      string       `json:"policy_hash"`
	// Reverses is the key a reversal or a re-application undoes.
	Reverses string `json:"reverses,omitempty"`
	// Offender is the account acted on as a keyed pseudonym (as a
	// verdict event's subjects), never the raw id; empty when the
	// producer has no key, on escalate, and on reversals and published
	// events (join the forward action's written event).
	Offender  string     `json:"offender,omitempty"`
	MessageAt *time.Time `json:"message_at,omitempty"`
	IssuedAt  time.Time  `json:"issued_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	// PublishedAt is when the actions queue accepted the action, and
	// Sends how many sends that took; published events only.
	PublishedAt *time.Time `json:"published_at,omitempty"`
	Sends       int        `json:"sends,omitempty"`
}

// ActionEventID is the event id of an action's event of phase: one per
// key and phase, so that copies collapse in protective_action_dedup.
func ActionEventID(key, phase string) string {
	b, err := json.Marshal([]string{string(EventProtectiveAction), key, phase})
	if err != nil { // a []string always encodes
		panic(err)
	}
	return uuid.NewSHA1(lakeEventNamespace, b).String()
}

// actionEventOf is the payload fields an action body gives.
func actionEventOf(a ProtectiveAction, phase string) ActionEvent {
	p := ActionEvent{
		IdempotencyKey: a.IdempotencyKey, Phase: phase, RoomID: a.Item.ID, VerdictRevision: a.VerdictRevision,
		Action: a.Action.ID, Mode: a.Mode, Source: a.Source, PolicyVersion: a.PolicyVersion, PolicyHash: a.PolicyHash,
		Reverses: a.Reverses, IssuedAt: a.IssuedAt.UTC().Truncate(time.Microsecond), ExpiresAt: a.ExpiresAt.UTC().Truncate(time.Microsecond),
	}
	if len(a.Rules) > 0 {
		p.RuleID = a.Rules[0].ID
	}
	if len(a.Policies) > 0 {
		p.Category, p.Penalty = a.Policies[0].ID, a.Policies[0].Penalty
	}
	if a.MessageAt != nil && !a.MessageAt.IsZero() {
		m := a.MessageAt.UTC().Truncate(time.Microsecond)
		p.MessageAt = &m
	}
	return p
}

// ActionWrittenEvent is the written event of r, an action a store is
// writing: dated by its issue.
func ActionWrittenEvent(r ActionRecord) LakeEvent {
	p := actionEventOf(r.ProtectiveAction, ActionPhaseWritten)
	if !r.Key.WindowStart.IsZero() && !r.Key.WindowEnd.IsZero() {
		ws, we := r.Key.WindowStart.UTC(), r.Key.WindowEnd.UTC()
		p.WindowStart, p.WindowEnd = &ws, &we
	}
	p.PipelineVersion = r.Key.PipelineVersion
	if r.Reverses == "" && r.Action.ID != ActionEscalate {
		p.Offender = r.Offender
	}
	return LakeEvent{EventID: ActionEventID(p.IdempotencyKey, p.Phase), EventType: EventProtectiveAction,
		OccurredAt: p.IssuedAt, SchemaVersion: LakeEventSchemaVersion, Payload: p}
}

// ActionPublishedEvent is the published event of the action whose queue
// body is body, accepted at publishedAt after sends sends; dated by the
// publish. A body the reader refuses is an error (nothing was applied).
func ActionPublishedEvent(body []byte, publishedAt time.Time, sends int) (LakeEvent, error) {
	a, err := DecodeProtectiveAction(body)
	if err != nil {
		return LakeEvent{}, fmt.Errorf("action event: %w", err)
	}
	p := actionEventOf(a, ActionPhasePublished)
	at := publishedAt.UTC().Truncate(time.Microsecond)
	p.PublishedAt, p.Sends = &at, max(sends, 1)
	return LakeEvent{EventID: ActionEventID(p.IdempotencyKey, p.Phase), EventType: EventProtectiveAction,
		OccurredAt: at, SchemaVersion: LakeEventSchemaVersion, Payload: p}, nil
}

// decodeActionEvent decodes a protective_action payload and lists its
// problems; err is set when it does not decode at all.
func decodeActionEvent(raw json.RawMessage) (ActionEvent, []string, error) {
	var p ActionEvent
	if err := strictUnmarshal(raw, &p); err != nil {
		return p, nil, fmt.Errorf("payload is not a protective_action: %s", err)
	}
	probs := actionEventIDProblems(p)
	probs = append(probs, actionEventVocabulary(p)...)
	probs = append(probs, actionEventTimes(&p)...)
	if p.Offender != "" && !IsSubjectPseudonym(p.Offender) {
		probs = append(probs, "payload.offender is not a keyed pseudonym")
	}
	return p, probs, nil
}

// actionEventIDProblems checks the ids and tokens an action event
// carries.
func actionEventIDProblems(p ActionEvent) []string {
	var probs []string
	for _, c := range []struct{ field, v string }{{"payload.idempotency_key", p.IdempotencyKey}, {"payload.room_id", p.RoomID}} {
		if prob := idProblem(c.field, c.v, MaxOutboxEventID); prob != "" {
			probs = append(probs, prob)
		}
	}
	if p.Reverses != "" {
		if prob := idProblem("payload.reverses", p.Reverses, MaxOutboxEventID); prob != "" {
			probs = append(probs, prob)
		}
	}
	if prob := tokenProblem("payload.rule_id", p.RuleID); prob != "" {
		probs = append(probs, prob)
	}
	probs = append(probs, checkName("payload.policy_version", p.PolicyVersion, 2*maxEnumLen, true)...)
	probs = append(probs, checkName("payload.policy_hash", p.PolicyHash, 64, true)...)
	return append(probs, checkName("payload.pipeline_version", p.PipelineVersion, maxShadowName, false)...)
}

// actionEventVocabulary checks the enumerations of an action event.
func actionEventVocabulary(p ActionEvent) []string {
	var probs []string
	if p.Phase != ActionPhaseWritten && p.Phase != ActionPhasePublished {
		probs = append(probs, fmt.Sprintf("payload.phase %q is unknown", clip(p.Phase)))
	}
	if !p.Action.Known() {
		probs = append(probs, fmt.Sprintf("payload.action %q is unknown", clip(string(p.Action))))
	}
	if p.Mode != ModeDryRun && p.Mode != ModeOn {
		probs = append(probs, fmt.Sprintf("payload.mode %q is not dry_run or on", clip(string(p.Mode))))
	}
	if !p.Source.Known() {
		probs = append(probs, fmt.Sprintf("payload.source %q is unknown", clip(string(p.Source))))
	}
	probs = append(probs, checkCategory("payload.category", p.Category)...)
	penalties := []Penalty{"", PenaltyNone, PenaltyLow, PenaltyMedium, PenaltyHigh, PenaltySevere}
	if !slices.Contains(penalties, p.Penalty) {
		probs = append(probs, fmt.Sprintf("payload.penalty %q is unknown", clip(string(p.Penalty))))
	}
	if p.VerdictRevision < 0 || p.Sends < 0 {
		probs = append(probs, "payload has a negative revision or send count")
	}
	return probs
}

// actionEventTimes checks an action event's times and puts them in UTC.
func actionEventTimes(p *ActionEvent) []string {
	var probs []string
	if p.IssuedAt.IsZero() || p.ExpiresAt.IsZero() {
		probs = append(probs, "payload.issued_at or expires_at is missing")
	}
	if (p.WindowStart == nil) != (p.WindowEnd == nil) {
		probs = append(probs, "payload.window_start and window_end come together")
	} else if p.WindowStart != nil && !p.WindowEnd.After(*p.WindowStart) {
		probs = append(probs, "payload.window_end is not after window_start")
	}
	if (p.Phase == ActionPhasePublished) != (p.PublishedAt != nil) {
		probs = append(probs, "payload.published_at is set on a published event, and only there")
	}
	if p.Phase == ActionPhasePublished && p.Offender != "" {
		probs = append(probs, "payload.offender is for written events only")
	}
	p.IssuedAt, p.ExpiresAt = p.IssuedAt.UTC(), p.ExpiresAt.UTC()
	for _, t := range []**time.Time{&p.WindowStart, &p.WindowEnd, &p.MessageAt, &p.PublishedAt} {
		if *t != nil {
			u := (*t).UTC()
			*t = &u
		}
	}
	return probs
}

// ActionLakeMessages are the outbox messages of the written events of
// recs, for a store to write beside their rows.
func ActionLakeMessages(recs ...ActionRecord) ([]OutboxMessage, error) {
	out := make([]OutboxMessage, 0, len(recs))
	for _, r := range recs {
		m, err := LakeOutboxMessage(ActionWrittenEvent(r))
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}
