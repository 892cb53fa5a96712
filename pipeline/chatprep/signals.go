package chatprep

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// SignalKind names a rule signal found by pattern in chat text.
type SignalKind string

// The rule signal kinds.
const (
	SignalPhone       SignalKind = "phone"
	SignalBankAccount SignalKind = "bank_account"
	// SignalCardNumber is a payment card number that passes the Luhn check.
	SignalCardNumber SignalKind = "card_number"
	// SignalResidentID is a resident registration number (주민등록번호)
	// with a valid birth date and check digit.
	SignalResidentID SignalKind = "resident_id"
	// SignalEmail is an e-mail address, also when spelled out ("kim at
	// naver dot com", "kim 골뱅이 네이버").
	SignalEmail SignalKind = "email"
	// SignalMessengerID is an id on an outside messenger (a KakaoTalk id or
	// open-chat link, a Telegram handle or t.me link, a Line id).
	SignalMessengerID SignalKind = "messenger_id"
	// SignalMessenger is a mention of an outside messenger without an id
	// ("do you use 카톡?").
	SignalMessenger SignalKind = "messenger"
	SignalURL       SignalKind = "url"
	// SignalInjection is chat text written at the reviewing model rather
	// than the other party: role tags, fake system notices, "ignore
	// previous instructions", verdict-shaped JSON, transcript delimiters.
	// Value names the technique.
	SignalInjection SignalKind = "injection"
)

// SignalKinds lists every rule signal kind (the protective-action
// policy's signals_any vocabulary, with the campaign marks' kinds).
var SignalKinds = []SignalKind{SignalPhone, SignalBankAccount, SignalCardNumber, SignalResidentID, SignalEmail,
	SignalMessengerID, SignalMessenger, SignalURL, SignalInjection, SignalPrepayment, SignalPaymentLink}

// Signal is one pattern match. Value is safe to show to a model and to log:
// numbers are masked to their last two digits, ids and e-mail local parts
// to their first characters, URLs reduced to their host.
type Signal struct {
	Kind      SignalKind `json:"kind"`
	MessageID string     `json:"message_id"`
	Value     string     `json:"value"`
	// Cut is set when the match lies, at least partly, in text the models
	// do not see: a message the token budget left out, the cut middle of a
	// long message, or a message an oversized history dropped.
	Cut bool `json:"cut,omitempty"`
	// Start and End are the byte span of the match in the message's
	// original text (0, 0 when unknown), for masking and evidence.
	Start int `json:"-"`
	End   int `json:"-"`
}

// match is one finding in a normalized text.
type match struct {
	kind       SignalKind
	start, end int // span in the normalized text
	value      string
	// [maskFrom, maskTo) is what Redact hides; digits keeps the last two
	// digits, otherwise every letter and digit after the first keep runes.
	maskFrom, maskTo int
	digits           bool
	keep             int
	// strength ranks number readings: 3 a shape with a check (phone
	// prefix, Luhn, resident checksum), 2 an account next to a bank, 1 an
	// account by its length alone.
	strength int
	// contact is the contact value itself in one canonical spelling (the
	// digits of a number, a messenger id or e-mail address lower-cased):
	// what links rooms that share it (campaign.go). It never leaves the
	// process unhashed; empty for matches that are not contact values.
	contact string
	// maskOnly marks a match that is masked (Redact, Pseudonyms) but is
	// no signal and no contact: a long number in a link's path that only
	// its length makes an account (a shop's product id, most likely).
	maskOnly bool
}

// FindSignals returns the rule signals in one message's text, in the order
// they appear by kind (numbers, e-mails, URLs, messenger ids, messenger
// mentions, prepayment requests, payment links, injection attempts). It
// normalizes the text first (see Normalize) and is safe on any input.
func FindSignals(messageID, text string) []Signal {
	n := Normalize(text)
	return signalsOf(messageID, n, scan(n))
}

func signalsOf(messageID string, n Normalized, ms []match) []Signal {
	if len(ms) == 0 {
		return nil
	}
	out := make([]Signal, 0, len(ms))
	for _, m := range ms {
		if m.maskOnly {
			continue
		}
		s, e := n.OrigSpan(m.start, m.end)
		out = append(out, Signal{Kind: m.kind, MessageID: messageID, Value: m.value, Start: s, End: e})
	}
	return out
}

// Redact returns s with every phone, bank-account, card and resident
// registration number masked to its last two digits, every e-mail local
// part and messenger id masked after its first characters, in whatever
// form they were written (full-width, spaced, split by invisible
// characters, in Hangul digits), and every name where the text says it is
// one (maskNames). Everything else is kept as written. Use it on anything
// derived from chat text that leaves the process: stored model answers,
// rationales, error texts, inference logs.
func Redact(s string) string {
	return maskNames(redactContacts(s))
}

func redactContacts(s string) string {
	spans := contactSpans(s)
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.from])
		sp.writeMasked(&b, s[sp.from:sp.to])
		last = sp.to
	}
	b.WriteString(s[last:])
	return b.String()
}

// maskSpan is a byte span of the original text to mask: a number (digits)
// keeps its last two digits, anything else its first keep letters or
// digits.
type maskSpan struct {
	from, to int
	digits   bool
	keep     int
}

// writeMasked writes text to b with the characters sp hides replaced by
// '*'.
func (sp maskSpan) writeMasked(b *strings.Builder, text string) {
	seg := []rune(text)
	if sp.digits {
		keep := 2
		for i := len(seg) - 1; i >= 0; i-- {
			if isDigitLike(seg[i]) {
				if keep > 0 {
					keep--
					continue
				}
				seg[i] = '*'
			}
		}
		b.WriteString(string(seg))
		return
	}
	kept := 0
	for i, r := range seg {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if kept < sp.keep {
				kept++
				continue
			}
			seg[i] = '*'
		}
	}
	b.WriteString(string(seg))
}

// MaskNumbers is Redact, kept under its old name for callers that mask
// model output.
func MaskNumbers(s string) string { return Redact(s) }

// isDigitLike reports a rune that reads as a digit: ASCII, full-width,
// circled or mathematical digits, and the Hangul digit syllables.
func isDigitLike(r rune) bool {
	if r >= '0' && r <= '9' {
		return true
	}
	if _, ok := hangulDigits[r]; ok {
		return true
	}
	if r < utf8.RuneSelf {
		return false
	}
	if unicode.IsDigit(r) {
		return true
	}
	for _, c := range norm.NFKC.String(string(r)) {
		if c >= '0' && c <= '9' {
			return true
		}
	}
	return false
}

// scan finds every match in a normalized text.
func scan(n Normalized) []match {
	t := n.Text
	if strings.TrimSpace(t) == "" {
		return nil
	}
	lower := lowerSameLen(t)
	out, _, urls := findContacts(lower)
	if loc := messengerRe.find(lower); loc != nil && !hasKind(out, SignalMessengerID) {
		out = append(out, match{kind: SignalMessenger, start: loc[0], end: loc[1], value: t[loc[0]:loc[1]]})
	}
	out = append(out, findPrepayment(lower)...)
	out = append(out, findPaymentLinks(lower, urls)...)
	out = append(out, findInjections(lower)...)
	return out
}

// findContacts finds the contact details of a lower-cased text (numbers,
// e-mails, URLs and messenger ids, in scan's order, which is the order
// scan reports them in) and the e-mails' and URLs' spans. Pseudonyms
// needs only these: the prepayment, payment-link and injection searches
// were about a third of what it spent scanning each request.
//
// A number inside a link is a number like any other (a payment link to
// a phone number, an account number in a query), except in the link's
// host, which stays as written for the judge, and in a messenger link's
// id, which is the messenger id.
func findContacts(lower string) (out []match, emails, urls [][]int) {
	emails = findEmails(lower)
	urls = urlRe.FindAllStringIndex(lower, -1)
	urls = slices.DeleteFunc(urls, func(u []int) bool { return within(u[0], emails) })
	ids := findMessengerIDs(lower, emails)
	taken := slices.Clone(emails)
	for _, u := range urls {
		taken = append(taken, urlHostSpan(lower, u))
	}
	for _, id := range ids {
		taken = append(taken, []int{id.start, id.end})
	}
	for _, m := range findNumberSignals(lower, taken) {
		// Only its length makes a long number in a link an account: it is
		// masked all the same, but reported as no account and linking no
		// rooms, since a shop's product id looks just like it.
		if m.kind == SignalBankAccount && m.strength < 2 && within(m.start, urls) {
			m.maskOnly, m.contact = true, ""
		}
		out = append(out, m)
	}
	out = append(out, emailMatches(lower, emails)...)
	for _, u := range urls {
		out = append(out, match{kind: SignalURL, start: u[0], end: u[1], value: urlHost(lower[u[0]:u[1]])})
	}
	out = append(out, ids...)
	return out, emails, urls
}

// urlHostSpan is the byte span of the host of the link at u in s: after
// the scheme and any user info, up to the path, query or fragment.
func urlHostSpan(s string, u []int) []int {
	from, to := u[0], u[1]
	if i := strings.Index(s[from:to], "://"); i >= 0 {
		from += i + 3
	}
	if i := strings.IndexAny(s[from:to], "/?#"); i >= 0 {
		to = from + i
	}
	if i := strings.LastIndexByte(s[from:to], '@'); i >= 0 {
		from += i + 1
	}
	return []int{from, to}
}

// lowerSameLen lower-cases s where that keeps every rune's byte length, so
// offsets in the result are offsets in s.
func lowerSameLen(s string) string {
	return strings.Map(func(r rune) rune {
		l := unicode.ToLower(r)
		if utf8.RuneLen(l) != utf8.RuneLen(r) {
			return r
		}
		return l
	}, s)
}

func hasKind(ms []match, k SignalKind) bool {
	for _, m := range ms {
		if m.kind == k {
			return true
		}
	}
	return false
}

func within(pos int, spans [][]int) bool {
	for _, s := range spans {
		if pos >= s[0] && pos < s[1] {
			return true
		}
	}
	return false
}

// --- numbers -----------------------------------------------------------------

// hangulDigits maps the Sino-Korean digit syllables abusers spell numbers
// with (공일공 for 010, 빵 for 0 in slang).
var hangulDigits = map[rune]byte{
	'공': '0', '영': '0', '빵': '0', '일': '1', '이': '2', '삼': '3', '사': '4',
	'오': '5', '육': '6', '륙': '6', '칠': '7', '팔': '8', '구': '9',
}

func isHangulSyllable(r rune) bool { return r >= 0xAC00 && r <= 0xD7A3 }

// isNumSep reports the characters a number may be split with (a slash
// too: 010/9876/5432 is a phone number).
func isNumSep(r rune) bool {
	switch r {
	case ' ', '.', '-', '_', '(', ')', '*', '~', '\t', '\n', '\r', '|', '^', '/',
		'ㅡ': // the Hangul vowel, typed as a dash
		return true
	}
	return false
}

// maxSeps is how many separator characters may sit between two digit
// groups of one number ("010 - 1234 - 5678").
const maxSeps = 3

// numGroup is a run of digits with no separator inside.
type numGroup struct {
	start, end int // byte span in the text
	digits     string
}

// numRun is a sequence of digit groups joined by at most maxSeps separators.
type numRun []numGroup

// findNumberRuns returns the digit runs of s, reading ASCII digits and the
// Hangul digit syllables. A Hangul digit counts when it does not touch a
// Hangul letter that is not a digit (so 이거, 사이즈 are words), and when it
// belongs to a run of at least three Hangul digits or is tightly joined to
// other digits on both sides ("010-일이-5678", "공1공"); lenient accepts one
// side ("사육99"), a reading kept only where the strict one found nothing,
// since "5678이 맞아요" ends in a particle, not a digit.
func findNumberRuns(s string, lenient bool) []numRun {
	toks := readNumTokens(make([]numTok, 0, len(s)), s)
	readHangulDigits(toks)
	demoteLoneHangulDigits(toks, lenient)
	return groupNumberRuns(toks)
}

// numTok is one rune of a text being read for numbers: its byte span and,
// when it reads as a digit, that digit ('0'..'9'; 0 when it does not).
type numTok struct {
	start, end int
	r          rune
	digit      byte
}

// readNumTokens appends the runes of s to toks, reading the ASCII digits.
func readNumTokens(toks []numTok, s string) []numTok {
	for i, r := range s {
		if n := len(toks); n > 0 {
			toks[n-1].end = i
		}
		t := numTok{start: i, end: len(s), r: r}
		if r >= '0' && r <= '9' {
			t.digit = byte(r)
		}
		toks = append(toks, t)
	}
	return toks
}

// readHangulDigits reads a Hangul digit syllable as its digit when neither
// neighbour is a Hangul letter that is not a digit (so 이거, 사이즈 stay
// words).
func readHangulDigits(toks []numTok) {
	isHD := func(k int) bool { _, ok := hangulDigits[toks[k].r]; return ok }
	word := func(k int) bool {
		return k >= 0 && k < len(toks) && isHangulSyllable(toks[k].r) && !isHD(k)
	}
	for k := range toks {
		if isHD(k) && !word(k-1) && !word(k+1) {
			toks[k].digit = hangulDigits[toks[k].r]
		}
	}
}

// demoteLoneHangulDigits unreads short clusters of Hangul digits (fewer
// than three, joined by at most one separator) that are not tightly joined
// to other digits on both sides (lenient: on either side).
func demoteLoneHangulDigits(toks []numTok, lenient bool) {
	tight := func(k int) bool {
		if k < 0 || k >= len(toks) {
			return true
		}
		r := toks[k].r
		return r == '-' || r == '.' || (r >= '0' && r <= '9')
	}
	hangulDigit := func(k int) bool { return toks[k].digit != 0 && toks[k].r >= utf8.RuneSelf }
	for i := 0; i < len(toks); {
		if !hangulDigit(i) {
			i++
			continue
		}
		j, count := i, 0
		for j < len(toks) {
			if hangulDigit(j) {
				count++
				j++
				continue
			}
			if isNumSep(toks[j].r) && j+1 < len(toks) && hangulDigit(j+1) {
				j++
				continue
			}
			break
		}
		joined := tight(i-1) && tight(j)
		if lenient {
			joined = tight(i-1) || tight(j)
		}
		if count < 3 && !joined {
			for k := i; k < j; k++ {
				if toks[k].r >= utf8.RuneSelf {
					toks[k].digit = 0
				}
			}
		}
		i = j
	}
}

// groupNumberRuns collects the read digits into groups and the groups into
// runs: at most maxSeps separators join two groups of one run.
func groupNumberRuns(toks []numTok) []numRun {
	var out []numRun
	var run numRun
	var g *numGroup
	var d []byte
	seps := 0
	endGroup := func() {
		if g != nil {
			g.digits = string(d)
			run = append(run, *g)
			g, d = nil, d[:0]
		}
	}
	endRun := func() {
		endGroup()
		if len(run) > 0 {
			out = append(out, run)
		}
		run, seps = nil, 0
	}
	for _, t := range toks {
		switch {
		case t.digit != 0:
			if g == nil {
				g = &numGroup{start: t.start}
			}
			d = append(d, t.digit)
			g.end = t.end
			seps = 0
		case isNumSep(t.r) && (g != nil || len(run) > 0) && seps < maxSeps:
			endGroup()
			seps++
		default:
			endRun()
		}
	}
	endRun()
	return out
}

func (r numRun) digits(i, j int) string {
	var b strings.Builder
	for _, g := range r[i:j] {
		b.WriteString(g.digits)
	}
	return b.String()
}

// numContext is what the words around a number say about it.
type numContext struct {
	notContact bool   // a tracking, order or serial number is being talked about
	bank       string // a bank named next to the number ("" none; "bank" for a generic cue)
	card       bool
	resident   bool
}

// nonContactWords mark a message about a parcel, an order or a product: a
// long number there is a tracking, order or serial number, which is
// innocent (a tracking number after an in-app payment is normal).
var nonContactWords = []string{"송장", "운송장", "등기번호", "tracking", "invoice", "waybill", "주문번호", "주문 번호", "order no", "order number", "예약번호", "일련번호", "시리얼", "serial", "imei", "모델명", "model no"}

var (
	cardCueRe     = regexp.MustCompile(`카드|\bcard\b|\bvisa\b|master\s?card|\bcvc\b|\bamex\b`)
	residentCueRe = regexp.MustCompile(`주\s?민|resident registration|\brrn\b`)
	genericBank   = map[string]bool{"은행": true, "뱅크": true, "bank": true, "계좌": true, "예금주": true, "account": true, "acct": true}
)

// bankSeparators drops what findBanks allows between a name's syllables.
var bankSeparators = strings.NewReplacer(" ", "", ".", "", "_", "")

// bankNear is the bank named within a few characters of [start, end).
func bankNear(s string, banks [][]int, start, end int) string {
	const reach = 40 // bytes: about a dozen Hangul syllables
	best := ""
	for _, b := range banks {
		if b[1] <= start && start-b[1] <= reach || b[0] >= end && b[0]-end <= reach/2 {
			name := bankSeparators.Replace(s[b[0]:b[1]])
			if best == "" || genericBank[best] && !genericBank[name] {
				best = name
			}
		}
	}
	return best
}

// findNumberSignals classifies every digit run of s; runs inside e-mails
// and URLs are skipped.
func findNumberSignals(s string, skip [][]int) []match {
	strict, lenient := findNumberRuns(s, false), findNumberRuns(s, true)
	if len(strict) == 0 && len(lenient) == 0 {
		return nil
	}
	// The text's cues and bank names are the same for both readings: the
	// bank-name search was most of the masking's time, so it runs once.
	nc := newNumberText(s)
	out := nc.signals(strict, skip)
	for _, m := range nc.signals(lenient, skip) {
		// The lenient reading wins where it proves more than the strict
		// one: a checksummed resident number over a bare digit count.
		stronger := true
		for _, o := range out {
			if m.start < o.end && o.start < m.end && o.strength >= m.strength {
				stronger = false
				break
			}
		}
		if stronger {
			out = slices.DeleteFunc(out, func(o match) bool { return m.start < o.end && o.start < m.end })
			out = append(out, m)
		}
	}
	slices.SortStableFunc(out, func(a, b match) int { return a.start - b.start })
	return out
}

// numberText is a text's context for classifying its digit runs: its
// cue words and where it names banks.
type numberText struct {
	s     string
	ctx   numContext
	banks [][]int
}

func newNumberText(s string) numberText {
	// Each cue expression needs one of its literals; most texts have none,
	// and looking for them is far cheaper than running the expression.
	ctx := numContext{
		card:     containsAny(s, "카드", "card", "visa", "cvc", "amex") && cardCueRe.MatchString(s),
		resident: containsAny(s, "주", "resident", "rrn") && residentCueRe.MatchString(s),
	}
	for _, w := range nonContactWords {
		if strings.Contains(s, w) {
			ctx.notContact = true
			break
		}
	}
	return numberText{s: s, ctx: ctx, banks: findBanks(s)}
}

// signals classifies runs, skipping those that start inside skip.
func (nt numberText) signals(runs []numRun, skip [][]int) []match {
	if len(runs) == 0 {
		return nil
	}
	s, ctx, banks := nt.s, nt.ctx, nt.banks
	var out []match
	for _, run := range runs {
		for i := 0; i < len(run); {
			if within(run[i].start, skip) {
				i++
				continue
			}
			// The longest stretch from group i that is something; the whole
			// run may be anything, a part of it only what its shape proves
			// (so a phone number next to a price is still found).
			found := false
			for j := len(run); j > i; j-- {
				c := ctx
				c.bank = bankNear(s, banks, run[i].start, run[j-1].end)
				d := run.digits(i, j)
				k := classifyNumber(d, c, i == 0 && j == len(run))
				if k == "" {
					continue
				}
				v := maskDigits(d)
				if k == SignalBankAccount && c.bank != "" && !genericBank[c.bank] {
					v = c.bank + " " + v
				}
				start, end := run[i].start, run[j-1].end
				strength := 3
				if k == SignalBankAccount {
					strength = 1
					if c.bank != "" {
						strength = 2
					}
				}
				out = append(out, match{kind: k, start: start, end: end, value: v, maskFrom: start, maskTo: end, digits: true, strength: strength, contact: d})
				i, found = j, true
				break
			}
			if !found {
				i++
			}
		}
	}
	return out
}

// classifyNumber says what a digit string is, or "" for nothing of
// interest (prices, OTPs, dates, tracking and order numbers). whole is set
// when d is a whole run rather than a part of one: only a whole run may be
// taken for an account number on its length alone.
func classifyNumber(d string, c numContext, whole bool) SignalKind {
	n := len(d)
	switch {
	case (n == 10 || n == 11) && strings.HasPrefix(d, "01") && strings.ContainsRune("016789", rune(d[2])):
		return SignalPhone
	case (n == 12 || n == 13) && strings.HasPrefix(d, "8210"), n == 13 && strings.HasPrefix(d, "82010"):
		return SignalPhone
	case n == 11 && strings.HasPrefix(d, "070"), (n == 11 || n == 12) && strings.HasPrefix(d, "050"):
		return SignalPhone
	case (n == 9 || n == 10) && strings.HasPrefix(d, "02"), n == 10 && d[0] == '0' && d[1] >= '3' && d[1] <= '6':
		return SignalPhone
	case n == 13 && residentShape(d) && (residentChecksum(d) || c.resident):
		return SignalResidentID
	case n == 16 && luhn(d) && !c.notContact, (n == 15 || n == 16) && c.card:
		return SignalCardNumber
	case n == 15 && (strings.HasPrefix(d, "34") || strings.HasPrefix(d, "37")) && luhn(d) && !c.notContact:
		// Amex; other 15-digit Luhn numbers are mostly IMEIs.
		return SignalCardNumber
	case n >= 14 && n <= 19 && luhn(d) && c.card:
		return SignalCardNumber
	case c.bank != "" && n >= 9 && n <= 16:
		return SignalBankAccount
	case whole && n >= 10 && n <= 14 && !c.notContact && !looksLikeDate(d):
		return SignalBankAccount
	}
	return ""
}

// residentShape checks a resident registration number's birth date and
// its century-and-sex digit (1-8: Koreans and foreigners born 1900-2099).
func residentShape(d string) bool {
	month := int(d[2]-'0')*10 + int(d[3]-'0')
	day := int(d[4]-'0')*10 + int(d[5]-'0')
	return month >= 1 && month <= 12 && day >= 1 && day <= 31 && d[6] >= '1' && d[6] <= '8'
}

// residentChecksum is the check digit of numbers issued before October
// 2020 (later ones end in random digits; the 주민 cue catches those).
func residentChecksum(d string) bool {
	w := [12]int{2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5}
	sum := 0
	for i, m := range w {
		sum += int(d[i]-'0') * m
	}
	return (11-sum%11)%10 == int(d[12]-'0')
}

// luhn reports whether a digit string passes the Luhn check of card
// numbers.
func luhn(d string) bool {
	sum, double := 0, false
	for i := len(d) - 1; i >= 0; i-- {
		x := int(d[i] - '0')
		if double {
			x *= 2
			if x > 9 {
				x -= 9
			}
		}
		sum += x
		double = !double
	}
	return sum%10 == 0
}

// looksLikeDate spots "2026-11-30 14" read as one run.
func looksLikeDate(d string) bool {
	if len(d) < 8 || !(strings.HasPrefix(d, "19") || strings.HasPrefix(d, "20")) {
		return false
	}
	month, day := int(d[4]-'0')*10+int(d[5]-'0'), int(d[6]-'0')*10+int(d[7]-'0')
	return month >= 1 && month <= 12 && day >= 1 && day <= 31
}

// maskDigits keeps the last two digits of a number.
func maskDigits(d string) string {
	if len(d) <= 2 {
		return d
	}
	return strings.Repeat("*", len(d)-2) + d[len(d)-2:]
}

// maskID keeps the first keep runes of an id.
func maskID(id string, keep int) string {
	var b strings.Builder
	i := 0
	for _, r := range id {
		if i < keep || !(unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('*')
		}
		i++
	}
	return b.String()
}

// --- e-mails -----------------------------------------------------------------

const (
	emailLocal = `([a-z0-9][a-z0-9._%+\-]{0,63})`
	emailLabel = `[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?`
	// A spelled-out "@" and "."; brackets as in "kim[at]mail[dot]com".
	emailAt  = `(?:\s*@\s*|\s*[(\[{<]\s*(?:at|@|골뱅이|앳)\s*[)\]}>]\s*|\s+at\s+|\s*골뱅이\s*|\s*앳\s*)`
	emailDot = `(?:\s*\.\s*|\s*[(\[{<]\s*(?:dot|\.|점)\s*[)\]}>]\s*|\s+dot\s+|\s*점\s*|\s*닷\s*)`
	emailTLD = `(?:com|net|org|kr|jp|io|me|co|biz|info|xyz|edu|gov|ac|go|or|ne|re|us|uk|cn)\b`
	// Mail providers written in Hangul or without a top-level domain
	// ("kim 골뱅이 네이버").
	emailProvider = `(?:네이버|지메일|다음|한메일|네이트|카카오|naver|gmail|daum|hanmail|nate|kakao)`
)

var (
	plainEmailRe   = anchor(emailLocal+`@(`+emailLabel+`(?:\.`+emailLabel+`)*\.[a-z]{2,24})\b`, 70, 260, "@")
	spelledEmailRe = anchor(emailLocal+emailAt+`(`+
		emailLabel+`(?:`+emailDot+emailLabel+`)*`+emailDot+emailTLD+
		`|`+emailLabel+`\s*(?:닷컴|닷넷)`+
		`|`+emailProvider+`)`, 80, 260, "@", " at ", "at]", "at)", "at}", "at>", "골뱅이", "앳")
	providerDomain = map[string]string{"네이버": "naver.com", "지메일": "gmail.com", "다음": "daum.net", "한메일": "hanmail.net", "네이트": "nate.com", "카카오": "kakao.com",
		"naver": "naver.com", "gmail": "gmail.com", "daum": "daum.net", "hanmail": "hanmail.net", "nate": "nate.com", "kakao": "kakao.com"}
	spelledDotRe = regexp.MustCompile(emailDot)
)

// findEmails returns the spans of e-mail addresses, plain or spelled out:
// each span is [start, end, localEnd, domainStart].
func findEmails(s string) [][]int {
	var out [][]int
	for _, m := range plainEmailRe.findAll(s) {
		out = append(out, []int{m[0], m[1], m[3], m[4]})
	}
	for _, m := range spelledEmailRe.findAll(s) {
		overlap := false
		for _, o := range out {
			if m[0] < o[1] && o[0] < m[1] {
				overlap = true
				break
			}
		}
		if !overlap {
			out = append(out, []int{m[0], m[1], m[3], m[4]})
		}
	}
	slices.SortFunc(out, func(a, b []int) int { return a[0] - b[0] })
	return out
}

func emailMatches(s string, spans [][]int) []match {
	var out []match
	for _, e := range spans {
		local := s[e[0]:e[2]]
		domain := strings.TrimSpace(s[e[3]:e[1]])
		if d, ok := providerDomain[domain]; ok {
			domain = d
		} else {
			domain = strings.NewReplacer("닷컴", ".com", "닷넷", ".net").Replace(domain)
			domain = spelledDotRe.ReplaceAllString(domain, ".")
			domain = strings.ReplaceAll(domain, " ", "")
		}
		out = append(out, match{kind: SignalEmail, start: e[0], end: e[1], value: maskID(local, 1) + "@" + domain,
			maskFrom: e[0], maskTo: e[2], keep: 1, contact: strings.ReplaceAll(local, " ", "") + "@" + domain})
	}
	return out
}

// --- URLs and messengers ---------------------------------------------------------

var (
	urlRe = regexp.MustCompile(`(?i)\b(?:https?://|www\.)[^\s<>"'\x60]+|\b[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*\.(?:com|net|org|xyz|top|shop|click|win|kr|io|me|ly|link|site|online|app|info|biz|cc|pw|store|live|club|vip)\b(?:/[^\s<>"'\x60]*)?`)
	// messengerRe matches names of outside messengers, including the
	// spellings abusers use to dodge filters (카.톡, ㅋㅌ, K톡).
	messengerRe = anchor(`(?i)카카오톡|카\s?\.?\s?톡|까톡|ㅋㅌ|k톡|kakao\s?talk|kakao\s?t\b|\bkakao\b|\bk[.\-]?talk\b|\bkkt\b|텔레그램|텔레(?:$|[^비])|telegram|\btele\b|라인\s?(?:아이디|id)|\bline\s?id\b|whatsapp|왓츠앱|위챗|wechat|오픈\s?채팅|오픈\s?톡|open\s?chat|open\.kakao\.com|문자로|문자\s?주세요|text me`, 8, 16,
		"톡", "ㅋㅌ", "kakao", "talk", "kkt", "텔레", "telegram", "tele", "라인", "line", "whatsapp", "왓츠앱", "위챗", "wechat", "오픈", "open", "문자", "text me")
	// messengerIDRe finds the id after "아이디"/"ID": letters, digits, _ and
	// ., possibly spaced out character by character.
	messengerIDRe = anchor(`(?i)(?:아이디|\bid\b)\s*(?:is|:|는|은|=)?\s*([a-z0-9_.](?:[ ]?[a-z0-9_.]){2,29})`, 4, 80, "아이디", "id")
	// platformIDRe finds "카톡: deal8282", "텔레 @deal", "line: deal".
	platformIDRe = anchor(`(?i)(?:카카오톡|카톡|까톡|kakao(?:\s?talk)?|텔레그램|텔레|telegram|\btg|라인|\bline)\s*(?:아이디|id)?\s*[:=]\s*@?([a-z][a-z0-9_.]{2,29})`, 4, 60, "카톡", "까톡", "kakao", "텔레", "telegram", "tg", "라인", "line")
	// linkIDRe finds messenger links, also with spaces around the dots:
	// KakaoTalk open chat, Telegram, Line and WhatsApp.
	linkIDRe = anchor(`(?i)(open\s*\.?\s*kakao\s*\.?\s*com\s*/\s*(?:o|me)\s*/\s*|\bt\s*\.\s*me\s*/\s*|telegram\s*\.\s*me\s*/\s*|line\s*\.\s*me\s*/\s*(?:ti\s*/\s*p\s*/\s*|r\s*/\s*ti\s*/\s*p\s*/\s*)?~?|wa\s*\.\s*me\s*/\s*\+?)([a-z0-9_\-]{3,40})`, 40, 60, "kakao", "me/", "me /")
	handleRe = anchor(`(?:^|[^A-Za-z0-9_.@])@([A-Za-z][A-Za-z0-9_]{3,31})`, 4, 36, "@")
)

func findMessengerIDs(s string, emails [][]int) []match {
	var out []match
	seen := map[string]bool{}
	add := func(start, end int, prefix, id string) {
		id = strings.ReplaceAll(id, " ", "")
		if digits, n := hangulDigitSuffix(s, end); n > 0 {
			id, end = id+digits, end+n
		}
		if seen[strings.ToLower(id)] || within(start, emails) {
			return
		}
		seen[strings.ToLower(id)] = true
		out = append(out, match{kind: SignalMessengerID, start: start, end: end, value: prefix + maskID(id, 2), maskFrom: start, maskTo: end, keep: 2,
			contact: strings.ToLower(id)})
	}
	for _, m := range linkIDRe.findAll(s) {
		prefix := strings.Join(strings.Fields(s[m[2]:m[3]]), "")
		add(m[4], m[5], prefix, s[m[4]:m[5]])
	}
	for _, m := range handleRe.findAll(s) {
		add(m[2], m[3], "@", s[m[2]:m[3]])
	}
	for _, m := range platformIDRe.findAll(s) {
		add(m[2], m[3], "", s[m[2]:m[3]])
	}
	if messengerRe.find(s) != nil {
		if ms := messengerIDRe.findAll(s); len(ms) > 0 {
			add(ms[0][2], ms[0][3], "", s[ms[0][2]:ms[0][3]])
		}
	}
	return out
}

// minIDHangulDigits is the fewest Hangul digit syllables read as the digits
// of the messenger id they follow: a single one is more often a particle
// (deal이에요) than a digit.
const minIDHangulDigits = 2

// hangulDigitSuffix reads the Hangul digit syllables written right after a
// messenger id ending at byte end of s, with no space between (deal공일이
// for deal012): the digits they spell and their byte length, or 0 when
// fewer than minIDHangulDigits follow or the id does not end in a letter
// or digit. Without them two scripts whose ids share the letters would
// share a contact mark.
func hangulDigitSuffix(s string, end int) (string, int) {
	if end <= 0 || end > len(s) || !isASCIIAlnum(s[end-1]) {
		return "", 0
	}
	var digits []byte
	n := 0
	for _, r := range s[end:] {
		d, ok := hangulDigits[r]
		if !ok {
			break
		}
		digits = append(digits, d)
		n += utf8.RuneLen(r)
	}
	if len(digits) < minIDHangulDigits {
		return "", 0
	}
	return string(digits), n
}

func isASCIIAlnum(b byte) bool {
	return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9')
}

func urlHost(u string) string {
	s := u
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	return strings.ToLower(strings.TrimRight(s, ".,)"))
}

// bankNames are the banks findBanks knows, in the order they are tried at
// one position: a longer name before its own prefix (국민은행 before 국민).
var bankNames = func() [][]rune {
	names := []string{
		"국민은행", "국민", "kb", "신한", "우리은행", "하나은행", "농협", "nh", "기업은행", "ibk", "카카오뱅크", "카뱅", "토스뱅크",
		"케이뱅크", "k뱅크", "새마을금고", "새마을", "신협", "우체국", "수협", "부산은행", "대구은행", "경남은행", "광주은행", "전북은행",
		"제주은행", "sc제일", "제일은행", "씨티", "산업은행", "하나", "우리", "토스",
	}
	out := make([][]rune, len(names))
	for i, n := range names {
		out[i] = []rune(n)
	}
	return out
}()

// bankWords are the generic account words, tried after the names; word
// ones must stand alone between ASCII word boundaries.
var bankWords = []struct {
	w    string
	word bool
}{{"은행", false}, {"뱅크", false}, {"bank", true}, {"계좌", false}, {"예금주", false}, {"account", true}, {"acct", true}}

// findBanks returns where a lower-cased text names a bank, also split by a
// space, dot or underscore between syllables (국.민, 농 협), or an account
// word, left to right without overlaps. It is the regular expression
//
//	(?:names, each rune followed by [ ._]?)(?:은행|뱅크)?|은행|뱅크|\bbank\b|계좌|예금주|\baccount\b|\bacct\b
//
// written out by hand (TestFindBanksIsTheRegexp checks that against the
// expression): Go's regexp engine tried every alternative at every byte,
// which made this search most of the contact masking's time.
func findBanks(s string) [][]int {
	var out [][]int
	for i := 0; i < len(s); {
		if j := bankAt(s, i); j > i {
			out = append(out, []int{i, j})
			i = j
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return out
}

// bankAt is the end of the bank name or account word that starts at i,
// or -1.
func bankAt(s string, i int) int {
	first, _ := utf8.DecodeRuneInString(s[i:])
	for _, name := range bankNames {
		if name[0] != first {
			continue
		}
		if j := nameAt(s, i, name); j >= 0 {
			for _, suffix := range []string{"은행", "뱅크"} {
				if strings.HasPrefix(s[j:], suffix) {
					return j + len(suffix)
				}
			}
			return j
		}
	}
	for _, w := range bankWords {
		if !strings.HasPrefix(s[i:], w.w) {
			continue
		}
		j := i + len(w.w)
		if w.word && (i > 0 && isWordByte(s[i-1]) || j < len(s) && isWordByte(s[j])) {
			continue
		}
		return j
	}
	return -1
}

// nameAt matches name at i, allowing one separator between its runes, and
// returns the end, or -1. Taking a separator whenever there is one is
// never wrong: no name contains a separator.
func nameAt(s string, i int, name []rune) int {
	for k, r := range name {
		if k > 0 && i < len(s) && (s[i] == ' ' || s[i] == '.' || s[i] == '_') {
			i++
		}
		got, size := utf8.DecodeRuneInString(s[i:])
		if i >= len(s) || got != r {
			return -1
		}
		i += size
	}
	return i
}

// isWordByte is regexp's \w: an ASCII letter, digit or underscore.
func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// containsAny reports whether s contains any of subs.
func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// Piece is one stretch of a text as RedactPieces splits it: a contact
// value (Contact set; Text masked as Redact masks it) or the text between
// two (Text with names masked). Start and End are the stretch's byte span
// in the original text.
type Piece struct {
	Text       string
	Contact    bool
	Start, End int
}

// RedactPieces splits s into its contact values and the text around them,
// every piece masked: joined, the pieces read as Redact(s) does, except
// where a name cue and its name fall on either side of a contact value.
// The console draws each contact piece as a value a moderator may reveal,
// by its index among the contact pieces (ContactValue).
func RedactPieces(s string) []Piece {
	spans := contactSpans(s)
	out := make([]Piece, 0, 2*len(spans)+1)
	last := 0
	for _, sp := range spans {
		if sp.from > last {
			out = append(out, Piece{Text: maskNames(s[last:sp.from]), Start: last, End: sp.from})
		}
		var b strings.Builder
		sp.writeMasked(&b, s[sp.from:sp.to])
		out = append(out, Piece{Text: b.String(), Contact: true, Start: sp.from, End: sp.to})
		last = sp.to
	}
	if last < len(s) || len(out) == 0 {
		out = append(out, Piece{Text: maskNames(s[last:]), Start: last, End: len(s)})
	}
	return out
}

// ContactValue is the n-th contact value of s (counted from 0, as
// RedactPieces numbers its contact pieces), as written, and whether there
// is one.
func ContactValue(s string, n int) (string, bool) {
	spans := contactSpans(s)
	if n < 0 || n >= len(spans) {
		return "", false
	}
	return s[spans[n].from:spans[n].to], true
}

// contactSpans are the byte spans of s that redactContacts masks, in
// order and without overlaps.
func contactSpans(s string) []maskSpan {
	if s == "" {
		return nil
	}
	n := Normalize(s)
	if strings.TrimSpace(n.Text) == "" {
		return nil
	}
	// Only contact details carry a mask: the prepayment, payment-link,
	// injection and messenger-word searches of scan find nothing to hide
	// and were about half of what every stage answer's redaction spent.
	found, _, _ := findContacts(lowerSameLen(n.Text))
	var spans []maskSpan
	for _, m := range found {
		if m.maskTo > m.maskFrom {
			f, t := n.OrigSpan(m.maskFrom, m.maskTo)
			spans = append(spans, maskSpan{f, t, m.digits, m.keep})
		}
	}
	slices.SortFunc(spans, func(a, b maskSpan) int { return a.from - b.from })
	out := spans[:0]
	last := 0
	for _, sp := range spans {
		if sp.from < last {
			sp.from = last
		}
		if sp.to <= sp.from {
			continue
		}
		out = append(out, sp)
		last = sp.to
	}
	return out
}
