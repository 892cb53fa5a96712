package chatprep

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The pieces read as Redact reads, and each contact piece's value is the
// text it masks.
func TestRedactPiecesJoinAsRedact(t *testing.T) {
	for _, s := range []string{
		"",
		"안녕하세요 아이폰 아직 있나요?",
		"계좌 일이삼사오육칠팔구공일이삼사 로 보내주세요, 연락 ０１０－１２３４－５６７８",
		"카톡 아이디 safe_deal77 아니면 kim@naver.com 으로",
		"https://bunjang-pay.safe24.xyz/pay?acct=12345678901234 여기서 결제",
	} {
		pieces := RedactPieces(s)
		var b strings.Builder
		n := 0
		for _, p := range pieces {
			b.WriteString(p.Text)
			if p.Contact {
				v, ok := ContactValue(s, n)
				require.True(t, ok)
				require.Equal(t, s[p.Start:p.End], v)
				require.NotEqual(t, v, p.Text, "a contact piece is masked")
				n++
			}
		}
		require.Equal(t, Redact(s), b.String(), "pieces of %q", s)
		_, ok := ContactValue(s, n)
		require.False(t, ok, "no contact value past the last")
	}
}

// The host of a link stays as written, so look-alike domains can be
// judged; the account in its query is masked.
func TestRedactPiecesKeepLinkHosts(t *testing.T) {
	s := "https://bunjang-pay.safe24.xyz/pay?acct=12345678901234"
	got := Redact(s)
	require.Contains(t, got, "bunjang-pay.safe24.xyz")
	require.NotContains(t, got, "12345678901234")
}

// A number split by slashes is a number like one split by dashes; a date
// written with slashes stays a date.
func TestRedactSlashSeparatedNumbers(t *testing.T) {
	require.Equal(t, "***/****/**32 로 연락", Redact("010/9876/5432 로 연락"))
	require.Equal(t, "계좌 ****/****/****/34", Redact("계좌 1234/5678/9012/34"))
	require.Equal(t, "2026/11/30 14:00 에 만나요", Redact("2026/11/30 14:00 에 만나요"))
}
