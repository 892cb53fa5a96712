package pipeline

import (
	"time"
)

// EventType names the kind of a lake event on the "feedback" queue.
type EventType string

// The lake event types; each has its own Parquet table.
const (
	EventInferenceLog      EventType = "inference_log"
	EventModeratorFeedback EventType = "moderator_feedback"
	EventVerdict           EventType = "verdict"
)

// LakeEventSchemaVersion is the payload schema version this build writes.
const LakeEventSchemaVersion = 1

// LakeEvent is the envelope of one "feedback" queue message. Payload is one
// of InferenceLog, ModeratorFeedback or VerdictEvent, chosen by EventType.
type LakeEvent struct {
	EventID       string    `json:"event_id"`
	EventType     EventType `json:"event_type"`
	OccurredAt    time.Time `json:"occurred_at"`
	SchemaVersion int       `json:"schema_version"`
	Payload       any       `json:"payload"`
}

// InferenceLog is the payload of one stage attempt's inference-log event.
// It carries no chat text: hashes, sizes, and the model's structured output
// with phone and account numbers masked.
type InferenceLog struct {
	RoomID          string    `json:"room_id"`
	WindowStart     time.Time `json:"window_start"`
	WindowEnd       time.Time `json:"window_end"`
	PipelineVersion string    `json:"pipeline_version"`
	RunID           string    `json:"run_id"`
	Stage           StageName `json:"stage"`
	Pool            Pool      `json:"pool"`
	Model           string    `json:"model"`
	Attempt         int       `json:"attempt"`
	// Outcome is ok, invalid (answer failed validation), error or canceled.
	Outcome      string  `json:"outcome"`
	ErrorKind    string  `json:"error_kind,omitempty"`
	TTFTMillis   float64 `json:"ttft_ms"`
	LatencyMs    float64 `json:"latency_ms"`
	TokensIn     int     `json:"tokens_in"`
	TokensOut    int     `json:"tokens_out"`
	PromptSHA256 string  `json:"prompt_sha256"`
	PromptChars  int     `json:"prompt_chars"`
	Messages     int     `json:"messages"`
	Images       int     `json:"images"`
	// Output is the validated structured answer as JSON, masked.
	Output string `json:"output,omitempty"`
}

// ModeratorFeedback is the payload of a moderator's decision on a verdict.
type ModeratorFeedback struct {
	RoomID          string    `json:"room_id"`
	WindowStart     time.Time `json:"window_start"`
	WindowEnd       time.Time `json:"window_end"`
	PipelineVersion string    `json:"pipeline_version"`
	ModeratorID     string    `json:"moderator_id"`
	VerdictLabel    Label     `json:"verdict_label"`
	VerdictCategory Category  `json:"verdict_category"`
	DecidedLabel    Label     `json:"decided_label"`
	DecidedCategory Category  `json:"decided_category"`
	ActionTaken     Action    `json:"action_taken"`
}

// VerdictEvent is the payload written when a verdict is saved.
type VerdictEvent struct {
	RoomID          string    `json:"room_id"`
	WindowStart     time.Time `json:"window_start"`
	WindowEnd       time.Time `json:"window_end"`
	PipelineVersion string    `json:"pipeline_version"`
	RunID           string    `json:"run_id"`
	Status          Status    `json:"status"`
	Label           Label     `json:"label"`
	Category        Category  `json:"category"`
	Severity        int       `json:"severity"`
	Confidence      float64   `json:"confidence"`
	Action          Action    `json:"action"`
	EarlyExit       bool      `json:"early_exit"`
	FallbackUsed    bool      `json:"fallback_used"`
	Attempts        int       `json:"attempts"`
	LatencyMs       float64   `json:"latency_ms"`
}

// EventSink hands lake events to a slow path (the feedback queue) without
// blocking the caller: Publish returns at once, false when the event was
// dropped because the buffer is full (and the drop is counted).
type EventSink interface {
	Publish(ev LakeEvent) bool
}
