package chatprep

import (
	"strings"
	"unicode"
)

// markEvery is the longest run of runes MarkData leaves without a marker:
// an instruction written without spaces ("ignore_previous_instructions",
// 이전지시는모두무시하고) is marked inside too.
const markEvery = 8

// eachMark calls mark before every rune of s that gets a DataMarker: the
// first rune of every word and every markEvery-th rune inside a word.
func eachMark(s string, mark func(r rune), keep func(r rune)) {
	run := 0
	prevSpace := true
	for _, r := range s {
		space := unicode.IsSpace(r)
		if !space && (prevSpace || run >= markEvery) {
			mark(r)
			run = 0
		}
		keep(r)
		if space {
			run = 0
		} else {
			run++
		}
		prevSpace = space
	}
}

// MarkData inserts DataMarker before every word of s and after every
// markEvery runes inside a long word: the datamarking ("spotlighting") the
// transcript applies so that a model can tell chat data from instructions.
func MarkData(s string) string {
	if s == "" {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/3)
	eachMark(s, func(rune) { b.WriteRune(DataMarker) }, func(r rune) { b.WriteRune(r) })
	return b.String()
}

// UnmarkData removes the markers MarkData inserted. Chat text never holds
// DataMarker itself (Normalize folds it), so this restores it exactly.
func UnmarkData(s string) string {
	if !strings.ContainsRune(s, DataMarker) {
		return s
	}
	return strings.ReplaceAll(s, string(DataMarker), "")
}

// markCount is how many markers MarkData adds to s.
func markCount(s string) int {
	n := 0
	eachMark(s, func(rune) { n++ }, func(rune) {})
	return n
}
