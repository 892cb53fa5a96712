package pipeline

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// EventType names the kind of a lake event on the "feedback" queue.
type EventType string

// The lake event types; each has its own Parquet table.
const (
	EventInferenceLog      EventType = "inference_log"
	EventModeratorFeedback EventType = "moderator_feedback"
	EventVerdict           EventType = "verdict"
	EventShadowVerdict     EventType = "shadow_verdict"
	// EventProtectiveAction is a protective action's (ActionEvent).
	EventProtectiveAction EventType = "protective_action"
)

// EventTypes lists every lake event type, in the lake's table order.
var EventTypes = []EventType{EventInferenceLog, EventModeratorFeedback, EventVerdict, EventShadowVerdict, EventProtectiveAction}

// LakeEventSchemaVersion is the payload schema version this build writes.
const LakeEventSchemaVersion = 1

// LakeEvent is the envelope of one "feedback" queue message. Payload is one
// of InferenceLog, ModeratorFeedback, VerdictEvent, ShadowVerdict or
// ActionEvent, chosen by EventType.
type LakeEvent struct {
	EventID       string    `json:"event_id"`
	EventType     EventType `json:"event_type"`
	OccurredAt    time.Time `json:"occurred_at"`
	SchemaVersion int       `json:"schema_version"`
	Payload       any       `json:"payload"`
	// Trace is the span context the event was produced in (invalid for
	// none): not part of the message body, it travels as the message's
	// traceparent attribute (EventSink implementations add it), so the
	// consumer's lake write joins the producer's trace.
	Trace trace.SpanContext `json:"-"`
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
	Outcome    string  `json:"outcome"`
	ErrorKind  string  `json:"error_kind,omitempty"`
	TTFTMillis float64 `json:"ttft_ms"`
	LatencyMs  float64 `json:"latency_ms"`
	TokensIn   int     `json:"tokens_in"`
	TokensOut  int     `json:"tokens_out"`
	// TokensCached are the prompt tokens served from the server's prefix
	// cache (part of TokensIn); CostUSD is the attempt's cost at its
	// pool's prices. Both are 0 in events written before they existed.
	TokensCached int     `json:"tokens_cached,omitempty"`
	CostUSD      float64 `json:"cost_usd,omitempty"`
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
	// Audit is true when the verdict was a console audit item (a clean
	// verdict sampled at random for a moderator to look at): such
	// decisions make a labelled set's clean stratum. Omitted when false,
	// so that consumers older than the field read every other decision;
	// deploy the consumer before a console that sends it.
	Audit bool `json:"audit,omitempty"`
	// Decision is FeedbackUndo on an undo's event (a moderator took back
	// their decision: the event ReversesEventID names no longer counts)
	// and omitted on a decision's, whose bytes stay as they were. A
	// consumer older than the field refuses an undo's event (its decoder
	// is strict) rather than count it: deploy the consumer first.
	Decision string `json:"decision,omitempty"`
	// ReversesEventID is, on an undo's event, the event id of the undone
	// decision's event; omitted otherwise.
	ReversesEventID string `json:"reverses_event_id,omitempty"`
}

// FeedbackUndo is ModeratorFeedback.Decision on an undo's event.
const FeedbackUndo = "undo"

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
	// Subjects are the verdict's subjects as keyed pseudonyms
	// (SubjectPseudonymizer), never raw sender ids; empty for verdicts
	// without subjects, including every verdict from before they existed.
	Subjects []string `json:"subjects,omitempty"`
	// Campaigns are the campaign signals the review was given: keyed
	// marks and their fleet-wide counts, never text or contact values;
	// empty when there were none, and on every verdict from before them.
	Campaigns []VerdictCampaign `json:"campaigns,omitempty"`
	// AccountHistory is the account history the review's stages were
	// shown (RecordedHistory): lookup status, window, and lines of role,
	// label, category and distinct rooms, never a sender id. Nil when the
	// history was off, and on every verdict from before it was recorded.
	AccountHistory *HistorySeen `json:"account_history,omitempty"`
	// Revision is the verdict's revision of its review key (1 for the
	// first verdict of a key, 2 and up for explicit re-reviews): the lake
	// keeps every revision, and the one with the highest number is the
	// key's current verdict. Omitted (0) for revision 1, so that consumers
	// older than the field read every first verdict, and in every event
	// from before revisions; deploy the consumer before a worker that
	// re-sends a later revision.
	Revision int `json:"revision,omitempty"`
}

// VerdictLakeEvent is the verdict event of v, a verdict the store
// committed: subjects are its subjects as keyed pseudonyms (nil when the
// caller has no key; raw ids never go into an event). The event is dated
// by the verdict's finish at the precision MySQL keeps (DATETIME(6)), so
// that a copy sent again from the stored verdict is the same event in the
// same partition; now dates a verdict without a finish time. Revision 1 is
// sent as no revision: consumers older than the field refuse an event with
// it, and the lake reads its absence as 1.
func VerdictLakeEvent(v Verdict, subjects []string, now time.Time) LakeEvent {
	fallback := false
	for _, st := range v.Stages {
		fallback = fallback || st.Pool == PoolFallback
	}
	started, finished := v.StartedAt.Truncate(time.Microsecond), v.FinishedAt.Truncate(time.Microsecond)
	var latency float64
	if !started.IsZero() && !finished.IsZero() {
		latency = float64(finished.Sub(started)) / float64(time.Millisecond)
	}
	occurred := finished
	if occurred.IsZero() {
		occurred = now
	}
	revision := v.Revision
	if revision <= 1 {
		revision = 0
	}
	return LakeEvent{
		EventID: VerdictRevisionEventID(v.Key, v.Status, v.Revision), EventType: EventVerdict, OccurredAt: occurred.UTC(), SchemaVersion: LakeEventSchemaVersion,
		Payload: VerdictEvent{
			RoomID: v.Key.RoomID, WindowStart: v.Key.WindowStart, WindowEnd: v.Key.WindowEnd, PipelineVersion: v.Key.PipelineVersion,
			RunID: v.RunID, Status: v.Status, Label: v.Label, Category: v.Category, Severity: v.Severity, Confidence: v.Confidence,
			Action: v.Action, EarlyExit: v.EarlyExit, FallbackUsed: fallback, Attempts: v.Attempts, LatencyMs: latency,
			Subjects: subjects, Campaigns: LakeCampaigns(v.Campaigns), AccountHistory: RecordedHistory(v.Stages), Revision: revision,
		},
	}
}

// VerdictCampaign is one campaign signal as the lake keeps it: the mark
// (a keyed pseudonym), its kind, and the distinct rooms and senders it
// was seen in fleet-wide when the review counted it.
type VerdictCampaign struct {
	Kind    CampaignKind `json:"kind"`
	Mark    string       `json:"mark"`
	Rooms   int          `json:"rooms"`
	Senders int          `json:"senders"`
}

// LakeCampaigns are a verdict's campaign signals as its verdict event
// carries them, less those of repeat senders.
func LakeCampaigns(cs []CampaignCount) []VerdictCampaign {
	if len(cs) == 0 {
		return nil
	}
	var out []VerdictCampaign
	for _, c := range cs {
		// The analysts' campaign queries count campaigns: one account
		// repeating itself is none.
		if !c.RepeatSender {
			out = append(out, VerdictCampaign{Kind: c.Kind, Mark: c.Mark, Rooms: c.Rooms, Senders: c.Senders})
		}
	}
	return out
}

// EventSink hands lake events to a slow path (the feedback queue) without
// blocking the caller: Publish returns at once, false when the event was
// dropped because the buffer is full (and the drop is counted).
type EventSink interface {
	Publish(ev LakeEvent) bool
}

// LakeHour returns the UTC hour an instant falls in: the partition of an
// event is the hour of its occurred_at, that of an invalid message the hour
// it was received.
func LakeHour(t time.Time) time.Time { return t.UTC().Truncate(time.Hour) }

// LakePartition names a buffer of the lake and the object a batch of it
// becomes: an event type and a UTC hour, or the errors partition of an hour
// when Type is empty. Build it with NewLakePartition so that equal
// partitions compare equal (it is a map key).
type LakePartition struct {
	Type EventType
	Hour time.Time
}

// NewLakePartition returns the partition of event type typ (empty for the
// errors partition) holding instant t.
func NewLakePartition(typ EventType, t time.Time) LakePartition {
	return LakePartition{Type: typ, Hour: LakeHour(t)}
}

// IsErrors reports whether the partition holds invalid messages.
func (p LakePartition) IsErrors() bool { return p.Type == "" }

// LakeErrorLine is an invalid "feedback" message kept in the lake's errors
// partition with its reason and its body, so that nothing the queue
// delivered is lost.
type LakeErrorLine struct {
	MessageID  string    `json:"message_id"`
	ReceivedAt time.Time `json:"received_at"`
	Reason     string    `json:"reason"`
	EventID    string    `json:"event_id,omitempty"`
	EventType  EventType `json:"event_type,omitempty"`
	// Body is the message body as received; invalid UTF-8 is replaced.
	Body string `json:"body"`
}

// LakeObject is one encoded lake object, ready to be written.
type LakeObject struct {
	Key         string
	Body        []byte
	ContentType string
}

// LakeWriter turns a batch of one partition into one object and writes it.
// Encoding is split from writing so that a failed write is retried with
// the same bytes under the same key, and so that a batch that cannot be
// encoded is told apart from a write that failed.
type LakeWriter interface {
	// EncodeEvents encodes events, all of partition p (never the errors
	// partition), carried by the queue messages msgIDs. The same messages
	// give the same key, so a retried flush overwrites its object. An error
	// is deterministic (encoding again fails again): the caller must send
	// the events elsewhere rather than retry.
	EncodeEvents(p LakePartition, msgIDs []string, events []LakeRecord) (LakeObject, error)
	// EncodeErrors encodes the invalid messages received in hour, with the
	// same key and error contract as EncodeEvents.
	EncodeErrors(hour time.Time, lines []LakeErrorLine) (LakeObject, error)
	// Put writes o. nil means it is durably stored; a second Put of the
	// same key replaces it. Every error may be transient to a caller that
	// must not lose data: it retries with backoff until ctx ends, and a
	// cancelled ctx ends Put with ctx's error.
	Put(ctx context.Context, o LakeObject) error
}
