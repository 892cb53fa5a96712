package chatprep

import (
	"regexp"
	"slices"
	"strings"
)

// anchored is a pattern run only near its anchors: literal substrings that
// every match contains. Go's regexp engine is linear but slow on long
// alternations, and a chat message can be 100 KB; scanning only windows
// around rare anchors keeps a long message cheap.
type anchored struct {
	re      *regexp.Regexp
	anchors []string
	// back and ahead bound how far a match reaches before and after an
	// anchor, in bytes.
	back, ahead int
}

func anchor(re string, back, ahead int, anchors ...string) anchored {
	return anchored{re: regexp.MustCompile(re), anchors: anchors, back: back, ahead: ahead}
}

// windows returns the merged byte windows of s around the anchors.
func (a anchored) windows(s string) [][2]int {
	var ws [][2]int
	for _, an := range a.anchors {
		for off := 0; ; {
			i := strings.Index(s[off:], an)
			if i < 0 {
				break
			}
			p := off + i
			ws = append(ws, [2]int{max(p-a.back, 0), min(p+len(an)+a.ahead, len(s))})
			off = p + len(an)
		}
	}
	if len(ws) < 2 {
		return ws
	}
	slices.SortFunc(ws, func(x, y [2]int) int { return x[0] - y[0] })
	out := ws[:1]
	for _, w := range ws[1:] {
		last := &out[len(out)-1]
		if w[0] <= last[1] {
			last[1] = max(last[1], w[1])
			continue
		}
		out = append(out, w)
	}
	return out
}

// findAll returns the submatch indices of every match, as
// regexp.FindAllStringSubmatchIndex on s would (within the reach).
func (a anchored) findAll(s string) [][]int {
	var out [][]int
	for _, w := range a.windows(s) {
		for _, m := range a.re.FindAllStringSubmatchIndex(s[w[0]:w[1]], -1) {
			for k := range m {
				if m[k] >= 0 {
					m[k] += w[0]
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// find returns the span of the first match, or nil.
func (a anchored) find(s string) []int {
	for _, w := range a.windows(s) {
		if loc := a.re.FindStringIndex(s[w[0]:w[1]]); loc != nil {
			return []int{loc[0] + w[0], loc[1] + w[0]}
		}
	}
	return nil
}
