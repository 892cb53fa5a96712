package llmsim

// A simple, deterministic token estimate: a run of ASCII bytes counts one
// token per 4 bytes (rounded up) and every other rune one token (a Hangul
// syllable is about a token in real tokenizers). Token boundaries never split
// a rune, so any prefix of whole tokens is valid UTF-8.

import (
	"math"
	"unicode/utf8"
)

// advanceTokens moves from byte offset off over at most n tokens of s and
// returns the new offset and the number of tokens passed.
func advanceTokens(s string, off, n int) (end, got int) {
	i := off
	for i < len(s) && got < n {
		if s[i] < utf8.RuneSelf {
			j := i + 1
			for j < len(s) && j-i < 4 && s[j] < utf8.RuneSelf {
				j++
			}
			i = j
		} else {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
		}
		got++
	}
	return i, got
}

// countTokens estimates the tokens of s.
func countTokens(s string) int {
	_, n := advanceTokens(s, 0, math.MaxInt)
	return n
}

// imageTokens is what one image part adds to the prompt (OpenAI's low-detail
// image cost).
const imageTokens = 85

// perMessageTokens is the chat template's overhead per message.
const perMessageTokens = 4
