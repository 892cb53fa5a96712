package s3lake

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/chatguard/chatguard/pipeline"
)

// The row types below (and ShadowVerdictRow, ActionRow) are the Parquet schemas of the
// lake tables: the envelope columns first, then the payload flattened.
// Timestamps are stored as timestamp(millisecond) UTC because that is what
// Athena's Hive tables read; finer precision is truncated. Low-cardinality
// strings are dictionary-encoded. Keep them in step with lake/*.sql.

// InferenceLogRow is one row of the inference_log table.
type InferenceLogRow struct {
	EventID         string    `parquet:"event_id"`
	EventType       string    `parquet:"event_type,dict"`
	OccurredAt      time.Time `parquet:"occurred_at,timestamp(millisecond)"`
	SchemaVersion   int32     `parquet:"schema_version"`
	ReceivedAt      time.Time `parquet:"received_at,timestamp(millisecond)"`
	RoomID          string    `parquet:"room_id"`
	WindowStart     time.Time `parquet:"window_start,timestamp(millisecond)"`
	WindowEnd       time.Time `parquet:"window_end,timestamp(millisecond)"`
	PipelineVersion string    `parquet:"pipeline_version,dict"`
	RunID           string    `parquet:"run_id,dict"`
	Stage           string    `parquet:"stage,dict"`
	Pool            string    `parquet:"pool,dict"`
	Model           string    `parquet:"model,dict"`
	Attempt         int32     `parquet:"attempt"`
	Outcome         string    `parquet:"outcome,dict"`
	ErrorKind       string    `parquet:"error_kind,optional,dict"`
	TTFTMillis      float64   `parquet:"ttft_ms"`
	LatencyMs       float64   `parquet:"latency_ms"`
	TokensIn        int32     `parquet:"tokens_in"`
	TokensOut       int32     `parquet:"tokens_out"`
	// Optional: files written before token accounting lack the columns
	// and read as 0.
	TokensCached int32   `parquet:"tokens_cached,optional"`
	CostUSD      float64 `parquet:"cost_usd,optional"`
	PromptSHA256 string  `parquet:"prompt_sha256"`
	PromptChars  int32   `parquet:"prompt_chars"`
	Messages     int32   `parquet:"messages"`
	Images       int32   `parquet:"images"`
	Output       string  `parquet:"output,optional"`
}

// ModeratorFeedbackRow is one row of the moderator_feedback table.
type ModeratorFeedbackRow struct {
	EventID         string    `parquet:"event_id"`
	EventType       string    `parquet:"event_type,dict"`
	OccurredAt      time.Time `parquet:"occurred_at,timestamp(millisecond)"`
	SchemaVersion   int32     `parquet:"schema_version"`
	ReceivedAt      time.Time `parquet:"received_at,timestamp(millisecond)"`
	RoomID          string    `parquet:"room_id"`
	WindowStart     time.Time `parquet:"window_start,timestamp(millisecond)"`
	WindowEnd       time.Time `parquet:"window_end,timestamp(millisecond)"`
	PipelineVersion string    `parquet:"pipeline_version,dict"`
	ModeratorID     string    `parquet:"moderator_id"`
	VerdictLabel    string    `parquet:"verdict_label,optional,dict"`
	VerdictCategory string    `parquet:"verdict_category,optional,dict"`
	DecidedLabel    string    `parquet:"decided_label,dict"`
	DecidedCategory string    `parquet:"decided_category,optional,dict"`
	ActionTaken     string    `parquet:"action_taken,optional,dict"`
	// Audit: optional, so files written before the column read as false.
	Audit bool `parquet:"audit,optional"`
	// Decision is "undo" on an undo's event, null on a decision's;
	// ReversesEventID the undone decision's event id (null otherwise).
	Decision        string `parquet:"decision,optional,dict"`
	ReversesEventID string `parquet:"reverses_event_id,optional"`
}

// VerdictRow is one row of the verdict table.
type VerdictRow struct {
	EventID         string    `parquet:"event_id"`
	EventType       string    `parquet:"event_type,dict"`
	OccurredAt      time.Time `parquet:"occurred_at,timestamp(millisecond)"`
	SchemaVersion   int32     `parquet:"schema_version"`
	ReceivedAt      time.Time `parquet:"received_at,timestamp(millisecond)"`
	RoomID          string    `parquet:"room_id"`
	WindowStart     time.Time `parquet:"window_start,timestamp(millisecond)"`
	WindowEnd       time.Time `parquet:"window_end,timestamp(millisecond)"`
	PipelineVersion string    `parquet:"pipeline_version,dict"`
	RunID           string    `parquet:"run_id,dict"`
	Status          string    `parquet:"status,dict"`
	Label           string    `parquet:"label,optional,dict"`
	Category        string    `parquet:"category,optional,dict"`
	Severity        int32     `parquet:"severity"`
	Confidence      float64   `parquet:"confidence"`
	Action          string    `parquet:"action,optional,dict"`
	EarlyExit       bool      `parquet:"early_exit"`
	FallbackUsed    bool      `parquet:"fallback_used"`
	Attempts        int32     `parquet:"attempts"`
	LatencyMs       float64   `parquet:"latency_ms"`
	// Subjects are the keyed subject pseudonyms joined by commas (none:
	// null); a plain string keeps the table readable by every engine and
	// by files written before the column existed.
	Subjects string `parquet:"subjects,optional"`
	// Campaigns are the campaign signals as a JSON array of {kind, mark,
	// rooms, senders} (none: null), for Athena's json_parse; a string
	// for the same reasons as Subjects.
	Campaigns string `parquet:"campaigns,optional"`
	// AccountHistory is the account history the review was shown, as
	// JSON {status, days, lines: [{role, label, category, overturned,
	// rooms}], accounts_left_out} (off, or before it was recorded: null);
	// a string like Campaigns.
	AccountHistory string `parquet:"account_history,optional"`
	// Revision is the verdict's revision of its review key, 2 and up for
	// explicit re-reviews; null for revision 1 (events omit it) and in
	// files from before revisions.
	Revision int32 `parquet:"revision,optional"`
}

func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

func inferenceLogRow(ev pipeline.LakeRecord) InferenceLogRow {
	p := ev.Payload.(pipeline.InferenceLog)
	return InferenceLogRow{
		EventID: ev.EventID, EventType: string(ev.EventType), OccurredAt: ms(ev.OccurredAt),
		SchemaVersion: int32(ev.SchemaVersion), ReceivedAt: ms(ev.ReceivedAt),
		RoomID: p.RoomID, WindowStart: ms(p.WindowStart), WindowEnd: ms(p.WindowEnd),
		PipelineVersion: p.PipelineVersion, RunID: p.RunID, Stage: string(p.Stage), Pool: string(p.Pool),
		Model: p.Model, Attempt: int32(p.Attempt), Outcome: p.Outcome, ErrorKind: p.ErrorKind,
		TTFTMillis: p.TTFTMillis, LatencyMs: p.LatencyMs, TokensIn: int32(p.TokensIn), TokensOut: int32(p.TokensOut),
		TokensCached: int32(p.TokensCached), CostUSD: p.CostUSD, PromptSHA256: p.PromptSHA256, PromptChars: int32(p.PromptChars), Messages: int32(p.Messages),
		Images: int32(p.Images), Output: p.Output,
	}
}

func moderatorFeedbackRow(ev pipeline.LakeRecord) ModeratorFeedbackRow {
	p := ev.Payload.(pipeline.ModeratorFeedback)
	return ModeratorFeedbackRow{
		EventID: ev.EventID, EventType: string(ev.EventType), OccurredAt: ms(ev.OccurredAt),
		SchemaVersion: int32(ev.SchemaVersion), ReceivedAt: ms(ev.ReceivedAt),
		RoomID: p.RoomID, WindowStart: ms(p.WindowStart), WindowEnd: ms(p.WindowEnd),
		PipelineVersion: p.PipelineVersion, ModeratorID: p.ModeratorID,
		VerdictLabel: string(p.VerdictLabel), VerdictCategory: string(p.VerdictCategory),
		DecidedLabel: string(p.DecidedLabel), DecidedCategory: string(p.DecidedCategory),
		ActionTaken: string(p.ActionTaken), Audit: p.Audit, Decision: p.Decision, ReversesEventID: p.ReversesEventID,
	}
}

func verdictRow(ev pipeline.LakeRecord) VerdictRow {
	p := ev.Payload.(pipeline.VerdictEvent)
	return VerdictRow{
		EventID: ev.EventID, EventType: string(ev.EventType), OccurredAt: ms(ev.OccurredAt),
		SchemaVersion: int32(ev.SchemaVersion), ReceivedAt: ms(ev.ReceivedAt),
		RoomID: p.RoomID, WindowStart: ms(p.WindowStart), WindowEnd: ms(p.WindowEnd),
		PipelineVersion: p.PipelineVersion, RunID: p.RunID, Status: string(p.Status),
		Label: string(p.Label), Category: string(p.Category), Severity: int32(p.Severity),
		Confidence: p.Confidence, Action: string(p.Action), EarlyExit: p.EarlyExit,
		FallbackUsed: p.FallbackUsed, Attempts: int32(p.Attempts), LatencyMs: p.LatencyMs,
		Subjects: strings.Join(p.Subjects, ","), Campaigns: campaignsColumn(p.Campaigns),
		AccountHistory: historyColumn(p.AccountHistory), Revision: int32(p.Revision),
	}
}

// campaignsColumn is the campaigns column of a verdict event's signals:
// a JSON array, or empty (null) for none. The decoder has checked every
// value, so encoding cannot fail.
func campaignsColumn(cs []pipeline.VerdictCampaign) string {
	if len(cs) == 0 {
		return ""
	}
	b, _ := json.Marshal(cs)
	return string(b)
}

// readCampaigns reads the campaigns column back; empty is none, and a
// value that does not parse (no writer makes one) reads as none too.
func readCampaigns(s string) []pipeline.VerdictCampaign {
	if s == "" {
		return nil
	}
	var out []pipeline.VerdictCampaign
	if json.Unmarshal([]byte(s), &out) != nil {
		return nil
	}
	return out
}

// historyColumn is the account_history column: the history as JSON, or
// empty (null) when the review was shown none. The decoder has checked
// it, so encoding cannot fail.
func historyColumn(h *pipeline.HistorySeen) string {
	if h == nil {
		return ""
	}
	b, _ := json.Marshal(h)
	return string(b)
}

// readHistory reads the account_history column back; empty is none, and a
// value that does not parse (no writer makes one) reads as none too.
func readHistory(s string) *pipeline.HistorySeen {
	if s == "" {
		return nil
	}
	var h pipeline.HistorySeen
	if json.Unmarshal([]byte(s), &h) != nil {
		return nil
	}
	return &h
}

// LakeEvent converts the row back to the wire envelope.
func (r InferenceLogRow) LakeEvent() pipeline.LakeEvent {
	return pipeline.LakeEvent{
		EventID: r.EventID, EventType: pipeline.EventType(r.EventType), OccurredAt: r.OccurredAt.UTC(),
		SchemaVersion: int(r.SchemaVersion),
		Payload: pipeline.InferenceLog{
			RoomID: r.RoomID, WindowStart: r.WindowStart.UTC(), WindowEnd: r.WindowEnd.UTC(),
			PipelineVersion: r.PipelineVersion, RunID: r.RunID, Stage: pipeline.StageName(r.Stage),
			Pool: pipeline.Pool(r.Pool), Model: r.Model, Attempt: int(r.Attempt), Outcome: r.Outcome,
			ErrorKind: r.ErrorKind, TTFTMillis: r.TTFTMillis, LatencyMs: r.LatencyMs,
			TokensIn: int(r.TokensIn), TokensOut: int(r.TokensOut), TokensCached: int(r.TokensCached), CostUSD: r.CostUSD, PromptSHA256: r.PromptSHA256,
			PromptChars: int(r.PromptChars), Messages: int(r.Messages), Images: int(r.Images), Output: r.Output,
		},
	}
}

// LakeEvent converts the row back to the wire envelope.
func (r ModeratorFeedbackRow) LakeEvent() pipeline.LakeEvent {
	return pipeline.LakeEvent{
		EventID: r.EventID, EventType: pipeline.EventType(r.EventType), OccurredAt: r.OccurredAt.UTC(),
		SchemaVersion: int(r.SchemaVersion),
		Payload: pipeline.ModeratorFeedback{
			RoomID: r.RoomID, WindowStart: r.WindowStart.UTC(), WindowEnd: r.WindowEnd.UTC(),
			PipelineVersion: r.PipelineVersion, ModeratorID: r.ModeratorID,
			VerdictLabel: pipeline.Label(r.VerdictLabel), VerdictCategory: pipeline.Category(r.VerdictCategory),
			DecidedLabel: pipeline.Label(r.DecidedLabel), DecidedCategory: pipeline.Category(r.DecidedCategory),
			ActionTaken: pipeline.Action(r.ActionTaken), Audit: r.Audit, Decision: r.Decision, ReversesEventID: r.ReversesEventID,
		},
	}
}

// LakeEvent converts the row back to the wire envelope.
func (r VerdictRow) LakeEvent() pipeline.LakeEvent {
	return pipeline.LakeEvent{
		EventID: r.EventID, EventType: pipeline.EventType(r.EventType), OccurredAt: r.OccurredAt.UTC(),
		SchemaVersion: int(r.SchemaVersion),
		Payload: pipeline.VerdictEvent{
			RoomID: r.RoomID, WindowStart: r.WindowStart.UTC(), WindowEnd: r.WindowEnd.UTC(),
			PipelineVersion: r.PipelineVersion, RunID: r.RunID, Status: pipeline.Status(r.Status),
			Label: pipeline.Label(r.Label), Category: pipeline.Category(r.Category), Severity: int(r.Severity),
			Confidence: r.Confidence, Action: pipeline.Action(r.Action), EarlyExit: r.EarlyExit,
			FallbackUsed: r.FallbackUsed, Attempts: int(r.Attempts), LatencyMs: r.LatencyMs,
			Subjects: splitSubjects(r.Subjects), Campaigns: readCampaigns(r.Campaigns),
			AccountHistory: readHistory(r.AccountHistory), Revision: int(r.Revision),
		},
	}
}

// writerOptions are fixed so that the same rows give the same bytes, which
// lets a retried flush overwrite its object with identical content.
func writerOptions() []parquet.WriterOption {
	return []parquet.WriterOption{
		parquet.Compression(&parquet.Zstd),
		parquet.CreatedBy("chatguard-consumer", "1", ""),
		parquet.MaxRowsPerRowGroup(1 << 20),
	}
}

// EncodeParquet writes events, all of type t, as one Parquet file to w,
// sorted by occurred_at then event_id. It fails when an event is of another
// type or its payload does not match t (a bug, never bad input: Decode
// guarantees both).
func EncodeParquet(w io.Writer, t pipeline.EventType, events []pipeline.LakeRecord) error {
	for _, ev := range events {
		if ev.EventType != t {
			return fmt.Errorf("s3lake: encode: event %s is %s, not %s", ev.EventID, ev.EventType, t)
		}
		if !payloadMatches(t, ev.Payload) {
			return fmt.Errorf("s3lake: encode: event %s has a %T payload", ev.EventID, ev.Payload)
		}
	}
	var err error
	switch t {
	case pipeline.EventInferenceLog:
		err = writeRows(w, events, inferenceLogRow)
	case pipeline.EventModeratorFeedback:
		err = writeRows(w, events, moderatorFeedbackRow)
	case pipeline.EventVerdict:
		err = writeRows(w, events, verdictRow)
	case pipeline.EventShadowVerdict:
		err = writeRows(w, events, shadowVerdictRow)
	case pipeline.EventProtectiveAction:
		err = writeRows(w, events, actionRow)
	default:
		return fmt.Errorf("s3lake: encode: unknown event type %q", t)
	}
	if err != nil {
		return fmt.Errorf("s3lake: encode %s: %w", t, err)
	}
	return nil
}

func payloadMatches(t pipeline.EventType, p any) bool {
	switch p.(type) {
	case pipeline.InferenceLog:
		return t == pipeline.EventInferenceLog
	case pipeline.ModeratorFeedback:
		return t == pipeline.EventModeratorFeedback
	case pipeline.VerdictEvent:
		return t == pipeline.EventVerdict
	case pipeline.ShadowVerdict:
		return t == pipeline.EventShadowVerdict
	case pipeline.ActionEvent:
		return t == pipeline.EventProtectiveAction
	}
	return false
}

func writeRows[T any](w io.Writer, events []pipeline.LakeRecord, conv func(pipeline.LakeRecord) T) error {
	sorted := slices.Clone(events)
	slices.SortFunc(sorted, func(a, b pipeline.LakeRecord) int {
		return cmp.Or(a.OccurredAt.Compare(b.OccurredAt), cmp.Compare(a.EventID, b.EventID), a.ReceivedAt.Compare(b.ReceivedAt))
	})
	rows := make([]T, len(sorted))
	for i, ev := range sorted {
		rows[i] = conv(ev)
	}
	pw := parquet.NewGenericWriter[T](w, writerOptions()...)
	if _, err := pw.Write(rows); err != nil {
		return err
	}
	return pw.Close()
}

// ReadRows decodes a whole Parquet object into rows of type T (one of the
// row types above), for tests and tools that read the lake back.
func ReadRows[T any](data []byte) ([]T, error) {
	rows, err := parquet.Read[T](bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("s3lake: read parquet: %w", err)
	}
	return rows, nil
}

// splitSubjects reads the subjects column back; empty is none.
func splitSubjects(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
