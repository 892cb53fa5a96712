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
	var b strings.Builder
	b.WriteString(TranscriptOpen)
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
	b.WriteString(TranscriptClose)
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
	start := strings.Index(prompt, TranscriptOpen)
	if start < 0 {
		return nil, ErrNoTranscript
	}
	body := prompt[start+len(TranscriptOpen):]
	end := strings.Index(body, TranscriptClose)
	if end < 0 {
		return nil, ErrNoTranscript
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
			return nil, fmt.Errorf("stages: transcript line %d: %w", n, err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("stages: read transcript: %w", err)
	}
	return out, nil
}
