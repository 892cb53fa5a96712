package stages

import (
	"strings"
	"unicode"

	"github.com/chatguard/chatguard/pipeline/chatprep"
)

// DataMarker is interleaved through every chat text the models see
// (datamarking, the "spotlighting" defence against prompt injection): the
// system prompt tells the model that text carrying it is data. Chat text
// never contains it (chatprep.Normalize folds it to '^'), so a chat cannot
// forge unmarked text, and UnmarkData restores the text exactly.
const DataMarker = chatprep.DataMarker

// markEvery is the longest run of runes MarkData leaves without a marker:
// an instruction written without spaces ("ignore_previous_instructions",
// 이전지시는모두무시하고) is marked inside too.
const markEvery = 8

// MarkData inserts DataMarker before every word of s and after every
// markEvery runes inside a long word.
func MarkData(s string) string {
	if s == "" {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/3)
	run := 0
	prevSpace := true
	for _, r := range s {
		space := unicode.IsSpace(r)
		if !space && (prevSpace || run >= markEvery) {
			b.WriteRune(DataMarker)
			run = 0
		}
		b.WriteRune(r)
		if space {
			run = 0
		} else {
			run++
		}
		prevSpace = space
	}
	return b.String()
}

// UnmarkData removes the markers MarkData inserted.
func UnmarkData(s string) string {
	if !strings.ContainsRune(s, DataMarker) {
		return s
	}
	return strings.ReplaceAll(s, string(DataMarker), "")
}
