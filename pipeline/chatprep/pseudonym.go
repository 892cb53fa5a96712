package chatprep

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// Pseudonyms replaces contact details with typed placeholders (<PHONE_1>,
// <EMAIL_1>, <ACCOUNT_1>, <CARD_1>, <RESIDENT_ID_1>, <MESSENGER_ID_1>)
// before text leaves for a third party, and puts them back in what comes
// back. One value gets one placeholder for the life of the Pseudonyms (one
// review), however it is spelled, so a model still sees that two messages
// give the same number. Rule signals are computed on the original text
// elsewhere; this only changes what is sent. Safe for concurrent use.
type Pseudonyms struct {
	mu     sync.Mutex
	byKey  map[string]string // normalized value -> placeholder
	orig   map[string]string // placeholder -> the value as first written
	counts map[SignalKind]int
}

// NewPseudonyms returns an empty table for one review.
func NewPseudonyms() *Pseudonyms {
	return &Pseudonyms{byKey: map[string]string{}, orig: map[string]string{}, counts: map[SignalKind]int{}}
}

var placeholderNames = map[SignalKind]string{
	SignalPhone: "PHONE", SignalEmail: "EMAIL", SignalBankAccount: "ACCOUNT", SignalCardNumber: "CARD",
	SignalResidentID: "RESIDENT_ID", SignalMessengerID: "MESSENGER_ID",
}

// Apply returns s with every contact detail replaced by its placeholder,
// and every value the table already holds replaced wherever it appears.
// DataMarker runes (the transcript's datamarking) are ignored while
// matching, and a marker inside a replaced value goes with it.
func (p *Pseudonyms) Apply(s string) string {
	if s == "" {
		return s
	}
	// plain is s without markers; pos maps plain's byte offsets to s's.
	var pb strings.Builder
	pos := make([]int, 0, len(s)+1)
	for i, r := range s {
		if r == DataMarker {
			continue
		}
		for k := 0; k < len(string(r)); k++ {
			pos = append(pos, i+k)
		}
		pb.WriteRune(r)
	}
	pos = append(pos, len(s))
	plain := pb.String()
	spans := p.placeholderSpans(plain, pos)
	if len(spans) == 0 {
		return p.Conceal(s)
	}
	slices.SortStableFunc(spans, func(a, b placeholderSpan) int { return a.from - b.from })
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		if sp.from < last {
			continue // overlaps a replaced value
		}
		b.WriteString(s[last:sp.from])
		b.WriteString(sp.ph)
		last = sp.to
	}
	b.WriteString(s[last:])
	// A value already given a placeholder is replaced wherever it appears,
	// even where the scan cannot recognise it without the words that
	// introduced it: a repair request echoes the pool's restored answer.
	return p.Conceal(b.String())
}

// placeholderSpan is a byte span of the marked text and the placeholder
// that replaces it.
type placeholderSpan struct {
	from, to int
	ph       string
}

// placeholderSpans finds the contact details of plain, gives each new
// value its placeholder, and returns their spans mapped through pos onto
// the marked text, in scan order.
func (p *Pseudonyms) placeholderSpans(plain string, pos []int) []placeholderSpan {
	n := Normalize(plain)
	var spans []placeholderSpan
	p.mu.Lock()
	defer p.mu.Unlock()
	var found []match
	if strings.TrimSpace(n.Text) != "" {
		found, _, _ = findContacts(lowerSameLen(n.Text))
	}
	for _, m := range found {
		name, ok := placeholderNames[m.kind]
		if !ok {
			continue
		}
		f, t := n.OrigSpan(m.start, m.end)
		if t <= f {
			continue
		}
		key := string(m.kind) + ":" + pseudoKey(n.Text[m.start:m.end])
		ph, seen := p.byKey[key]
		if !seen {
			p.counts[m.kind]++
			ph = fmt.Sprintf("<%s_%d>", name, p.counts[m.kind])
			p.byKey[key] = ph
			p.orig[ph] = plain[f:t]
		}
		spans = append(spans, placeholderSpan{pos[f], pos[t], ph})
	}
	return spans
}

// pseudoKey reduces a matched value to its letters and digits, lower case,
// so "010-1234-5678" and "010 1234 5678" share a placeholder.
func pseudoKey(v string) string {
	var b strings.Builder
	for _, r := range v {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// RestoreJSON puts the original values back into a JSON answer that
// quotes placeholders, escaped for a JSON string, so the answer validates
// against the transcript as if no placeholder had been sent.
func (p *Pseudonyms) RestoreJSON(content []byte) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.orig) == 0 || !strings.Contains(string(content), "<") {
		return content
	}
	pairs := make([]string, 0, 2*len(p.orig))
	for ph, v := range p.orig {
		j, _ := json.Marshal(v)
		pairs = append(pairs, ph, string(j[1:len(j)-1]))
	}
	return []byte(strings.NewReplacer(pairs...).Replace(string(content)))
}

// Conceal is the inverse of RestoreJSON for text that is about to be
// stored or logged: every original value the table holds, as it was
// written, becomes its placeholder again. A value restored into a model's
// answer is one the chat's context identified (a messenger id after
// "카톡 아이디"); out of that context Redact may not recognise it, so the
// review conceals before it redacts. Longer values go first, so a value
// that contains another is replaced whole.
func (p *Pseudonyms) Conceal(s string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.orig) == 0 || s == "" {
		return s
	}
	phs := make([]string, 0, len(p.orig))
	for ph := range p.orig {
		phs = append(phs, ph)
	}
	slices.SortFunc(phs, func(a, b string) int {
		return cmp.Or(len(p.orig[b])-len(p.orig[a]), strings.Compare(a, b))
	})
	pairs := make([]string, 0, 2*len(phs))
	for _, ph := range phs {
		pairs = append(pairs, p.orig[ph], ph)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// Len is how many distinct values have a placeholder.
func (p *Pseudonyms) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.orig)
}
