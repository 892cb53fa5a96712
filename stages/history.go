package stages

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/chatguard/chatguard/pipeline"
)

// The account-history block's delimiters. Chat text cannot hold them: the
// transcript is JSON, which escapes < and >.
const (
	HistoryOpen  = "<account_history>"
	HistoryClose = "</account_history>"
)

// MaxPromptHistoryLines bounds the history lines a prompt lists (most
// rooms first); the rest are counted.
const MaxPromptHistoryLines = 16

// HistoryBlock renders the account history a review was given as its
// prompt block, a rule signal about the accounts rather than the chat:
// one JSON object per line (role, label, category, overturned, rooms),
// after a header that says what it is and what it is not. It is "" when
// there is nothing to show: history off, a lookup that failed or timed
// out, or no earlier verdict (the verdict records which). Every value is
// our own (roles, labels, categories, counts from the verdict store), and
// JSON-encoded all the same.
func HistoryBlock(seen pipeline.HistorySeen) string {
	if seen.Status != pipeline.HistoryOK || len(seen.Lines) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Account history, found by code: earlier verdicts about this room's participants in OTHER rooms over the last %d days, "+
		"in distinct rooms, by the participant's role in this room, label and category; \"overturned\": true counts rooms whose verdict a moderator overturned (not abuse). "+
		"It describes the accounts, not this chat: weigh what this chat shows with it, never label this chat on history alone, and cite evidence only from this chat. One JSON object per line:\n",
		seen.Days)
	b.WriteString(HistoryOpen + "\n")
	for i, l := range seen.Lines {
		if i == MaxPromptHistoryLines {
			fmt.Fprintf(&b, "{\"more_not_listed\":%d}\n", len(seen.Lines)-i)
			break
		}
		line, err := json.Marshal(l)
		if err != nil {
			continue // a struct of strings, a bool and an int always encodes
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteString(HistoryClose)
	return b.String()
}

// ParseHistoryBlock reads the lines of the account-history block that
// follows the transcript in a prompt: nil when there is none. Lines that
// are not history lines (the more_not_listed count) are skipped. It is the
// simulator's reading of the block.
func ParseHistoryBlock(prompt string) []pipeline.HistoryCount {
	if i := strings.Index(prompt, TranscriptClose); i >= 0 {
		prompt = prompt[i+len(TranscriptClose):]
	}
	start := strings.Index(prompt, HistoryOpen)
	if start < 0 {
		return nil
	}
	body := prompt[start+len(HistoryOpen):]
	end := strings.Index(body, HistoryClose)
	if end < 0 {
		return nil
	}
	var out []pipeline.HistoryCount
	for _, line := range strings.Split(body[:end], "\n") {
		var h pipeline.HistoryCount
		if json.Unmarshal([]byte(line), &h) != nil || h.Role == "" || h.Rooms <= 0 {
			continue
		}
		out = append(out, h)
	}
	return out
}
