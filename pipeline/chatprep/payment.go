package chatprep

import "strings"

// The payment rule signals: the two signs of a scam script the contact
// signals miss. A prepayment request carries no number when the account
// comes later (or in an image), and a fake safe-payment page is a link the
// URL signal reports only as a host, indistinguishable from a meet-up map.
const (
	// SignalPrepayment is a request to pay before the goods change hands,
	// outside the app: 선입금, 계좌이체, "deposit first". Value is the cue
	// as written (normalized, lower-cased; it never contains digits).
	SignalPrepayment SignalKind = "prepayment"
	// SignalPaymentLink is a link to a page that poses as a payment or
	// marketplace page but is not the platform's: a look-alike host
	// (bunjang-pay.safe24.xyz, kaka0-pay.com), or any outside link in a
	// message that calls it the safe-payment page. Value is the host.
	SignalPaymentLink SignalKind = "payment_link"
)

// prepaymentRe finds requests to pay first or by bank transfer. Each
// alternative names the payment itself, so haggling ("네고"), in-app
// payment ("안전결제로 할게요") and a parcel's tracking number do not match.
// Korean cues may be split by a space or dot between syllables (선 입 금).
var prepaymentRe = anchor(strings.Join([]string{
	sp("선입금"), sp("선결제"), sp("계좌이체"), sp("무통장입금"), sp("예약금"), sp("계약금"),
	sp("계좌") + cueSep + anyOf("로", "으로") + cueSep + anyOf("입금", "이체", "송금", "보내"),
	sp("입금") + cueSep + anyOf("먼저", "부터", "순", "하시는분"),
	sp("먼저") + cueSep + anyOf("입금", "송금", "이체"),
	anyOf("입금", "송금", "이체") + cueSep + anyOf("해주시면", "하시면", "주시면") + cueSep + `(?:` + sp("바로") + cueSep + `)?` +
		anyOf("발송", "배송", "보내", "택배", "드릴"),
	`deposit\s+(?:it\s+)?first`, `pay\s+(?:me\s+)?(?:first|upfront|up\s+front|in\s+advance)`, `(?:upfront|advance)\s+payment`,
	`(?:send|transfer|wire)\s+(?:me\s+)?(?:the\s+)?(?:money|payment|funds|deposit)\s+(?:first|before)`, `(?:bank|wire)\s+transfer`,
	`(?:holding|reservation)\s+deposit`, `first\s+(?:one\s+)?to\s+(?:deposit|pay|transfer)`,
}, "|"), 60, 80, "금", "결", "체", "송", "계", "deposit", "pay", "transfer", "wire", "money", "funds")

// cueSep is what may split two syllables or words of a Korean cue: one
// space, dot or middle dot.
const cueSep = `[\s.ㆍ·]?`

// anyOf is the expression of any one of the Korean words, each spelled as
// sp allows.
func anyOf(words ...string) string {
	alts := make([]string, len(words))
	for i, w := range words {
		alts[i] = sp(w)
	}
	return `(?:` + strings.Join(alts, "|") + `)`
}

// sp is the expression of a Korean cue whose syllables may be split by one
// space, dot or middle dot each.
func sp(word string) string {
	var b strings.Builder
	for i, r := range word {
		if i > 0 {
			b.WriteString(cueSep)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// prepaymentRefusals after a cue turn it into its opposite: a buyer who
// will not prepay, or a warning about those who ask. Without them the
// signal fired on the hard negatives of its corpus.
var prepaymentRefusals = []string{
	"안 ", "안돼", "안되", "안해", "안하", "안할", "안받", "않", "못 ", "못해", "못하", "싫", "불가", "말고", "없이", "금지",
	"요구", "조심", "주의", "사기", "하지 마", "하지마", "절대", "x ", "no ", "not ", "is a scam", "scam",
}

// prepaymentDenials before a cue negate it ("never pay upfront").
var prepaymentDenials = []string{"no ", "not ", "never ", "don't ", "dont ", "do not ", "won't ", "without ", "avoid ", "beware of ", "절대 ", "절대"}

// findPrepayment returns the first prepayment request of s that no
// refusal or denial next to it takes back.
func findPrepayment(s string) []match {
	for _, loc := range prepaymentRe.findAll(s) {
		after := s[loc[1]:min(loc[1]+24, len(s))]
		before := s[max(loc[0]-12, 0):loc[0]]
		if containsAny(after, prepaymentRefusals...) || hasSuffixAny(before, prepaymentDenials...) {
			continue
		}
		return []match{{kind: SignalPrepayment, start: loc[0], end: loc[1], value: s[loc[0]:loc[1]]}}
	}
	return nil
}

// hasSuffixAny reports whether s, its trailing spaces trimmed to one,
// ends in any of sufs.
func hasSuffixAny(s string, sufs ...string) bool {
	s = strings.TrimRight(s, " ") + " "
	for _, suf := range sufs {
		if strings.HasSuffix(s, suf) || strings.HasSuffix(s, suf+" ") {
			return true
		}
	}
	return false
}

// platformHosts are the platform's and the payment providers' own hosts
// (and their subdomains): links to them are never a look-alike.
var platformHosts = []string{
	"bunjang.co.kr", "daangn.com", "joongna.com", "kakaopay.com", "pay.naver.com", "naver.com", "naver.me",
	"toss.im", "tosspayments.com", "kakao.com", "cjlogistics.com", "epost.go.kr", "hanjin.com", "lotteglogis.com",
}

// messengerHosts are the messenger links the messenger-id signal reports.
var messengerHosts = []string{"open.kakao.com", "t.me", "telegram.me", "wa.me", "line.me"}

// lookalikeWords in a label of a host that is not the platform's mark a
// page posing as a payment or marketplace page; a label matches when it
// starts or ends with one (safe24, bunjangpay) or is one.
var lookalikeWords = []string{
	"pay", "safe", "secure", "escrow", "checkout", "refund", "verify",
	"bunjang", "bungae", "daangn", "danggeun", "karrot", "joongna", "joonggonara", "kakao", "kaka0", "naver", "nav3r", "toss", "t0ss",
}

// paymentPageCues call a link the payment page: with them, any outside
// link is a payment link.
var paymentPageCues = []string{"안전결제", "안전 결제", "안전거래", "결제 링크", "결제링크", "결제창", "결제 페이지", "safe payment", "secure payment", "payment link", "payment page", "checkout link"}

// findPaymentLinks returns a match for every link among urls that poses
// as a payment page.
func findPaymentLinks(s string, urls [][]int) []match {
	var out []match
	cued := len(urls) > 0 && containsAny(s, paymentPageCues...)
	for _, u := range urls {
		host := urlHost(s[u[0]:u[1]])
		if hostUnder(host, platformHosts) || hostUnder(host, messengerHosts) {
			continue
		}
		if cued || lookalikeHost(host) {
			out = append(out, match{kind: SignalPaymentLink, start: u[0], end: u[1], value: host, contact: host})
		}
	}
	return out
}

// hostUnder reports whether host is one of hosts or a subdomain of one.
func hostUnder(host string, hosts []string) bool {
	for _, h := range hosts {
		if host == h || strings.HasSuffix(host, "."+h) {
			return true
		}
	}
	return false
}

// lookalikeHost reports a host that borrows a payment or marketplace name:
// a label that starts or ends with one of lookalikeWords, or an
// internationalized (punycode) label, the usual way to fake a brand's
// letters.
func lookalikeHost(host string) bool {
	for _, label := range strings.FieldsFunc(host, func(r rune) bool { return r == '.' || r == '-' || r == '_' }) {
		if strings.HasPrefix(label, "xn--") || label == "xn" {
			return true
		}
		for _, w := range lookalikeWords {
			if strings.HasPrefix(label, w) || strings.HasSuffix(label, w) {
				return true
			}
		}
	}
	return false
}
