package s3lake

import (
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// ActionRow is one row of the protective_action table: a protective
// action's written or published event. The window, the message time, the
// publish, the offender and the other optional columns are NULL where the
// event has none: pointers, so that an empty value is NULL in every row
// and analysts can test them with IS NULL.
type ActionRow struct {
	EventID         string     `parquet:"event_id"`
	EventType       string     `parquet:"event_type,dict"`
	OccurredAt      time.Time  `parquet:"occurred_at,timestamp(millisecond)"`
	SchemaVersion   int32      `parquet:"schema_version"`
	ReceivedAt      time.Time  `parquet:"received_at,timestamp(millisecond)"`
	IdempotencyKey  string     `parquet:"idempotency_key"`
	Phase           string     `parquet:"phase,dict"`
	RoomID          string     `parquet:"room_id"`
	WindowStart     *time.Time `parquet:"window_start,optional,timestamp(millisecond)"`
	WindowEnd       *time.Time `parquet:"window_end,optional,timestamp(millisecond)"`
	PipelineVersion *string    `parquet:"pipeline_version,optional,dict"`
	VerdictRevision int32      `parquet:"verdict_revision"`
	Action          string     `parquet:"action,dict"`
	Mode            string     `parquet:"mode,dict"`
	Source          string     `parquet:"source,dict"`
	RuleID          string     `parquet:"rule_id,dict"`
	Category        *string    `parquet:"category,optional,dict"`
	Penalty         *string    `parquet:"penalty,optional,dict"`
	PolicyVersion   string     `parquet:"policy_version,dict"`
	PolicyHash      string     `parquet:"policy_hash,dict"`
	Reverses        *string    `parquet:"reverses,optional"`
	Offender        *string    `parquet:"offender,optional"`
	MessageAt       *time.Time `parquet:"message_at,optional,timestamp(millisecond)"`
	IssuedAt        time.Time  `parquet:"issued_at,timestamp(millisecond)"`
	ExpiresAt       time.Time  `parquet:"expires_at,timestamp(millisecond)"`
	PublishedAt     *time.Time `parquet:"published_at,optional,timestamp(millisecond)"`
	Sends           int32      `parquet:"sends"`
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func strVal(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func msPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	m := ms(*t)
	return &m
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func actionRow(ev pipeline.LakeRecord) ActionRow {
	p := ev.Payload.(pipeline.ActionEvent)
	return ActionRow{
		EventID: ev.EventID, EventType: string(ev.EventType), OccurredAt: ms(ev.OccurredAt),
		SchemaVersion: int32(ev.SchemaVersion), ReceivedAt: ms(ev.ReceivedAt),
		IdempotencyKey: p.IdempotencyKey, Phase: p.Phase, RoomID: p.RoomID,
		WindowStart: msPtr(p.WindowStart), WindowEnd: msPtr(p.WindowEnd), PipelineVersion: strPtr(p.PipelineVersion),
		VerdictRevision: int32(p.VerdictRevision), Action: string(p.Action), Mode: string(p.Mode), Source: string(p.Source),
		RuleID: p.RuleID, Category: strPtr(string(p.Category)), Penalty: strPtr(string(p.Penalty)),
		PolicyVersion: p.PolicyVersion, PolicyHash: p.PolicyHash, Reverses: strPtr(p.Reverses), Offender: strPtr(p.Offender),
		MessageAt: msPtr(p.MessageAt), IssuedAt: ms(p.IssuedAt), ExpiresAt: ms(p.ExpiresAt),
		PublishedAt: msPtr(p.PublishedAt), Sends: int32(p.Sends),
	}
}

// LakeEvent converts the row back to the wire envelope.
func (r ActionRow) LakeEvent() pipeline.LakeEvent {
	return pipeline.LakeEvent{
		EventID: r.EventID, EventType: pipeline.EventType(r.EventType), OccurredAt: r.OccurredAt.UTC(),
		SchemaVersion: int(r.SchemaVersion),
		Payload: pipeline.ActionEvent{
			IdempotencyKey: r.IdempotencyKey, Phase: r.Phase, RoomID: r.RoomID,
			WindowStart: utcPtr(r.WindowStart), WindowEnd: utcPtr(r.WindowEnd), PipelineVersion: strVal(r.PipelineVersion),
			VerdictRevision: int(r.VerdictRevision), Action: pipeline.ActionKind(r.Action), Mode: pipeline.ActionMode(r.Mode),
			Source: pipeline.ActionSource(r.Source), RuleID: r.RuleID, Category: pipeline.Category(strVal(r.Category)),
			Penalty: pipeline.Penalty(strVal(r.Penalty)), PolicyVersion: r.PolicyVersion, PolicyHash: r.PolicyHash,
			Reverses: strVal(r.Reverses), Offender: strVal(r.Offender), MessageAt: utcPtr(r.MessageAt), IssuedAt: r.IssuedAt.UTC(),
			ExpiresAt: r.ExpiresAt.UTC(), PublishedAt: utcPtr(r.PublishedAt), Sends: int(r.Sends),
		},
	}
}

func (r ActionRow) receivedAt() time.Time { return r.ReceivedAt }
