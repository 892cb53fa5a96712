package stages

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// The transcript block carries chat messages to a model as data. Each
// message is one JSON object per line between TranscriptOpen and
// TranscriptClose. encoding/json escapes '<', '>' and '&' as \u003c, \u003e
// and \u0026, so no chat text can ever contain the delimiters: a message
// that types "</chat_transcript>" arrives as inert escaped data.
const (
	TranscriptOpen  = "<chat_transcript>"
	TranscriptClose = "</chat_transcript>"
)

// TranscriptLine is one chat message as the model sees it. Sender ids are
// left out: models need roles, not user ids.
type TranscriptLine struct {
	ID       string `json:"id"`
	Role     string `json:"role"`
	At       string `json:"at"`
	Kind     string `json:"kind"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
}

// FormatTranscript renders messages as a delimited transcript block.
func FormatTranscript(msgs []pipeline.ChatMessage) string {
	return formatTranscript(msgs, false)
}

// FormatMarkedTranscript is FormatTranscript with every text datamarked
// (MarkData): the form the stages send.
func FormatMarkedTranscript(msgs []pipeline.ChatMessage) string {
	return formatTranscript(msgs, true)
}

func formatTranscript(msgs []pipeline.ChatMessage, marked bool) string {
	return formatBlock(TranscriptOpen, TranscriptClose, msgs, marked)
}

// formatBlock renders msgs as one JSON line each between open and close.
func formatBlock(open, close string, msgs []pipeline.ChatMessage, marked bool) string {
	var b strings.Builder
	b.WriteString(open)
	b.WriteByte('\n')
	for _, m := range msgs {
		line := TranscriptLine{
			ID: m.MessageID, Role: string(m.SenderRole), At: m.SentAt.UTC().Format(time.RFC3339),
			Kind: string(m.Kind), Text: m.Text, ImageURL: m.ImageURL,
		}
		if marked {
			line.Text = MarkData(line.Text)
		}
		// Marshal of this struct cannot fail: it holds only strings.
		j, _ := json.Marshal(line)
		b.Write(j)
		b.WriteByte('\n')
	}
	b.WriteString(close)
	return b.String()
}

// ErrNoTranscript is returned by ParseTranscript when the text holds no
// complete transcript block.
var ErrNoTranscript = errors.New("stages: no transcript block")

// ParseTranscript extracts the transcript lines from a prompt that contains
// one block written by FormatTranscript. It returns ErrNoTranscript when
// there is no complete block, and an error naming the line for a line that
// is not a TranscriptLine.
func ParseTranscript(prompt string) ([]TranscriptLine, error) {
	return parseBlock(prompt, TranscriptOpen, TranscriptClose, ErrNoTranscript)
}

// parseBlock reads the lines of the first open…close block of prompt, or
// returns missing when there is no complete one.
func parseBlock(prompt, open, close string, missing error) ([]TranscriptLine, error) {
	start := strings.Index(prompt, open)
	if start < 0 {
		return nil, missing
	}
	body := prompt[start+len(open):]
	end := strings.Index(body, close)
	if end < 0 {
		return nil, missing
	}
	body = body[:end]
	var out []TranscriptLine
	sc := bufio.NewScanner(strings.NewReader(body))
	// A nil buffer grows as lines need it, so short transcripts allocate little.
	sc.Buffer(nil, 4*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		var l TranscriptLine
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			return nil, fmt.Errorf("stages: %s line %d: %w", strings.Trim(open, "<>"), n, err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("stages: read %s: %w", strings.Trim(open, "<>"), err)
	}
	return out, nil
}
