package pipeline

import (
	"strings"
	"unicode/utf8"
)

// ClipRunes returns s cut to at most n runes, never inside a rune, with
// invalid UTF-8 replaced: every text that reaches a column, a log field or
// an error message is bounded this way, not by bytes (a byte cut splits a
// Hangul syllable and MySQL refuses the row).
func ClipRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= n {
		return s
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}
