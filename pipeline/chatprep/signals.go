package chatprep

import (
	"regexp"
	"strings"
)

// SignalKind names a rule signal found by pattern in chat text.
type SignalKind string

// The rule signal kinds.
const (
	SignalPhone       SignalKind = "phone"
	SignalBankAccount SignalKind = "bank_account"
	SignalCardNumber  SignalKind = "card_number"
	// SignalMessengerID is an id on an outside messenger (a KakaoTalk id, a
	// Telegram handle).
	SignalMessengerID SignalKind = "messenger_id"
	// SignalMessenger is a mention of an outside messenger without an id
	// ("do you use 카톡?").
	SignalMessenger SignalKind = "messenger"
	SignalURL       SignalKind = "url"
)

// Signal is one pattern match. Value is safe to show to a model and to log:
// numbers are masked to their last two digits, URLs reduced to their host.
type Signal struct {
	Kind      SignalKind `json:"kind"`
	MessageID string     `json:"message_id"`
	Value     string     `json:"value"`
}

// hangulDigits maps the Sino-Korean digit syllables abusers spell numbers
// with (공일공 for 010).
var hangulDigits = map[rune]byte{
	'공': '0', '영': '0', '일': '1', '이': '2', '삼': '3', '사': '4',
	'오': '5', '육': '6', '칠': '7', '팔': '8', '구': '9',
}

// numberSpan is a run of digits (ASCII or Hangul) joined by single
// separators, as found in the text.
type numberSpan struct {
	start, end int // byte offsets in the text
	digits     string
}

// findNumbers returns the digit runs of s: digits (ASCII, full-width or
// Hangul) joined by single separators, so "010 1234 5678", "010.1234.5678",
// "0 1 0 1 2 ..." and "공일공-..." are each one run.
func findNumbers(s string) []numberSpan {
	type tok struct {
		start, end int
		digit      byte // 0: not a digit
		sep        bool
	}
	runes := make([]rune, 0, len(s))
	toks := make([]tok, 0, len(s))
	for i, r := range s {
		if n := len(toks); n > 0 {
			toks[n-1].end = i
		}
		t := tok{start: i, end: len(s)}
		switch {
		case r >= '0' && r <= '9':
			t.digit = byte(r)
		case r >= '０' && r <= '９':
			t.digit = byte('0' + r - '０')
		case r == ' ' || r == '.' || r == '-' || r == '·' || r == '_':
			t.sep = true
		default:
			if d, ok := hangulDigits[r]; ok {
				t.digit = d
			}
		}
		runes = append(runes, r)
		toks = append(toks, t)
	}
	// Demote Hangul digit runs that are ordinary words: a run counts when it
	// is at least three long, or when it is tightly joined to other digits
	// by '-' or '.' ("일이삼-사오-...").
	tight := func(k int) bool {
		if k < 0 || k >= len(runes) {
			return true
		}
		r := runes[k]
		return r == '-' || r == '.' || (r >= '0' && r <= '9')
	}
	for i := 0; i < len(runes); {
		if _, ok := hangulDigits[runes[i]]; !ok {
			i++
			continue
		}
		j := i
		for j < len(runes) {
			if _, ok := hangulDigits[runes[j]]; !ok {
				break
			}
			j++
		}
		if j-i < 3 && !(tight(i-1) && tight(j)) {
			for k := i; k < j; k++ {
				toks[k].digit = 0
			}
		}
		i = j
	}
	var out []numberSpan
	for i := 0; i < len(toks); {
		if toks[i].digit == 0 {
			i++
			continue
		}
		var d strings.Builder
		start, end := toks[i].start, toks[i].end
		j := i
		for j < len(toks) {
			switch {
			case toks[j].digit != 0:
				d.WriteByte(toks[j].digit)
				end = toks[j].end
				j++
				continue
			case toks[j].sep && j+1 < len(toks) && toks[j+1].digit != 0:
				j++
				continue
			}
			break
		}
		out = append(out, numberSpan{start: start, end: end, digits: d.String()})
		i = j
	}
	return out
}

// trackingWords mark a message that is about a parcel: a long number there is
// a tracking number, which is innocent after an in-app payment.
var trackingWords = []string{"송장", "운송장", "등기번호", "tracking", "invoice", "waybill"}

// classifyNumber says what a digit run is, or "" for nothing of interest
// (prices, OTPs, dates, tracking numbers).
func classifyNumber(d string, parcel bool) SignalKind {
	n := len(d)
	switch {
	case (n == 10 || n == 11) && strings.HasPrefix(d, "01") && strings.ContainsRune("016789", rune(d[2])):
		return SignalPhone
	case (n == 12 || n == 13) && strings.HasPrefix(d, "8210"):
		return SignalPhone
	case (n == 9 || n == 10) && strings.HasPrefix(d, "02"), n == 10 && d[0] == '0' && d[1] >= '3' && d[1] <= '6':
		return SignalPhone
	case n == 15 || n == 16:
		return SignalCardNumber
	case n >= 10 && n <= 14:
		if parcel {
			return ""
		}
		return SignalBankAccount
	}
	return ""
}

var (
	urlRe = regexp.MustCompile(`(?i)\b(?:https?://|www\.)[^\s<>"'\x60]+|\b[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*\.(?:com|net|org|xyz|top|shop|click|win|kr|io|me|ly|link|site|online|app|info|biz|cc|pw|store|live|club|vip)\b(?:/[^\s<>"'\x60]*)?`)
	// messengerRe matches names of outside messengers, including the
	// spellings abusers use to dodge filters (카.톡, ㅋㅌ, K톡).
	messengerRe = regexp.MustCompile(`(?i)카카오톡|카\s?\.?\s?톡|까톡|ㅋㅌ|k톡|kakao\s?talk|kakao\s?t\b|\bkakao\b|\bk[.\-]?talk\b|\bkkt\b|텔레그램|텔레(?:$|[^비])|telegram|\btele\b|라인\s?(?:아이디|id)|\bline\s?id\b|whatsapp|왓츠앱|위챗|wechat|오픈\s?채팅|open\s?chat|open\.kakao\.com|문자로|문자\s?주세요|text me`)
	// messengerIDRe finds the id after "아이디"/"ID": letters, digits, _ and
	// ., possibly spaced out character by character.
	messengerIDRe = regexp.MustCompile(`(?i)(?:아이디|\bid\b)\s*(?:is|:|는|은|=)?\s*([a-z0-9_.](?:[ ]?[a-z0-9_.]){2,29})`)
	handleRe      = regexp.MustCompile(`(?:^|[^A-Za-z0-9_.])@([A-Za-z][A-Za-z0-9_]{3,31})`)
)

// FindSignals returns the rule signals in one message's text, in the order
// they appear by kind. It is safe on any input.
func FindSignals(messageID, text string) []Signal {
	var out []Signal
	lower := strings.ToLower(text)
	parcel := false
	for _, w := range trackingWords {
		if strings.Contains(lower, w) {
			parcel = true
			break
		}
	}
	urls := urlRe.FindAllStringIndex(text, -1)
	inURL := func(start int) bool {
		for _, u := range urls {
			if start >= u[0] && start < u[1] {
				return true
			}
		}
		return false
	}
	for _, n := range findNumbers(text) {
		if inURL(n.start) {
			continue
		}
		if k := classifyNumber(n.digits, parcel); k != "" {
			out = append(out, Signal{Kind: k, MessageID: messageID, Value: maskDigits(n.digits)})
		}
	}
	for _, u := range urls {
		out = append(out, Signal{Kind: SignalURL, MessageID: messageID, Value: urlHost(text[u[0]:u[1]])})
	}
	for _, m := range handleRe.FindAllStringSubmatch(text, -1) {
		out = append(out, Signal{Kind: SignalMessengerID, MessageID: messageID, Value: "@" + m[1]})
	}
	if messengerRe.MatchString(text) {
		if m := messengerIDRe.FindStringSubmatch(text); m != nil {
			out = append(out, Signal{Kind: SignalMessengerID, MessageID: messageID, Value: strings.ReplaceAll(m[1], " ", "")})
		} else {
			out = append(out, Signal{Kind: SignalMessenger, MessageID: messageID, Value: messengerRe.FindString(text)})
		}
	}
	return out
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

// maskDigits keeps the last two digits of a number.
func maskDigits(d string) string {
	if len(d) <= 2 {
		return d
	}
	return strings.Repeat("*", len(d)-2) + d[len(d)-2:]
}

// MaskNumbers returns s with every phone, bank-account and card number
// (plain, spaced, dotted or in Hangul digits) masked to its last two digits,
// keeping separators. Use it on anything derived from chat text that leaves
// the process (inference logs).
func MaskNumbers(s string) string {
	spans := findNumbers(s)
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, n := range spans {
		if classifyNumber(n.digits, false) == "" {
			continue
		}
		b.WriteString(s[last:n.start])
		keep := 2
		seg := []rune(s[n.start:n.end])
		// Walk backwards so the last two digits survive.
		for i := len(seg) - 1; i >= 0; i-- {
			r := seg[i]
			_, hd := hangulDigits[r]
			if (r >= '0' && r <= '9') || (r >= '０' && r <= '９') || hd {
				if keep > 0 {
					keep--
					continue
				}
				seg[i] = '*'
			}
		}
		b.WriteString(string(seg))
		last = n.end
	}
	b.WriteString(s[last:])
	return b.String()
}
