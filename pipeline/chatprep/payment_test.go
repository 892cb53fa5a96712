package chatprep

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// genPaymentCorpus writes testdata/payment.jsonl: prepayment requests and
// safe-payment look-alike links as scam scripts write them, in several
// spellings (Want: the kind), and the ordinary trade talk around payment
// that must not fire (Want: empty): in-app safe payment, refusals of
// prepayment, warnings about it, the platform's own links, meet-up maps.
func genPaymentCorpus() []signalCase {
	r := rand.New(rand.NewPCG(corpusSeed, 5))
	prepay := []string{
		"선입금 해주시면 바로 보내드려요", "계좌이체로 해주세요", "입금 먼저 부탁드립니다", "먼저 입금하시는 분께 드려요",
		"계좌로 입금해주시면 발송합니다", "무통장입금만 가능해요", "예약금 3만원 먼저 보내주세요", "입금 순으로 판매합니다",
		"선결제 후 택배 발송입니다", "송금 해주시면 바로 발송할게요", "다른 분도 기다려서 입금순이에요", "계약금 걸어주시면 빼둘게요",
		"Please deposit first and I will ship today", "pay me upfront, another buyer is waiting", "bank transfer only please",
		"send the money first then I ship", "first to deposit gets it", "I need a holding deposit of 50,000",
	}
	links := []string{
		"안전결제 링크 보내드릴게요 https://bunjang-pay.safe24.xyz/order/8812", "여기서 결제해주세요 kaka0-pay.com/p/3391",
		"safe payment here: http://secure-daangn.top/checkout", "번개장터 안전결제 페이지 bgpay.shop/item/22 로 진행해요",
		"결제 링크: www.joongna-escrow.click/pay?id=91", "토스 결제창 https://t0ss-checkout.site/a1 에서 결제",
		"https://xn--9n2bp8q.com/pay 안전거래 링크입니다", "please use this payment link: naver-safepay.online/x",
		"결제는 여기 pay-bunjang.net 에서 해주세요", "escrow service: escrowkorea.store/deal/5",
	}
	spell := append(textSpellings(r),
		spelling{"spaced_syllables", func(s string) string { return spaceHangulCues(s, " ") }},
		spelling{"dotted_syllables", func(s string) string { return spaceHangulCues(s, ".") }},
		spelling{"emoji", func(s string) string { return "💸🔥 " + s + " 🙏😊" }},
		spelling{"in_a_sentence", func(s string) string { return "네 아직 판매중이에요. " + s + " 감사합니다" }},
	)
	var out []signalCase
	add := func(tech, text string, want ...string) {
		out = append(out, signalCase{ID: fmt.Sprintf("p%03d", len(out)+1), Technique: tech, Text: text, Want: want})
	}
	for _, p := range prepay {
		for _, s := range spell {
			add("prepayment/"+s.name, s.fn(p), string(SignalPrepayment))
		}
	}
	for _, l := range links {
		for _, s := range spell {
			if s.name == "spaced_syllables" || s.name == "dotted_syllables" {
				continue // a spaced host is not a link anyone can follow
			}
			add("payment_link/"+s.name, s.fn(l), string(SignalPaymentLink))
		}
	}
	benign := []string{
		"안전결제로 할게요", "네 앱 안에서 안전결제 버튼 눌러서 결제해주세요", "선입금은 안 해요 안전결제로 해주세요",
		"계좌이체 말고 안전결제로 부탁드려요", "선입금 요구하는 사람 조심하세요", "절대 선입금 하지 마세요 사기에요",
		"입금 확인했습니다 오늘 발송할게요", "결제 완료됐어요 감사합니다", "is it still available?", "아직 판매중인가요?",
		"I never pay upfront, only in-app payment", "no deposit first please, use the app", "네고 가능할까요? 3만원에 해주세요",
		"https://m.bunjang.co.kr/products/123 이 상품 맞나요?", "당근 링크 https://www.daangn.com/articles/77 보세요",
		"강남역 지도 https://map.naver.com/p/entry/place/11 여기서 만나요", "택배 조회 https://www.cjlogistics.com/ko/tool/parcel",
		"카카오페이로 송금했어요 kakaopay.com 확인해주세요", "직거래 원해요 현금으로 드릴게요", "the display on the phone is fine",
		"금요일에 만나요", "결제는 앱으로만 할게요", "계좌 개설은 은행에서 하세요 ㅎㅎ", "가격 내려주시면 바로 살게요",
		"토스 송금 안 받아요 안전결제만 해요", "입금하시면 안 돼요 앱 결제로 하세요", "safe trip! see you at the station",
		"payment via the app is fine", "this is my first time selling", "예약 가능할까요? 내일 볼게요",
	}
	for _, b := range benign {
		add("negative", b)
	}
	return out
}

// spaceHangulCues splits the Hangul words of s syllable by syllable with
// sep, as filter dodgers write 선 입 금.
func spaceHangulCues(s, sep string) string {
	var b strings.Builder
	prev := false
	for _, c := range s {
		h := isHangulSyllable(c)
		if h && prev {
			b.WriteString(sep)
		}
		b.WriteRune(c)
		prev = h
	}
	return b.String()
}

func TestPaymentCorpus(t *testing.T) {
	t.Parallel()
	cases := readJSONL[signalCase](t, "testdata/payment.jsonl")
	require.GreaterOrEqual(t, len(cases), 200)
	var missed, falsePos []string
	for _, c := range cases {
		kinds := map[string]bool{}
		for _, s := range FindSignals("m", c.Text) {
			kinds[string(s.Kind)] = true
			require.True(t, s.Start >= 0 && s.End <= len(c.Text) && s.Start <= s.End, "%s: span %d..%d", c.ID, s.Start, s.End)
			if s.Kind == SignalPrepayment {
				require.NotRegexp(t, `[0-9]`, s.Value, "%s: a prepayment value carries no digits", c.ID)
			}
		}
		if len(c.Want) == 0 {
			if kinds[string(SignalPrepayment)] || kinds[string(SignalPaymentLink)] {
				falsePos = append(falsePos, fmt.Sprintf("%s %q", c.ID, c.Text))
			}
			continue
		}
		for _, w := range c.Want {
			if !kinds[w] {
				missed = append(missed, fmt.Sprintf("%s (%s) %q", c.ID, c.Technique, c.Text))
			}
		}
	}
	require.Empty(t, missed)
	require.Empty(t, falsePos)
}

func TestPaymentSignalValues(t *testing.T) {
	t.Parallel()
	got := FindSignals("m7", "선 입 금 해주시면 바로 보내요 https://bunjang-pay.safe24.xyz/o/1")
	var kinds []string
	for _, s := range got {
		kinds = append(kinds, string(s.Kind)+"="+s.Value)
		require.Equal(t, "m7", s.MessageID)
	}
	require.Contains(t, kinds, "prepayment=선 입 금")
	require.Contains(t, kinds, "payment_link=bunjang-pay.safe24.xyz")
	// The platform's own page and a messenger link are never payment links.
	for _, text := range []string{"안전결제 https://m.bunjang.co.kr/pay/1", "안전결제는 open.kakao.com/o/abc 에서"} {
		for _, s := range FindSignals("m", text) {
			require.NotEqual(t, SignalPaymentLink, s.Kind, text)
		}
	}
}
