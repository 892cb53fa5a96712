package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// ChatEventSchemaVersion is the only chat-event schema version this build
// understands; a breaking change from the chat service bumps it.
const ChatEventSchemaVersion = 1

// Bounds of a chat event. Events are metadata only, a few hundred bytes;
// the body bound leaves room for fields a producer adds later (the reader
// ignores them) while a runaway body is refused before it is parsed.
const (
	MaxChatEventBytes = 16 << 10
	maxMessageIDLen   = 128
	maxSenderIDLen    = 128
	maxEnumLen        = 32
)

// ChatEvent is the body of one SQS "chat-events" message: the chat service
// says that one message was sent in one room. It carries no text: the
// worker fetches the room's messages from the chat API when it reviews.
// The chat service delivers at least once, unordered, possibly duplicated.
type ChatEvent struct {
	SchemaVersion int    `json:"schema_version"`
	RoomID        string `json:"room_id"`
	MessageID     string `json:"message_id"`
	SenderID      string `json:"sender_id"`
	// SenderRole and Kind are today buyer|seller|system and
	// text|image|system. Other values are accepted (bounded tokens): the
	// trigger does not act on them, and a chat service that adds a role
	// must not dead-letter every event of it.
	SenderRole string `json:"sender_role"`
	Kind       string `json:"kind"`
	// SentAt is the producer's clock. It never sets a window bound (a
	// producer clock running ahead would make windows the worker refuses);
	// the trigger uses it only to notice late or skewed events.
	SentAt time.Time `json:"sent_at"`
}

// InvalidChatEventError reports a chat-event body that can never be
// processed; the trigger moves it to the DLQ with Reason and counts it.
type InvalidChatEventError struct {
	Reason string
}

// Error implements error.
func (e *InvalidChatEventError) Error() string { return "invalid chat event: " + e.Reason }

// DecodeChatEvent parses and validates one chat-event body. It is a
// tolerant reader: unknown fields are ignored (a text field a producer
// wrongly adds is dropped, never kept); every known field is bounded. Every
// failure is an *InvalidChatEventError naming every problem at once.
func DecodeChatEvent(body []byte) (ChatEvent, error) {
	if len(body) > MaxChatEventBytes {
		return ChatEvent{}, &InvalidChatEventError{Reason: fmt.Sprintf("body of %d bytes is over the %d-byte bound", len(body), MaxChatEventBytes)}
	}
	var ev ChatEvent
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&ev); err != nil {
		return ChatEvent{}, &InvalidChatEventError{Reason: "not a JSON chat event: " + trimErr(err)}
	}
	if dec.More() {
		return ChatEvent{}, &InvalidChatEventError{Reason: "trailing data after the JSON object"}
	}
	if err := ev.Validate(); err != nil {
		return ChatEvent{}, err
	}
	ev.SentAt = ev.SentAt.UTC()
	return ev, nil
}

// Validate reports every problem with the event at once, joined into one
// *InvalidChatEventError.
func (e ChatEvent) Validate() error {
	var probs []string
	if e.SchemaVersion != ChatEventSchemaVersion {
		probs = append(probs, fmt.Sprintf("schema_version %d is not supported (want %d)", e.SchemaVersion, ChatEventSchemaVersion))
	}
	if p := roomIDProblem(e.RoomID); p != "" {
		probs = append(probs, p)
	}
	if p := idProblem("message_id", e.MessageID, maxMessageIDLen); p != "" {
		probs = append(probs, p)
	}
	if p := idProblem("sender_id", e.SenderID, maxSenderIDLen); p != "" {
		probs = append(probs, p)
	}
	if p := tokenProblem("sender_role", e.SenderRole); p != "" {
		probs = append(probs, p)
	}
	if p := tokenProblem("kind", e.Kind); p != "" {
		probs = append(probs, p)
	}
	if e.SentAt.IsZero() {
		probs = append(probs, "sent_at is missing")
	}
	if len(probs) > 0 {
		return &InvalidChatEventError{Reason: strings.Join(probs, "; ")}
	}
	return nil
}

// idProblem bounds an opaque id: it becomes a Redis set member and a log
// field, so it must be short, valid UTF-8 and free of control characters.
func idProblem(field, id string, max int) string {
	switch {
	case strings.TrimSpace(id) == "":
		return field + " is missing"
	case len(id) > max:
		return fmt.Sprintf("%s is longer than %d bytes", field, max)
	case !utf8.ValidString(id):
		return field + " is not valid UTF-8"
	case strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return field + " contains a control character"
	}
	return ""
}

// tokenProblem bounds an enumeration-like field: a lower-case token of at
// most maxEnumLen letters, digits and underscores.
func tokenProblem(field, v string) string {
	if v == "" {
		return field + " is missing"
	}
	if len(v) > maxEnumLen {
		return fmt.Sprintf("%s is longer than %d bytes", field, maxEnumLen)
	}
	for _, r := range v {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return field + " must be a lower-case token (a-z, 0-9, _)"
		}
	}
	return ""
}
