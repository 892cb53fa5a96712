package chatprep

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// nameRe finds a person's name where the chat says it is one: after
// 예금주 (account holder), 입금자(명) (depositor), 받는/보내는 분, 이름,
// 성함, 실명, 명의 or "name", a Korean name of two to four syllables
// standing alone, or an English name of one or two capitalised words.
// Names elsewhere are not detectable without a model and stay as written.
var nameRe = regexp.MustCompile(`(?i:예금주|입금자\s?명?|받는\s?(?:분|사람)|보내는\s?(?:분|사람)|이름|성함|실명|명의|name(?:\s+is)?)\s*(?:(?:은|는|이|가)\s|[:=-])?\s*` +
	`([가-힣]{2,4}|[A-Z][a-z]+(?:\s[A-Z][a-z]+)?)(?:$|[^가-힣A-Za-z])`)

// maskNames keeps the first character of every detectable name and
// masks the rest ("예금주 홍길동" → "예금주 홍**").
func maskNames(s string) string {
	if !strings.ContainsAny(s, "예입받보이성실명nN") {
		return s
	}
	ms := nameRe.FindAllStringSubmatchIndex(s, -1)
	if len(ms) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		from, to := m[2], m[3]
		b.WriteString(s[last:from])
		name := s[from:to]
		_, size := utf8.DecodeRuneInString(name)
		b.WriteString(name[:size])
		for _, r := range name[size:] {
			if r == ' ' {
				b.WriteRune(r)
			} else {
				b.WriteByte('*')
			}
		}
		last = to
	}
	b.WriteString(s[last:])
	return b.String()
}
