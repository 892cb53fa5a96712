package stages

import (
	"errors"

	"github.com/chatguard/chatguard/pipeline"
)

// The context block carries the room's messages from just before the
// window: already reviewed with earlier windows, shown so that a short
// window (a real-time one, or an hour that cuts a conversation) is read
// with what led up to it. It has the transcript's line format and its
// escaping, so no chat text can open or close either block, and it comes
// before the transcript in the user message. Only the transcript's ids may
// be cited: the stages' instructions say so and the reviewer drops any
// context id an answer cites.
const (
	ContextOpen  = "<chat_context>"
	ContextClose = "</chat_context>"
)

// ErrNoContext is returned by ParseContext when the text holds no complete
// context block (a window reviewed without context).
var ErrNoContext = errors.New("stages: no context block")

// FormatContext renders the context messages as a delimited context block.
func FormatContext(msgs []pipeline.ChatMessage) string {
	return formatBlock(ContextOpen, ContextClose, msgs, false)
}

// FormatMarkedContext is FormatContext with every text datamarked: the
// form the stages send, as for the transcript.
func FormatMarkedContext(msgs []pipeline.ChatMessage) string {
	return formatBlock(ContextOpen, ContextClose, msgs, true)
}

// ParseContext extracts the lines of the context block of a prompt written
// with FormatContext. It returns ErrNoContext when there is none, and an
// error naming the line for a line that is not a TranscriptLine.
func ParseContext(prompt string) ([]TranscriptLine, error) {
	return parseBlock(prompt, ContextOpen, ContextClose, ErrNoContext)
}
