package chatprep

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// longDigits finds what a leak looks like: six or more digits in a row,
// the separators people write numbers with allowed between them.
var longDigits = regexp.MustCompile(`\d(?:[\s.\-]?\d){5,}`)

// Contact numbers written inside a link (a payment link to a phone number,
// an account number in a path or query) are contact numbers all the same:
// they leave for the third-party fallback as placeholders and are stored
// masked, while the link's host stays visible to the judge.
func TestNumbersInsideLinksAreMasked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, host string
		ph             []string // placeholders the pseudonymised text holds
	}{
		{"phone in a payment link", "송금은 https://toss.me/01012345678 여기로 해주세요", "toss.me", []string{"<PHONE_1>"}},
		{"account in a path", "여기로 보내주세요 https://pay.example.com/acct/110-123-456789", "pay.example.com", []string{"<ACCOUNT_1>"}},
		{"phone in a query", "https://pay.example.com/send?to=010-1234-5678&amount=30000 결제", "pay.example.com", []string{"<PHONE_1>"}},
		{"bare domain", "kakaopay.me/3333012345678 로 주세요", "kakaopay.me", []string{"<ACCOUNT_1>"}},
		{"fragment", "https://pay.example.com/#01098765432", "pay.example.com", []string{"<PHONE_1>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			red := Redact(tc.in)
			require.Empty(t, longDigits.FindAllString(red, -1), "stored text keeps a number: %s", red)
			require.Contains(t, red, tc.host, "the link's host stays visible")

			p := NewPseudonyms()
			sent := p.Apply(tc.in)
			require.Empty(t, longDigits.FindAllString(sent, -1), "fallback text keeps a number: %s", sent)
			require.Contains(t, sent, tc.host)
			for _, ph := range tc.ph {
				require.Contains(t, sent, ph)
			}
			// A model that quotes the link gets the original back, so its
			// evidence still matches the transcript.
			require.Equal(t, `"`+tc.in+`"`, string(p.RestoreJSON([]byte(`"`+sent+`"`))))
		})
	}
}

// A messenger link keeps its messenger-id placeholder: the number in
// wa.me/… is the id, not a second finding.
func TestMessengerLinkStaysOneMessengerID(t *testing.T) {
	t.Parallel()
	p := NewPseudonyms()
	require.Equal(t, "왓츠앱 wa.me/<MESSENGER_ID_1> 로 연락주세요", p.Apply("왓츠앱 wa.me/821012345678 로 연락주세요"))
}

// The judge learns that a link carries a phone or an account number; a
// long id in a shop link is masked in what leaves but is not reported as
// an account, since its length is all that suggests one.
func TestSignalsOfNumbersInsideLinks(t *testing.T) {
	t.Parallel()
	kinds := func(text string) map[SignalKind]string {
		out := map[SignalKind]string{}
		for _, s := range FindSignals("m", text) {
			out[s.Kind] = s.Value
		}
		return out
	}
	got := kinds("https://toss.me/01012345678")
	require.Equal(t, "*********78", got[SignalPhone])
	require.Equal(t, "toss.me", got[SignalURL])

	got = kinds("https://pay.example.com/acct/110-123-456789")
	require.Contains(t, got, SignalBankAccount)

	shop := "이거 맞나요 https://m.shop.example.com/products/1234567890"
	got = kinds(shop)
	require.NotContains(t, got, SignalBankAccount, "a shop link's id is no account")
	require.Equal(t, "m.shop.example.com", got[SignalURL])
	require.NotContains(t, Redact(shop), "1234567890")
	require.Empty(t, PrintMessage(shop).Contacts, "a shop link's id links no rooms")

	// Short numbers in links (an order id, a page) stay as written.
	for _, in := range []string{
		"https://bunjang-pay.safe24.xyz/pay?order=123456",
		"https://m.shop.example.com/products/123456789?page=2",
	} {
		require.Equal(t, in, Redact(in))
		require.Equal(t, in, NewPseudonyms().Apply(in))
	}
}
