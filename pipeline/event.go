package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// ReviewSchemaVersion is the only review-event schema version this build
// understands. A bump means a new decoder, never a silent reinterpretation.
const ReviewSchemaVersion = 1

// ReviewEvent is the body of one SQS "review" message: one chat room to
// review over one time window. Its JSON form is the wire contract between
// cmd/batch and cmd/worker (see DESIGN.md).
type ReviewEvent struct {
	RoomID        string    `json:"room_id"`
	WindowStart   time.Time `json:"window_start"`
	WindowEnd     time.Time `json:"window_end"`
	RunID         string    `json:"run_id"`
	PublishedAt   time.Time `json:"published_at"`
	SchemaVersion int       `json:"schema_version"`
	// Source says which publisher asked for the review (batch, sweep,
	// realtime, or campaign for a re-review of a room linked to a campaign
	// later); optional, empty from publishers that predate it. It sets the
	// review's traffic class (Class).
	Source ReviewSource `json:"source,omitempty"`
}

// InvalidEventError reports a message body that can never be processed. It
// is permanent: the worker moves such a message to the DLQ with Reason and
// never retries it.
type InvalidEventError struct {
	Reason string
}

// Error implements error.
func (e *InvalidEventError) Error() string { return "invalid review event: " + e.Reason }

// maxRoomIDLen bounds room ids so that a hostile body cannot blow up keys,
// logs or MySQL columns.
const maxRoomIDLen = 128

// DecodeReviewEvent parses and validates one review-event body. It is a
// tolerant reader: unknown fields are ignored, so a producer that adds a
// field does not dead-letter every event during a rolling deploy; a
// breaking change bumps schema_version, which is checked. Every failure is
// an *InvalidEventError. Limits that need the clock or configuration are
// checked by EventLimits.Check.
func DecodeReviewEvent(body []byte) (ReviewEvent, error) {
	var ev ReviewEvent
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&ev); err != nil {
		return ReviewEvent{}, &InvalidEventError{Reason: "not a JSON review event: " + trimErr(err)}
	}
	if dec.More() {
		return ReviewEvent{}, &InvalidEventError{Reason: "trailing data after the JSON object"}
	}
	if err := ev.Validate(); err != nil {
		return ReviewEvent{}, err
	}
	ev.WindowStart = ev.WindowStart.UTC()
	ev.WindowEnd = ev.WindowEnd.UTC()
	ev.PublishedAt = ev.PublishedAt.UTC()
	return ev, nil
}

// Validate reports every problem with the event at once, joined into one
// *InvalidEventError.
func (e ReviewEvent) Validate() error {
	var probs []string
	if e.SchemaVersion != ReviewSchemaVersion {
		probs = append(probs, fmt.Sprintf("schema_version %d is not supported (want %d)", e.SchemaVersion, ReviewSchemaVersion))
	}
	if p := roomIDProblem(e.RoomID); p != "" {
		probs = append(probs, p)
	}
	if !e.Source.Known() {
		probs = append(probs, fmt.Sprintf("source %q is not one of batch, sweep, realtime, campaign", ClipRunes(string(e.Source), 32)))
	}
	if e.WindowStart.IsZero() {
		probs = append(probs, "window_start is missing")
	}
	if e.WindowEnd.IsZero() {
		probs = append(probs, "window_end is missing")
	}
	if !e.WindowStart.IsZero() && !e.WindowEnd.IsZero() && !e.WindowEnd.After(e.WindowStart) {
		probs = append(probs, "window_end is not after window_start")
	}
	switch {
	case strings.TrimSpace(e.RunID) == "":
		probs = append(probs, "run_id is missing")
	case !ValidRunID(e.RunID):
		probs = append(probs, "run_id "+RunIDRule)
	}
	if e.PublishedAt.IsZero() {
		probs = append(probs, "published_at is missing")
	}
	if len(probs) > 0 {
		return &InvalidEventError{Reason: strings.Join(probs, "; ")}
	}
	return nil
}

// roomIDProblem says what is wrong with a room id, or "" when nothing is:
// room ids become URL path segments, Redis keys and MySQL keys.
func roomIDProblem(id string) string {
	switch {
	case strings.TrimSpace(id) == "":
		return "room_id is missing"
	case len(id) > maxRoomIDLen:
		return fmt.Sprintf("room_id is longer than %d bytes", maxRoomIDLen)
	case strings.ContainsAny(id, "/?#%\x00\n\r\t "):
		return "room_id contains a reserved character"
	}
	return ""
}

// Encode returns the canonical JSON body of the event with every time in
// UTC, as the publishers send it. It is the strict writer: a source outside
// the known set is refused, never sent.
func (e ReviewEvent) Encode() ([]byte, error) {
	if !e.Source.Known() {
		return nil, fmt.Errorf("encode review event: source %q is not one of batch, sweep, realtime, campaign", ClipRunes(string(e.Source), 32))
	}
	e.WindowStart = e.WindowStart.UTC()
	e.WindowEnd = e.WindowEnd.UTC()
	e.PublishedAt = e.PublishedAt.UTC()
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode review event: %w", err)
	}
	return b, nil
}

// Key returns the idempotency key of the review this event asks for under
// the given pipeline version.
func (e ReviewEvent) Key(pipelineVersion string) ReviewKey {
	return ReviewKey{RoomID: e.RoomID, WindowStart: e.WindowStart.UTC(), WindowEnd: e.WindowEnd.UTC(), PipelineVersion: pipelineVersion}
}

// ReviewKey is the idempotency key of a review: the same room, window and
// pipeline version always name the same verdict row.
type ReviewKey struct {
	RoomID          string
	WindowStart     time.Time
	WindowEnd       time.Time
	PipelineVersion string
}

// String renders the key for logs; it contains no chat content.
func (k ReviewKey) String() string {
	return fmt.Sprintf("%s[%s,%s)@%s", k.RoomID, k.WindowStart.Format(time.RFC3339), k.WindowEnd.Format(time.RFC3339), k.PipelineVersion)
}

func trimErr(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	}
	return ClipRunes(err.Error(), 200)
}

// runIDPattern keeps run ids safe as an SQS attribute, a MySQL key
// (VARCHAR(128)) and a log field.
var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

// RunIDRule says what ValidRunID accepts, for error messages.
const RunIDRule = "must be 1-128 letters, digits or _.:- starting with a letter or digit"

// ValidRunID reports whether id is a run id the batch may stamp and the
// worker accepts: checked before any model call, so a bad one never fails
// every save after the models ran.
func ValidRunID(id string) bool { return runIDPattern.MatchString(id) }

// EventLimits bound a review event by configuration and the clock.
type EventLimits struct {
	// MaxWindow is the longest window a review may fetch: a ten-year window
	// would fetch ten years of chat.
	MaxWindow time.Duration
	// MaxClockSkew is how far in the future published_at and window_end
	// may be, for producers whose clocks run ahead: a published_at further
	// ahead would dodge the age limit.
	MaxClockSkew time.Duration
}

// The EventLimits defaults.
const (
	DefaultMaxWindow    = 24 * time.Hour
	DefaultMaxClockSkew = 5 * time.Minute
)

// DefaultEventLimits returns the defaults.
func DefaultEventLimits() EventLimits {
	return EventLimits{MaxWindow: DefaultMaxWindow, MaxClockSkew: DefaultMaxClockSkew}
}

// WithDefaults returns l with zero fields set to the defaults.
func (l EventLimits) WithDefaults() EventLimits {
	if l.MaxWindow == 0 {
		l.MaxWindow = DefaultMaxWindow
	}
	if l.MaxClockSkew == 0 {
		l.MaxClockSkew = DefaultMaxClockSkew
	}
	return l
}

// Validate reports every out-of-range field at once; zero fields take the
// defaults.
func (l EventLimits) Validate() error {
	var errs []error
	if l.MaxWindow < 0 {
		errs = append(errs, fmt.Errorf("max window %s must not be negative", l.MaxWindow))
	}
	if l.MaxClockSkew < 0 || l.MaxClockSkew > time.Hour {
		errs = append(errs, fmt.Errorf("max clock skew %s must be in 0..1h", l.MaxClockSkew))
	}
	return errors.Join(errs...)
}

// Check reports, as one *InvalidEventError, every limit a decoded event
// breaks at now: a window longer than MaxWindow, and a published_at or
// window_end more than MaxClockSkew in the future. Such an event can never
// become valid by waiting, so it is dead-lettered with the reason.
func (l EventLimits) Check(e ReviewEvent, now time.Time) error {
	l = l.WithDefaults()
	var probs []string
	if w := e.WindowEnd.Sub(e.WindowStart); w > l.MaxWindow {
		probs = append(probs, fmt.Sprintf("window of %s is longer than %s", w, l.MaxWindow))
	}
	if ahead := e.PublishedAt.Sub(now); ahead > l.MaxClockSkew {
		probs = append(probs, fmt.Sprintf("published_at is %s in the future, beyond the %s clock-skew bound", ahead.Round(time.Second), l.MaxClockSkew))
	}
	if ahead := e.WindowEnd.Sub(now); ahead > l.MaxClockSkew {
		probs = append(probs, fmt.Sprintf("window_end is %s in the future: the window has not ended", ahead.Round(time.Second)))
	}
	if len(probs) > 0 {
		return &InvalidEventError{Reason: strings.Join(probs, "; ")}
	}
	return nil
}
