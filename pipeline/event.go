package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

// DecodeReviewEvent parses and validates one review-event body. Unknown
// fields are rejected so that a producer on a newer schema is noticed instead
// of half-understood. Every failure is an *InvalidEventError.
func DecodeReviewEvent(body []byte) (ReviewEvent, error) {
	var ev ReviewEvent
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
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
	switch {
	case strings.TrimSpace(e.RoomID) == "":
		probs = append(probs, "room_id is missing")
	case len(e.RoomID) > maxRoomIDLen:
		probs = append(probs, fmt.Sprintf("room_id is longer than %d bytes", maxRoomIDLen))
	case strings.ContainsAny(e.RoomID, "/?#%\x00\n\r\t "):
		probs = append(probs, "room_id contains a reserved character")
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
	if strings.TrimSpace(e.RunID) == "" {
		probs = append(probs, "run_id is missing")
	}
	if e.PublishedAt.IsZero() {
		probs = append(probs, "published_at is missing")
	}
	if len(probs) > 0 {
		return &InvalidEventError{Reason: strings.Join(probs, "; ")}
	}
	return nil
}

// Encode returns the canonical JSON body of the event with every time in
// UTC, as the batch publisher sends it.
func (e ReviewEvent) Encode() ([]byte, error) {
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
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
