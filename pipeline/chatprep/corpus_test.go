package chatprep

//go:generate go test -run ^TestGenerateCorpora$ . -args -update

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/chatguard/chatguard/internal/golden"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// update rewrites the checked-in corpora from their generators:
// go test ./pipeline/chatprep -run TestGenerateCorpora -args -update
var update = flag.Bool("update", false, "rewrite testdata corpora from their generators")

// corpusSeed fixes the generators: the same seed always writes the same
// files, so a diff in testdata is a change of the generator.
const corpusSeed = 13

// signalCase is one line of testdata/signals.jsonl.
type signalCase struct {
	ID        string `json:"id"`
	Technique string `json:"technique"`
	Text      string `json:"text"`
	// Want are the signal kinds that must be found (empty: a hard
	// negative, where no contact or identity signal may be found).
	Want []string `json:"want"`
	// Secret is the canonical value that must never survive Redact
	// (digits, or an e-mail local part, or a messenger id).
	Secret string `json:"secret,omitempty"`
}

// TestCorporaAreGenerated checks the corpora against their generators
// (-update rewrites them).
func TestCorporaAreGenerated(t *testing.T) {
	writeJSONL(t, "testdata/signals.jsonl", genSignalCorpus())
	writeJSONL(t, "testdata/long.jsonl", genLongCorpus())
	writeJSONL(t, "testdata/injection_text.jsonl", genInjectionTextCorpus())
	writeJSONL(t, "testdata/payment.jsonl", genPaymentCorpus())
}

func writeJSONL[T any](t *testing.T, path string, rows []T) {
	t.Helper()
	var b strings.Builder
	for _, r := range rows {
		j, err := json.Marshal(r)
		require.NoError(t, err)
		b.Write(j)
		b.WriteByte('\n')
	}
	golden.Check(t, path, []byte(b.String()), *update, "go test ./pipeline/chatprep -run TestCorporaAreGenerated -args -update")
}

func readJSONL[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err, "generate it with: go test -run TestGenerateCorpora -update")
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var r T
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		out = append(out, r)
	}
	require.NoError(t, sc.Err())
	return out
}

// --- the obfuscations -------------------------------------------------------------

var (
	hangulOf   = []string{"공", "일", "이", "삼", "사", "오", "육", "칠", "팔", "구"}
	circled    = []rune("⓪①②③④⑤⑥⑦⑧⑨")
	mathBold   = []rune("𝟎𝟏𝟐𝟑𝟒𝟓𝟔𝟕𝟖𝟗")
	invisibles = []string{"\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u202e", "\u2066", "\u180e", "\u034f"}
)

// digitObfuscations write a number given as groups of digits.
var digitObfuscations = []struct {
	name string
	fn   func(r *rand.Rand, groups []string) string
}{
	{"plain", func(_ *rand.Rand, g []string) string { return strings.Join(g, "-") }},
	{"fullwidth", func(_ *rand.Rand, g []string) string {
		return strings.Map(func(c rune) rune {
			switch {
			case c >= '0' && c <= '9':
				return '０' + c - '0'
			case c == '-':
				return '－'
			}
			return c
		}, strings.Join(g, "-"))
	}},
	{"fullwidth_dots", func(_ *rand.Rand, g []string) string {
		return strings.Map(func(c rune) rune {
			if c >= '0' && c <= '9' {
				return '０' + c - '0'
			}
			return c
		}, strings.Join(g, "．"))
	}},
	{"zero_width", func(r *rand.Rand, g []string) string {
		var b strings.Builder
		for i, c := range strings.Join(g, "") {
			if i > 0 {
				b.WriteString(invisibles[r.IntN(len(invisibles))])
			}
			b.WriteRune(c)
		}
		return b.String()
	}},
	{"bidi_controls", func(_ *rand.Rand, g []string) string {
		return "\u2066" + strings.Join(g, "\u202c-\u202d") + "\u2069"
	}},
	{"spaced_digits", func(_ *rand.Rand, g []string) string {
		return strings.Join(strings.Split(strings.Join(g, ""), ""), " ")
	}},
	{"wide_separators", func(_ *rand.Rand, g []string) string { return strings.Join(g, " - ") }},
	{"ideographic_dots", func(_ *rand.Rand, g []string) string { return strings.Join(g, "。") }},
	{"middle_dots", func(_ *rand.Rand, g []string) string { return strings.Join(g, "ㆍ") }},
	{"em_dash", func(_ *rand.Rand, g []string) string { return strings.Join(g, "—") }},
	{"hangul_digits", func(_ *rand.Rand, g []string) string {
		return mapDigits(strings.Join(g, "-"), func(d int) string { return hangulOf[d] })
	}},
	{"spaced_hangul", func(_ *rand.Rand, g []string) string {
		var parts []string
		for _, c := range strings.Join(g, "") {
			parts = append(parts, hangulOf[c-'0'])
		}
		return strings.Join(parts, " ")
	}},
	{"mixed_hangul_arabic", func(r *rand.Rand, g []string) string {
		return mapDigits(strings.Join(g, " "), func(d int) string {
			if r.IntN(2) == 0 {
				return hangulOf[d]
			}
			return fmt.Sprint(d)
		})
	}},
	{"circled", func(_ *rand.Rand, g []string) string {
		return mapDigits(strings.Join(g, "-"), func(d int) string { return string(circled[d]) })
	}},
	{"math_bold", func(_ *rand.Rand, g []string) string {
		return mapDigits(strings.Join(g, " "), func(d int) string { return string(mathBold[d]) })
	}},
	{"keycap_emoji", func(_ *rand.Rand, g []string) string {
		return mapDigits(strings.Join(g, " "), func(d int) string { return fmt.Sprintf("%d\ufe0f\u20e3", d) })
	}},
}

func mapDigits(s string, f func(int) string) string {
	var b strings.Builder
	for _, c := range s {
		if c >= '0' && c <= '9' {
			b.WriteString(f(int(c - '0')))
		} else {
			b.WriteRune(c)
		}
	}
	return b.String()
}

func digitsOf(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteByte(byte('0' + r.IntN(10)))
	}
	return b.String()
}

func genPhone(r *rand.Rand) []string {
	return []string{"010", digitsOf(r, 4), digitsOf(r, 4)}
}

func genCard(r *rand.Rand) []string {
	d := "4" + digitsOf(r, 14)
	for c := '0'; c <= '9'; c++ {
		if luhn(d + string(c)) {
			d += string(c)
			break
		}
	}
	return []string{d[0:4], d[4:8], d[8:12], d[12:16]}
}

func genResident(r *rand.Rand) []string {
	for {
		d := fmt.Sprintf("%02d%02d%02d%d%s", r.IntN(100), 1+r.IntN(12), 1+r.IntN(28), 1+r.IntN(4), digitsOf(r, 5))
		for c := '0'; c <= '9'; c++ {
			if residentChecksum(d + string(c)) {
				return []string{d[:6], d[6:] + string(c)}
			}
		}
	}
}

// genAccount returns an account number (3-2-6 style, 11 digits, or a
// 13-digit one that is not a valid resident number).
func genAccount(r *rand.Rand, thirteen bool) []string {
	if !thirteen {
		return []string{digitsOf(r, 3), digitsOf(r, 2), digitsOf(r, 6)}
	}
	for {
		g := []string{digitsOf(r, 4), digitsOf(r, 2), digitsOf(r, 7)}
		d := strings.Join(g, "")
		if !(residentShape(d) && residentChecksum(d)) {
			return g
		}
	}
}

var banks = []string{"국민은행", "신한은행", "농협", "카카오뱅크", "토스뱅크", "우리은행", "하나은행", "IBK기업은행", "국.민", "농 협", "케이뱅크", "새마을금고"}

var (
	phoneFrames = []string{
		"급하면 %s 로 문자주세요", "제 번호 %s 입니다 연락주세요", "여기 말고 %s 로 전화 주세요", "call me %s asap",
		"연락처: %s", "%s 여기로 ㄱㄱ", "번호 남겨요 %s",
	}
	cardFrames = []string{
		"결제 오류나서요 카드번호 %s 다시 보내주세요", "card %s exp 12/28", "이 카드로 할게요 %s", "%s 카드 결제 부탁",
	}
	residentFrames = []string{
		"본인확인용이라 주민번호 %s 보내드려요", "신분 확인 %s 입니다", "my resident number %s", "%s 이거 제 번호에요",
	}
	accountFrames = []string{
		"%s %s 김민수 입니다 선입금 부탁드려요", "입금은 %s %s 로 해주세요", "계좌 %s %s 예금주 박지훈", "%s %s 로 보내주시면 바로 발송",
	}
)

func genSignalCorpus() []signalCase {
	r := rand.New(rand.NewPCG(corpusSeed, 1))
	var out []signalCase
	add := func(tech, text string, secret string, want ...string) {
		out = append(out, signalCase{ID: fmt.Sprintf("s%04d", len(out)+1), Technique: tech, Text: text, Want: want, Secret: secret})
	}
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	for _, ob := range digitObfuscations {
		for range 3 {
			g := genPhone(r)
			add("phone/"+ob.name, fmt.Sprintf(pick(phoneFrames), ob.fn(r, g)), strings.Join(g, ""), string(SignalPhone))
		}
		for range 2 {
			g := genCard(r)
			add("card/"+ob.name, fmt.Sprintf(pick(cardFrames), ob.fn(r, g)), strings.Join(g, ""), string(SignalCardNumber))
		}
		for range 2 {
			g := genResident(r)
			add("resident/"+ob.name, fmt.Sprintf(pick(residentFrames), ob.fn(r, g)), strings.Join(g, ""), string(SignalResidentID))
		}
		for range 2 {
			g := genAccount(r, r.IntN(2) == 0)
			add("account/"+ob.name, fmt.Sprintf(pick(accountFrames), pick(banks), ob.fn(r, g)), strings.Join(g, ""), string(SignalBankAccount))
		}
	}
	// Thirteen-digit account numbers next to a bank: accounts, not
	// resident numbers.
	for range 8 {
		g := genAccount(r, true)
		add("account/13_digits_not_resident", fmt.Sprintf(pick(accountFrames), pick(banks), strings.Join(g, "-")), strings.Join(g, ""), string(SignalBankAccount))
	}
	// A phone number right next to a price or a date.
	for range 4 {
		g := genPhone(r)
		add("phone/next_to_price", fmt.Sprintf("%s %d원에 드릴게요 연락주세요", strings.Join(g, "-"), 10000*(1+r.IntN(90))), strings.Join(g, ""), string(SignalPhone))
		g = genPhone(r)
		add("phone/after_date", fmt.Sprintf("2026-12-0%d 에 연락 %s", 1+r.IntN(9), strings.Join(g, " ")), strings.Join(g, ""), string(SignalPhone))
	}
	// E-mails: plain and spelled out.
	locals := []string{"dealmaster", "kim.minsu88", "fast_seller", "jh.park", "sell4you", "happytrade"}
	emailForms := []struct {
		name string
		fn   func(local string) string
	}{
		{"plain", func(l string) string { return l + "@gmail.com" }},
		{"fullwidth_at", func(l string) string { return l + "＠naver．com" }},
		{"at_dot_words", func(l string) string { return l + " at gmail dot com" }},
		{"bracket_at_dot", func(l string) string { return l + "[at]naver[dot]com" }},
		{"paren_at_dot", func(l string) string { return l + " (at) daum (dot) net" }},
		{"golbaengi_jeom", func(l string) string { return l + " 골뱅이 naver 점 com" }},
		{"golbaengi_provider", func(l string) string { return l + " 골뱅이 네이버" }},
		{"at_daskeom", func(l string) string { return l + "@naver 닷컴" }},
		{"zero_width", func(l string) string { return l + "\u200b@\u200bgmail\u200b.com" }},
		{"spaced_at", func(l string) string { return l + " @ hanmail . net" }},
	}
	emailFrames := []string{"메일로 연락주세요 %s", "견적서는 %s 로 보내주세요", "email me: %s", "%s 이쪽으로 사진 주세요"}
	for _, f := range emailForms {
		for range 3 {
			l := locals[r.IntN(len(locals))]
			add("email/"+f.name, fmt.Sprintf(pick(emailFrames), f.fn(l)), l, string(SignalEmail))
		}
	}
	// Messenger ids and links.
	ids := []string{"deal8282", "fastdeal_kr", "quicksell99", "bestprice_01", "jh_store"}
	msgForms := []struct {
		name string
		fn   func(id string) string
	}{
		{"openchat_link", func(id string) string { return "오픈채팅 https://open.kakao.com/o/" + id + " 들어오세요" }},
		{"openchat_spaced", func(id string) string { return "open . kakao . com / o / " + id + " 로 오세요" }},
		{"openchat_fullwidth", func(id string) string { return "ｏｐｅｎ．ｋａｋａｏ．ｃｏｍ／ｏ／" + id }},
		{"telegram_link", func(id string) string { return "텔레로 와요 t.me/" + id }},
		{"telegram_handle", func(id string) string { return "텔레그램 @" + id + " 으로 연락주세요" }},
		{"telegram_colon", func(id string) string { return "tg: " + id + " 여기로 연락" }},
		{"line_link", func(id string) string { return "line.me/ti/p/~" + id + " add me" }},
		{"line_id", func(id string) string { return "라인 아이디 " + id + " 입니다" }},
		{"kakao_id", func(id string) string { return "카톡 아이디 " + id + " 추가해주세요" }},
		{"kakao_colon", func(id string) string { return "카톡: " + id }},
		{"kakao_jamo", func(id string) string { return "ㅋㅌ 아이디 " + id }},
		{"kakao_zero_width", func(id string) string { return "카\u200b톡 아이디 " + id }},
	}
	for _, f := range msgForms {
		for range 2 {
			id := ids[r.IntN(len(ids))]
			add("messenger/"+f.name, f.fn(id), id, string(SignalMessengerID))
		}
	}
	// Hard negatives: nothing here is a contact or identity detail.
	negatives := []string{
		"가격은 1,250,000원이고 네고 안돼요", "2026-11-30 14:00 에 강남역에서 뵐게요", "인증번호 482913 은 절대 알려주지 마세요",
		"CJ대한통운 송장번호 6543-2109-8765 입니다", "주문번호 2026113012345 확인 부탁드려요", "사이즈 270 이거 맞나요?",
		"텔레비전 팔아요 55인치", "see you at the station at 7", "모델명 SM-S928N 512GB 입니다", "일련번호 3821 9274 1123 정품이에요",
		"이거 사이즈 이백칠십 맞아요", "오늘 오후 오일장 가요", "네 앱 안에서 안전결제 버튼 눌러서 결제해주세요", "1 2 3 4 5 중에 골라주세요",
		"카드 결제 되나요?", "제가 일이 좀 있어서 이따 연락드릴게요", "우리 집 앞에서 2시 어때요", "하나 더 있어요 3만원",
		"할인 50% 10000원 20000원 30000원", "영수증 번호 1234-5678-9012-3456 입니다", "택배 발송했어요 등기번호 1234567890123",
		"IMEI 356938035643809 정상입니다", "we meet at gangnam station exit 2", "사 오 일 정도 걸려요",
	}
	for _, n := range negatives {
		add("negative", n, "")
	}
	return out
}

func TestSignalCorpus(t *testing.T) {
	t.Parallel()
	cases := readJSONL[signalCase](t, "testdata/signals.jsonl")
	require.GreaterOrEqual(t, len(cases), 200)
	contact := []SignalKind{SignalPhone, SignalBankAccount, SignalCardNumber, SignalResidentID, SignalEmail, SignalMessengerID}
	var missed, falsePos []string
	for _, c := range cases {
		got := FindSignals("m", c.Text)
		kinds := map[string]bool{}
		for _, s := range got {
			kinds[string(s.Kind)] = true
			// Every signal points at its match in the original text.
			require.True(t, s.Start >= 0 && s.End <= len(c.Text) && s.Start <= s.End, "%s: span %d..%d", c.ID, s.Start, s.End)
		}
		if len(c.Want) == 0 {
			for _, k := range contact {
				if kinds[string(k)] {
					falsePos = append(falsePos, fmt.Sprintf("%s %q: %s", c.ID, c.Text, k))
				}
			}
			continue
		}
		for _, w := range c.Want {
			if !kinds[w] {
				missed = append(missed, fmt.Sprintf("%s (%s) %q: want %s, got %v", c.ID, c.Technique, c.Text, w, kvs(got)))
			}
		}
		// The secret never survives masking, in any spelling.
		red := Redact(c.Text)
		require.NotContains(t, canonical(red), canonical(c.Secret), "%s: Redact(%q) = %q", c.ID, c.Text, red)
	}
	require.Empty(t, missed)
	require.Empty(t, falsePos)
}

// canonical reduces a text to what a reader would reconstruct: normalized,
// lower-cased, Hangul digits read as digits, separators removed.
func canonical(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(Normalize(s).Text) {
		if d, ok := hangulDigits[r]; ok {
			b.WriteByte(d)
			continue
		}
		if r == ' ' || r == '-' || r == '.' || r == '_' {
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
