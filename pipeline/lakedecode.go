package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/chatguard/chatguard/pipeline/pseudonym"
)

// LakeSchemaVersions lists, per event type, the payload schema versions
// this build can decode. A new version means a new decoder here, never a
// silent reinterpretation of an old one.
var LakeSchemaVersions = map[EventType][]int{
	EventInferenceLog:      {1},
	EventModeratorFeedback: {1},
	EventVerdict:           {1},
	EventShadowVerdict:     {1},
	EventProtectiveAction:  {1},
}

// LakeEventTypes lists the lake event types in a fixed order (tables, metrics).
var LakeEventTypes = []EventType{EventInferenceLog, EventModeratorFeedback, EventVerdict, EventShadowVerdict, EventProtectiveAction}

// maxFutureSkew bounds how far occurred_at may lie after the receive time:
// a producer clock that far ahead would scatter events into partitions that
// no analyst query looks at.
const maxFutureSkew = 24 * time.Hour

// InvalidLakeEventError reports a "feedback" message body that can never be
// written to the lake. Reason is stored next to the body under errors/.
type InvalidLakeEventError struct {
	Reason string
	// EventID and EventType are set when the envelope got that far, to help
	// whoever reads errors/.
	EventID   string
	EventType EventType
}

// Error implements error.
func (e *InvalidLakeEventError) Error() string { return "invalid lake event: " + e.Reason }

// LakeRecord is one decoded, validated lake event: the envelope with a
// typed payload (InferenceLog, ModeratorFeedback, VerdictEvent,
// ShadowVerdict or ActionEvent, by value)
// and the time the consumer received it. It is what the consumer buffers
// and a LakeWriter encodes as one row.
type LakeRecord struct {
	LakeEvent
	ReceivedAt time.Time
}

type lakeEnvelope struct {
	EventID       *string         `json:"event_id"`
	EventType     *EventType      `json:"event_type"`
	OccurredAt    *time.Time      `json:"occurred_at"`
	SchemaVersion *int            `json:"schema_version"`
	Payload       json.RawMessage `json:"payload"`
}

// DecodeLakeEvent parses and validates one "feedback" message body received at
// receivedAt. Unknown fields, in the envelope or the payload, are rejected so
// that a producer on a newer schema is noticed instead of half-understood.
// Every failure is an *InvalidLakeEventError naming every problem found. The
// event id is returned in canonical lower-case form and every time in UTC.
func DecodeLakeEvent(body []byte, receivedAt time.Time) (LakeRecord, error) {
	var env lakeEnvelope
	if err := strictUnmarshal(body, &env); err != nil {
		return LakeRecord{}, &InvalidLakeEventError{Reason: "not a JSON lake event: " + err.Error()}
	}
	var (
		probs lakeProblems
		prob  string
		ev    = LakeRecord{ReceivedAt: receivedAt.UTC()}
	)
	ev.EventID, prob = readEventID(env.EventID)
	probs.add(prob)
	// An unknown type stays empty: its version and payload cannot be read.
	ev.EventType, prob = readEventType(env.EventType)
	probs.add(prob)
	ev.OccurredAt, prob = readOccurredAt(env.OccurredAt, receivedAt)
	probs.add(prob)
	ev.SchemaVersion, prob = readSchemaVersion(env.SchemaVersion, ev.EventType)
	probs.add(prob)
	if len(env.Payload) == 0 || string(env.Payload) == "null" {
		probs.add("payload is missing")
	} else if ev.EventType != "" {
		p, err := decodeLakePayload(ev.EventType, env.Payload)
		if err != nil {
			probs.add(err.Error())
		}
		ev.Payload = p
	}
	if len(probs) > 0 {
		return LakeRecord{}, &InvalidLakeEventError{Reason: strings.Join(probs, "; "), EventID: ev.EventID, EventType: ev.EventType}
	}
	return ev, nil
}

// lakeProblems collects what is wrong with a lake event, every problem
// found, so that one errors/ entry says everything a producer must fix.
type lakeProblems []string

// add records problem; "" is no problem.
func (p *lakeProblems) add(problem string) {
	if problem != "" {
		*p = append(*p, problem)
	}
}

// readEventID returns the envelope's event id in canonical form, or the
// problem with it.
func readEventID(raw *string) (string, string) {
	if raw == nil || *raw == "" {
		return "", "event_id is missing"
	}
	id, err := uuid.Parse(*raw)
	if err != nil || len(*raw) != 36 {
		return "", "event_id is not a UUID"
	}
	return id.String(), ""
}

// readEventType returns the envelope's event type when this build knows
// it (LakeSchemaVersions), or "" and the problem with it.
func readEventType(raw *EventType) (EventType, string) {
	if raw == nil || *raw == "" {
		return "", "event_type is missing"
	}
	if _, known := LakeSchemaVersions[*raw]; !known {
		return "", fmt.Sprintf("event_type %q is unknown", clip(string(*raw)))
	}
	return *raw, ""
}

// readOccurredAt returns the envelope's occurred_at in UTC, or the problem
// with it: missing, before 2000, or more than maxFutureSkew after
// receivedAt.
func readOccurredAt(raw *time.Time, receivedAt time.Time) (time.Time, string) {
	switch {
	case raw == nil || raw.IsZero():
		return time.Time{}, "occurred_at is missing"
	case raw.Year() < 2000:
		return time.Time{}, "occurred_at is before 2000"
	case raw.After(receivedAt.Add(maxFutureSkew)):
		return time.Time{}, "occurred_at is more than 24h in the future"
	}
	return raw.UTC(), ""
}

// readSchemaVersion returns the envelope's schema version, or the problem
// with it: missing, or one this build cannot decode for t (only checked
// when t is known, "" is not).
func readSchemaVersion(raw *int, t EventType) (int, string) {
	switch {
	case raw == nil:
		return 0, "schema_version is missing"
	case t != "" && !slices.Contains(LakeSchemaVersions[t], *raw):
		return 0, fmt.Sprintf("schema_version %d of %s is not supported", *raw, t)
	}
	return *raw, ""
}

// decodeLakePayload decodes and checks the payload of a known event type,
// returning it by value with its times in UTC, or an error naming every
// problem found.
func decodeLakePayload(t EventType, raw json.RawMessage) (any, error) {
	var (
		out   any
		probs []string
		err   error
	)
	switch t {
	case EventInferenceLog:
		out, probs, err = decodeInferenceLog(raw)
	case EventModeratorFeedback:
		out, probs, err = decodeModeratorFeedback(raw)
	case EventVerdict:
		out, probs, err = decodeVerdictEvent(raw)
	case EventShadowVerdict:
		out, probs, err = decodeShadowVerdict(raw)
	case EventProtectiveAction:
		out, probs, err = decodeActionEvent(raw)
	}
	if err != nil {
		return nil, err
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(probs, "; "))
	}
	return out, nil
}

// decodeInferenceLog decodes an inference_log payload and lists its
// problems; err is set when it does not decode at all.
func decodeInferenceLog(raw json.RawMessage) (InferenceLog, []string, error) {
	var p InferenceLog
	if err := strictUnmarshal(raw, &p); err != nil {
		return p, nil, fmt.Errorf("payload is not an inference_log: %s", err)
	}
	probs := identity(p.RoomID, p.WindowStart, p.WindowEnd, p.PipelineVersion)
	if !slices.Contains(Stages, p.Stage) {
		probs = append(probs, fmt.Sprintf("payload.stage %q is unknown", clip(string(p.Stage))))
	}
	if p.Pool != "" && p.Pool != PoolPrimary && p.Pool != PoolFallback {
		probs = append(probs, fmt.Sprintf("payload.pool %q is unknown", clip(string(p.Pool))))
	}
	if p.Attempt < 0 || p.TokensIn < 0 || p.TokensOut < 0 || p.TokensCached < 0 || p.CostUSD < 0 || p.LatencyMs < 0 || p.TTFTMillis < 0 {
		probs = append(probs, "payload has a negative count or latency")
	}
	p.WindowStart, p.WindowEnd = p.WindowStart.UTC(), p.WindowEnd.UTC()
	return p, probs, nil
}

// decodeModeratorFeedback decodes a moderator_feedback payload and lists
// its problems; err is set when it does not decode at all.
func decodeModeratorFeedback(raw json.RawMessage) (ModeratorFeedback, []string, error) {
	var p ModeratorFeedback
	if err := strictUnmarshal(raw, &p); err != nil {
		return p, nil, fmt.Errorf("payload is not a moderator_feedback: %s", err)
	}
	probs := identity(p.RoomID, p.WindowStart, p.WindowEnd, p.PipelineVersion)
	if p.ModeratorID == "" {
		probs = append(probs, "payload.moderator_id is missing")
	}
	probs = append(probs, checkLabel("payload.decided_label", p.DecidedLabel, true)...)
	probs = append(probs, checkLabel("payload.verdict_label", p.VerdictLabel, false)...)
	probs = append(probs, checkCategory("payload.decided_category", p.DecidedCategory)...)
	probs = append(probs, checkCategory("payload.verdict_category", p.VerdictCategory)...)
	probs = append(probs, checkAction("payload.action_taken", p.ActionTaken)...)
	switch {
	case p.Decision != "" && p.Decision != FeedbackUndo:
		probs = append(probs, fmt.Sprintf("payload.decision %q is not %q (omitted on a decision)", clip(p.Decision), FeedbackUndo))
	case (p.Decision == FeedbackUndo) != (p.ReversesEventID != ""):
		probs = append(probs, "payload.reverses_event_id must be set on an undo, and only on an undo")
	}
	p.WindowStart, p.WindowEnd = p.WindowStart.UTC(), p.WindowEnd.UTC()
	return p, probs, nil
}

// decodeVerdictEvent decodes a verdict payload and lists its problems;
// err is set when it does not decode at all.
func decodeVerdictEvent(raw json.RawMessage) (VerdictEvent, []string, error) {
	var p VerdictEvent
	if err := strictUnmarshal(raw, &p); err != nil {
		return p, nil, fmt.Errorf("payload is not a verdict: %s", err)
	}
	probs := identity(p.RoomID, p.WindowStart, p.WindowEnd, p.PipelineVersion)
	switch p.Status {
	case StatusDone, StatusExpired, StatusStopped, StatusFailed:
	default:
		probs = append(probs, fmt.Sprintf("payload.status %q is unknown", clip(string(p.Status))))
	}
	probs = append(probs, checkVerdictFields(p.Label, p.Status == StatusDone, p.Category, p.Action, p.Severity, p.Confidence)...)
	probs = append(probs, checkSubjectPseudonyms(p.Subjects)...)
	probs = append(probs, checkLakeCampaigns(p.Campaigns)...)
	probs = append(probs, checkHistorySeen(p.AccountHistory)...)
	if p.Revision < 0 {
		probs = append(probs, "payload.revision is negative")
	}
	p.WindowStart, p.WindowEnd = p.WindowStart.UTC(), p.WindowEnd.UTC()
	return p, probs, nil
}

// checkLakeCampaigns bounds a verdict event's campaign signals and
// refuses any mark that is not a keyed pseudonym: no text or contact value
// reaches the lake, whoever wrote the event.
func checkLakeCampaigns(cs []VerdictCampaign) []string {
	if len(cs) > MaxCampaigns {
		return []string{fmt.Sprintf("payload.campaigns has %d entries, at most %d", len(cs), MaxCampaigns)}
	}
	for _, c := range cs {
		switch {
		case c.Kind != CampaignScript && c.Kind != CampaignContact:
			return []string{fmt.Sprintf("payload.campaigns has a kind %q that is unknown", clip(string(c.Kind)))}
		case !IsSubjectPseudonym(c.Mark):
			return []string{"payload.campaigns holds a mark that is not a keyed pseudonym"}
		case c.Rooms < 0 || c.Senders < 0:
			return []string{"payload.campaigns holds a negative count"}
		}
	}
	return nil
}

// checkSubjectPseudonyms bounds a verdict event's subjects and refuses any
// that is not a keyed pseudonym: a raw sender id must never reach the lake,
// whoever wrote the event.
func checkSubjectPseudonyms(subjects []string) []string {
	if len(subjects) > MaxSubjects {
		return []string{fmt.Sprintf("payload.subjects has %d entries, at most %d", len(subjects), MaxSubjects)}
	}
	for _, s := range subjects {
		if !IsSubjectPseudonym(s) {
			return []string{"payload.subjects holds a value that is not a keyed pseudonym"}
		}
	}
	return nil
}

// IsSubjectPseudonym reports the shape of a keyed pseudonym (a subject,
// a campaign mark, a counted room or sender): "hmac2:" (or "hmac2-dev:",
// made with the development keys) and 24 lower-case hex digits, or the
// legacy "hmac:"/"hmac-dev:" form made before per-purpose keys, which
// stored rows and events still hold (pseudonym.IsKeyed).
func IsSubjectPseudonym(s string) bool { return pseudonym.IsKeyed(s) }

// identity checks the review key every payload carries; analysts join the
// three tables on it.
func identity(roomID string, start, end time.Time, pipelineVersion string) []string {
	var probs []string
	if strings.TrimSpace(roomID) == "" {
		probs = append(probs, "payload.room_id is missing")
	}
	if start.IsZero() || end.IsZero() {
		probs = append(probs, "payload.window_start or window_end is missing")
	} else if !end.After(start) {
		probs = append(probs, "payload.window_end is not after window_start")
	}
	if strings.TrimSpace(pipelineVersion) == "" {
		probs = append(probs, "payload.pipeline_version is missing")
	}
	return probs
}

// checkVerdictFields checks the verdict fields a payload carries under
// their usual names (label, category, action, severity, confidence); the
// label is required when labelRequired.
func checkVerdictFields(l Label, labelRequired bool, c Category, a Action, severity int, confidence float64) []string {
	probs := checkLabel("payload.label", l, labelRequired)
	probs = append(probs, checkCategory("payload.category", c)...)
	probs = append(probs, checkAction("payload.action", a)...)
	if severity < 0 || severity > 5 {
		probs = append(probs, "payload.severity is outside 0-5")
	}
	if confidence < 0 || confidence > 1 {
		probs = append(probs, "payload.confidence is outside 0-1")
	}
	return probs
}

func checkLabel(field string, l Label, required bool) []string {
	switch l {
	case LabelAbusive, LabelSuspicious, LabelClean:
		return nil
	case "":
		if !required {
			return nil
		}
		return []string{field + " is missing"}
	}
	return []string{fmt.Sprintf("%s %q is unknown", field, clip(string(l)))}
}

func checkCategory(field string, c Category) []string {
	if c == "" || c.Valid() {
		return nil
	}
	return []string{fmt.Sprintf("%s %q is unknown", field, clip(string(c)))}
}

func checkAction(field string, a Action) []string {
	switch a {
	case "", ActionNone, ActionWarn, ActionRestrict, ActionBan:
		return nil
	}
	return []string{fmt.Sprintf("%s %q is unknown", field, clip(string(a)))}
}

// strictUnmarshal decodes exactly one JSON object with no unknown fields and
// nothing after it.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonProblem(err)
	}
	if len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
		return fmt.Errorf("trailing data after the JSON object")
	}
	return nil
}

func jsonProblem(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("syntax error at byte %d", se.Offset)
	}
	return fmt.Errorf("%s", clip(err.Error()))
}

// clip bounds attacker-controlled text that ends up in reasons.
func clip(s string) string {
	const max = 120
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
