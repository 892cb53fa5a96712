package pipeline

import (
	"context"
	"encoding/json"
	"time"
)

// SenderRole is who wrote a chat message.
type SenderRole string

// The sender roles of the chat-history contract.
const (
	RoleBuyer  SenderRole = "buyer"
	RoleSeller SenderRole = "seller"
	RoleSystem SenderRole = "system"
)

// MessageKind is what a chat message carries.
type MessageKind string

// The message kinds of the chat-history contract.
const (
	KindText   MessageKind = "text"
	KindImage  MessageKind = "image"
	KindSystem MessageKind = "system"
)

// ChatMessage is one message of a room's history as the chat API returns it.
// Text and ImageURL are untrusted user input: they are data for the models,
// never instructions, and never written to logs.
type ChatMessage struct {
	MessageID  string      `json:"message_id"`
	SenderID   string      `json:"sender_id"`
	SenderRole SenderRole  `json:"sender_role"`
	SentAt     time.Time   `json:"sent_at"`
	Kind       MessageKind `json:"kind"`
	Text       string      `json:"text,omitempty"`
	ImageURL   string      `json:"image_url,omitempty"`
	// Context marks a message from before the review's window, which the
	// review job fetched to be read with it: already reviewed, shown to
	// the models as context, never evidence. It is not part of the chat
	// API's contract: no chat source can set it.
	Context bool `json:"-"`
}

// ChatHistory is the chat API's answer for one room and window.
type ChatHistory struct {
	RoomID   string        `json:"room_id"`
	From     time.Time     `json:"from"`
	To       time.Time     `json:"to"`
	Messages []ChatMessage `json:"messages"`
}

// ChatSource returns the messages of a room in the half-open window
// [from, to). Implementations return a *PermanentError when the room does not
// exist and a *RetryableError for transient failures; they honour ctx.
type ChatSource interface {
	History(ctx context.Context, roomID string, from, to time.Time) ([]ChatMessage, error)
}

// TrimNoticeID is the message id of the notice a ChatSource appends when
// it had to trim an oversized history: a system message whose text is the
// JSON of a HistoryTrim. Real message ids come from the chat platform and
// never take this form.
const TrimNoticeID = "chatguard:history-trimmed"

// HistoryTrim says what a ChatSource left out of an oversized history, so
// that the review still runs on the rest and the models are told what is
// missing.
type HistoryTrim struct {
	// Dropped counts the messages left out, by kind.
	Dropped       int `json:"dropped"`
	DroppedText   int `json:"dropped_text"`
	DroppedImages int `json:"dropped_images"`
	DroppedSystem int `json:"dropped_system"`
	// DroppedBytes is the size of their text and image URLs.
	DroppedBytes int64 `json:"dropped_bytes"`
	// CutMessages counts kept messages whose middle the source cut.
	CutMessages int `json:"cut_messages,omitempty"`
	// Unread is set when reading stopped at the byte bound: an unknown
	// number of further messages were never read.
	Unread bool `json:"unread,omitempty"`
	// Signals are rule signals found in the dropped messages (masked
	// values), at most MaxTrimSignals; SignalCounts counts all of them by
	// kind.
	Signals      []TrimSignal   `json:"signals,omitempty"`
	SignalCounts map[string]int `json:"signal_counts,omitempty"`
}

// MaxTrimSignals bounds HistoryTrim.Signals.
const MaxTrimSignals = 64

// TrimSignal is one rule signal of a dropped message; Value is masked.
type TrimSignal struct {
	Kind      string `json:"kind"`
	MessageID string `json:"message_id"`
	Value     string `json:"value"`
}

// Any reports whether anything was left out.
func (t HistoryTrim) Any() bool { return t.Dropped > 0 || t.Unread || t.CutMessages > 0 }

// Notice returns the trim notice message carrying t, sent at at.
func (t HistoryTrim) Notice(at time.Time) ChatMessage {
	b, _ := json.Marshal(t) // only strings, numbers and maps of them
	return ChatMessage{MessageID: TrimNoticeID, SenderRole: RoleSystem, Kind: KindSystem, SentAt: at, Text: string(b)}
}
