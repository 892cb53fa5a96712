package pipeline

import (
	"context"
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
