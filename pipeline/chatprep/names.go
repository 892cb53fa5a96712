package chatprep

import (
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// A person's name is detectable only where the chat says it is one: after
// 예금주 (account holder), 입금자(명) (depositor), 받는/보내는 분, 이름,
// 성함, 실명, 명의 or "name"; before 이름 or 명의 ("'서하은' 이름으로",
// "정민호 명의로"); or an English name of one or two capitalised words
// after "name (is)". Names elsewhere are not detectable without a model
// and stay as written.
//
// A Korean word near a keyword is taken for a name when it reads as one:
// two to four syllables once a trailing particle or copula is dropped
// ("김민준으로" is 김민준), and either written in quotes or starting with
// a common surname and not one of the everyday words that do (정확히,
// 나중에, 변경). The particles themselves (을, 으로) are never masked.
var (
	nameKeyRe = regexp.MustCompile(`(?i)예금주|입금자\s?명?|받는\s?(?:분|사람)|보내는\s?(?:분|사람)|이름|성함|실명|명의|\bname(?:\s+is)?\b`)
	// englishNameRe finds an English name after "name (is)".
	englishNameRe = regexp.MustCompile(`(?i:\bname(?:\s+is)?)\s*[:=-]?\s*([A-Z][a-z]+(?:\s[A-Z][a-z]+)?)(?:$|[^A-Za-z가-힣])`)
)

// keyParticles may follow a keyword, attached to it ("입금자명을").
var keyParticles = []string{"으로", "이란", "은", "는", "이", "가", "을", "를", "로", "도", "란", "의", "에"}

// nameSuffixes may follow a name, attached to it ("김민준으로",
// "남궁민수예요"); longer ones first.
var nameSuffixes = []string{
	"입니다", "이에요", "이예요", "으로요", "이고요", "이구요", "으로", "에게", "한테", "예요", "에요", "이요", "이고",
	"님", "씨", "로", "요", "을", "를", "은", "는", "의", "께", "가", "이",
}

// surnames are the common Korean surnames a name unquoted must start with.
// Syllables that start too many everyday words (가, 어, 예, 계) are left out.
var surnames = func() map[string]bool {
	out := map[string]bool{}
	for _, s := range strings.Fields(`김 이 박 최 정 강 조 윤 장 임 한 오 서 신 권 황 안 송 전 홍 유 류 고 문 양 손 배 백 허 남 심 노 하 곽 성 차
		주 우 구 민 진 지 엄 채 원 천 방 공 현 함 변 염 여 추 도 소 석 선 설 마 길 연 위 표 명 기 반 라 나 왕 금 옥 육 인 맹 제 모 탁 국 은 편 용`) {
		out[s] = true
	}
	return out
}()

// compoundSurnames are the two-syllable surnames (a four-syllable name).
var compoundSurnames = []string{"남궁", "황보", "제갈", "선우", "독고", "사공", "서문"}

// notNames are everyday words near a name keyword that read like a name:
// they start with a common surname and have a name's length.
var notNames = func() map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.Fields(`이름 성함 실명 명의 예금주 입금자 입금자명 받는분 보내는분 이거 이걸 이건 이것 이번 이미 이제 이따 이따가
		이렇게 이대로 이쪽 이분 정확히 정확하게 정말 정보 정도 제가 제대로 제발 변경 나중 나중에 남편 엄마 아빠 인증 주소 전화 전화번호
		전부 전달 모두 모르 본인 계좌 통장 한번 한글 영어 영문 성명 성별 신분증 신청 확인 그대로 가게 상품 친구 동생 가족 회사 오늘
		내일 지금 다시 다른 동일 같은 조금 원래 진짜 마지막 안전결제 은행 기재 입력 변경해 수정 주세요`) {
		out[w] = true
	}
	return out
}()

// verbEndings end words that are verbs, not names ("주세요", "되세요").
var verbEndings = []string{"세요", "해요", "까요", "니다", "시면", "주시", "드려", "드릴", "게요", "어요", "아요", "워요", "해서", "하고", "하면", "했어", "겠", "습"}

// maskNames keeps the first character of every detectable name and
// masks the rest ("예금주 홍길동" → "예금주 홍**").
func maskNames(s string) string {
	if !strings.ContainsAny(s, "예입받보이성실명nN") {
		return s
	}
	var spans [][2]int
	for _, k := range nameKeyRe.FindAllStringIndex(s, -1) {
		if from, to, ok := koreanNameAfter(s, k[1]); ok {
			spans = append(spans, [2]int{from, to})
		}
		if kw := s[k[0]:k[1]]; kw == "이름" || kw == "명의" {
			if from, to, ok := koreanNameBefore(s, k[0]); ok {
				spans = append(spans, [2]int{from, to})
			}
		}
	}
	for _, m := range englishNameRe.FindAllStringSubmatchIndex(s, -1) {
		spans = append(spans, [2]int{m[2], m[3]})
	}
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		if sp[0] < last {
			continue // the same name found from both sides
		}
		b.WriteString(s[last:sp[0]])
		name := s[sp[0]:sp[1]]
		_, size := utf8.DecodeRuneInString(name)
		b.WriteString(name[:size])
		for _, r := range name[size:] {
			if r == ' ' {
				b.WriteRune(r)
			} else {
				b.WriteByte('*')
			}
		}
		last = sp[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// koreanNameAfter finds a name right after a keyword ending at i: an
// optional attached particle, at least one separator (space, ':', '=',
// '-', a quote), then the name.
func koreanNameAfter(s string, i int) (int, int, bool) {
	for _, p := range keyParticles {
		if strings.HasPrefix(s[i:], p) {
			i += len(p)
			break
		}
	}
	j, quoted := i, false
	for j < len(s) {
		r, size := utf8.DecodeRuneInString(s[j:])
		if !strings.ContainsRune(" \t:=-", r) && !isQuote(r) {
			break
		}
		quoted = quoted || isQuote(r)
		j += size
	}
	if j == i {
		return 0, 0, false
	}
	end := j
	for end < len(s) {
		r, size := utf8.DecodeRuneInString(s[end:])
		if !isHangulSyllable(r) {
			break
		}
		end += size
	}
	if end < len(s) {
		if r, _ := utf8.DecodeRuneInString(s[end:]); isWordRune(r) {
			return 0, 0, false // a name runs into Latin letters or digits
		}
	}
	// A closing quote right after the word bounds the name.
	closed := false
	if r, _ := utf8.DecodeRuneInString(s[end:]); quoted && isQuote(r) {
		closed = true
	}
	n, ok := nameIn(s[j:end], quoted, !closed)
	return j, j + n, ok
}

// koreanNameBefore finds a name right before the keyword (이름, 명의)
// starting at i, set apart from it by spaces or a closing quote.
func koreanNameBefore(s string, i int) (int, int, bool) {
	j, quoted := i, false
	for j > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:j])
		if r != ' ' && !isQuote(r) {
			break
		}
		quoted = quoted || isQuote(r)
		j -= size
	}
	if j == i {
		return 0, 0, false
	}
	start := j
	for start > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:start])
		if !isHangulSyllable(r) {
			break
		}
		start -= size
	}
	if start > 0 {
		if r, _ := utf8.DecodeLastRuneInString(s[:start]); isWordRune(r) {
			return 0, 0, false
		}
	}
	word := s[start:j]
	if n, ok := nameIn(word, quoted, false); ok && n == len(word) {
		return start, j, true
	}
	return 0, 0, false
}

// nameIn reports whether word, a run of Hangul syllables, is a name,
// and the name's byte length: the word itself, or with strip what is
// left of it once a trailing particle or copula is dropped ("김민준으로").
// A word closed by a quote or set before 이름 is not stripped: it is all
// name ("서하은" does not end in the particle 은).
func nameIn(word string, quoted, strip bool) (int, bool) {
	cands := []string{word}
	if strip {
		for _, suf := range nameSuffixes {
			if rest, ok := strings.CutSuffix(word, suf); ok && utf8.RuneCountInString(rest) >= 2 {
				cands = append(cands, rest)
				break
			}
		}
	}
	for _, c := range cands {
		if notNames[c] {
			return 0, false
		}
	}
	if !quoted && isVerb(word) {
		return 0, false
	}
	for _, c := range cands {
		if looksLikeName(c, quoted) {
			return len(c), true
		}
	}
	return 0, false
}

// copulas end a name stated as a sentence ("김철수입니다").
var copulas = []string{"입니다", "이에요", "이예요", "예요", "에요", "이고요", "이구요", "이요", "이고"}

// isVerb reports a word, once a copula is dropped, with a verb's ending.
func isVerb(word string) bool {
	for _, c := range copulas {
		if rest, ok := strings.CutSuffix(word, c); ok && utf8.RuneCountInString(rest) >= 2 {
			word = rest
			break
		}
	}
	for _, e := range verbEndings {
		if strings.HasSuffix(word, e) {
			return true
		}
	}
	return false
}

// looksLikeName: two to four syllables; unquoted, a common surname first
// and three syllables at most, or four after a two-syllable surname.
func looksLikeName(name string, quoted bool) bool {
	n := utf8.RuneCountInString(name)
	if n < 2 || n > 4 {
		return false
	}
	if quoted {
		return true
	}
	if n == 4 {
		return slices.ContainsFunc(compoundSurnames, func(c string) bool { return strings.HasPrefix(name, c) })
	}
	_, size := utf8.DecodeRuneInString(name)
	return surnames[name[:size]]
}

// isQuote reports the quote marks a name may be written in.
func isQuote(r rune) bool { return strings.ContainsRune(`'"‘’“”「」『』`, r) }

// isWordRune is a letter or digit outside Hangul syllables: a Hangul run
// that touches one is part of a longer token, not a name.
func isWordRune(r rune) bool {
	return r < utf8.RuneSelf && isWordByte(byte(r))
}
