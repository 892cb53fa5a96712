package chatprep

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// DataMarker is the character the transcript interleaves through chat text
// (datamarking, see stages.MarkData). Normalize folds any occurrence typed
// into a chat to '^', so a chat can never forge marked or unmarked text.
const DataMarker = 'ˆ' // U+02C6 MODIFIER LETTER CIRCUMFLEX ACCENT

// Normalized is chat text in the form the rule signals match: invisible
// format characters removed, Unicode NFKC applied (full-width digits and
// letters, circled and mathematical digits become ASCII), and look-alike
// punctuation folded (dashes to '-', middle dots and ideographic full stops
// to '.'). It keeps a map back to the original text, so a match found in
// Text can be masked or cited in the original.
type Normalized struct {
	// Text is the normalized text; always valid UTF-8.
	Text string
	// Orig is the text that was normalized.
	Orig string
	// src[i] is the byte offset in Orig of the start of the segment that
	// produced Text[i]; src[len(Text)] is len(Orig). It never decreases.
	src []int32
}

// Normalize returns s normalized, with its offset map. It is safe on any
// input, invalid UTF-8 included (an invalid byte becomes U+FFFD).
func Normalize(s string) Normalized {
	// out and src are threaded through the helpers by value, not held in
	// a struct, so a short text's out can stay on the stack.
	out := make([]byte, 0, len(s))
	src := make([]int32, 0, len(s)+1)
	var seg []byte // the current normalization segment, invisibles removed
	segAt := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case dropRune(r):
			// Invisible: splits a word or number without showing.
		case isCompatJamo(r):
			// NFKC would turn ㅋㅌ into conjoining jamo that no longer match
			// (or render) as typed; keep them as they are.
			out, src = emitSegment(out, src, seg, segAt)
			seg = seg[:0]
			out, src = emitRune(out, src, r, i)
		default:
			if len(seg) > 0 && norm.NFKC.PropertiesString(s[i:]).BoundaryBefore() {
				out, src = emitSegment(out, src, seg, segAt)
				seg = seg[:0]
			}
			if len(seg) == 0 {
				segAt = i
			}
			seg = utf8.AppendRune(seg, r)
		}
		i += size
	}
	out, src = emitSegment(out, src, seg, segAt)
	src = append(src, int32(len(s)))
	return Normalized{Text: string(out), Orig: s, src: src}
}

// emitRune appends r, folded, to out, and to src the original byte offset
// at once for each byte it takes; a rune that folds to an invisible one is
// dropped.
func emitRune(out []byte, src []int32, r rune, at int) ([]byte, []int32) {
	r = foldRune(r)
	if dropRune(r) {
		return out, src
	}
	start := len(out)
	out = utf8.AppendRune(out, r)
	for range len(out) - start {
		src = append(src, int32(at))
	}
	return out, src
}

// emitSegment appends a normalization segment that starts at the original
// byte offset at, in NFKC, as emitRune appends each of its runes.
func emitSegment(out []byte, src []int32, seg []byte, at int) ([]byte, []int32) {
	if len(seg) == 0 {
		return out, src
	}
	r, size := utf8.DecodeRune(seg)
	if size == len(seg) && (r < utf8.RuneSelf || (r >= 0xAC00 && r <= 0xD7A3)) {
		// ASCII and precomposed Hangul alone are their own NFKC.
		return emitRune(out, src, r, at)
	}
	for _, r := range norm.NFKC.String(string(seg)) {
		out, src = emitRune(out, src, r, at)
	}
	return out, src
}

// OrigSpan maps the byte span [start, end) of Text to the span of Orig
// that produced it. A span that ends inside a segment (one original
// character that became several, such as ⑫) is widened to the whole
// segment.
func (n Normalized) OrigSpan(start, end int) (int, int) {
	if len(n.src) == 0 {
		return 0, 0
	}
	start = min(max(start, 0), len(n.Text))
	end = min(max(end, start), len(n.Text))
	os := int(n.src[start])
	if end == start {
		return os, os
	}
	last := n.src[end-1]
	k := end
	for k < len(n.Text) && n.src[k] == last {
		k++
	}
	return os, int(n.src[k])
}

// dropRune reports characters that are invisible or carry no meaning in a
// chat and are used to split words and numbers past filters: format
// characters (zero-width space and joiners, U+2060 word joiner, U+FEFF, soft
// hyphen, bidi controls, tag characters), variation selectors, enclosing
// marks (the keycap of 1️⃣), the combining grapheme joiner and the Hangul
// fillers.
func dropRune(r rune) bool {
	switch {
	case r < 0x80:
		return false
	case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Me, r), unicode.Is(unicode.Variation_Selector, r):
		return true
	}
	switch r {
	case 0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x17B4, 0x17B5:
		return true
	}
	return false
}

// isCompatJamo reports Hangul Compatibility Jamo (ㄱ..ㆎ), which Korean
// chats use on their own (ㅋㅋ, ㅇㅇ, ㅋㅌ for 카톡).
func isCompatJamo(r rune) bool { return r >= 0x3131 && r <= 0x318E }

// foldRune maps look-alike punctuation NFKC leaves alone to the ASCII the
// patterns expect, and the data marker to '^'.
func foldRune(r rune) rune {
	switch r {
	case DataMarker:
		return '^'
	case 0x2010, 0x2011, 0x2012, 0x2013, 0x2014, 0x2015, 0x2043, 0x2212, 0x2E3A, 0x2E3B, 0x30FC, 0xFE58, 0x23AF, 0x2500, 0x2501, 0x2796:
		return '-' // dashes, minus, box-drawing lines, the long vowel mark
	case 0x00B7, 0x2022, 0x2027, 0x2219, 0x22C5, 0x30FB, 0x3002, 0x318D, 0x16EB, 0x2E31:
		return '.' // middle dots, bullets, the ideographic full stop
	case 0x2800, 0x3000:
		return ' ' // braille blank (an invisible "space"), ideographic space
	case 0x2018, 0x2019, 0x201B, 0x2032:
		return '\''
	case 0x201C, 0x201D, 0x201F, 0x2033:
		return '"'
	}
	return r
}
