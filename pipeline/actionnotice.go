package pipeline

import "strings"

// ActionNoticePrefix begins the message id under which the chat service
// shows a protective action's notice in a room: the prefix, then the
// action's idempotency key. The chat service writes the notice as a system
// message (sender_role and kind "system") and never announces it on
// chat-events. The id form lets the reviewer tell chatguard's own notices
// from the chat's trade notices: a notice says what chatguard did, so the
// next window reads it as context and never as evidence of anything.
const ActionNoticePrefix = "chatguard:notice:"

// ActionNoticeID returns the message id of the notice of the action with
// this idempotency key.
func ActionNoticeID(idempotencyKey string) string { return ActionNoticePrefix + idempotencyKey }

// IsActionNotice reports whether m is the notice of a protective action:
// a system message under an ActionNoticeID. A buyer's or seller's message
// never is, whatever its id.
func IsActionNotice(m ChatMessage) bool {
	return m.SenderRole == RoleSystem && m.Kind == KindSystem && strings.HasPrefix(m.MessageID, ActionNoticePrefix)
}

// IsActionNoticeEvent reports whether a chat event announces an action's
// notice, which a chat service should never publish and the trigger never
// acts on: a notice must not open a review window of its own.
func IsActionNoticeEvent(e ChatEvent) bool {
	return e.SenderRole == string(RoleSystem) && strings.HasPrefix(e.MessageID, ActionNoticePrefix)
}
