package chatprep

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// bankSpec is the regular expression findBanks replaced, kept as its
// specification.
var bankSpec = func() *regexp.Regexp {
	var alts []string
	for _, n := range bankNames {
		var parts []string
		for _, r := range n {
			parts = append(parts, regexp.QuoteMeta(string(r)))
		}
		alts = append(alts, strings.Join(parts, `[ ._]?`))
	}
	return regexp.MustCompile(`(?:` + strings.Join(alts, "|") + `)(?:은행|뱅크)?|은행|뱅크|\bbank\b|계좌|예금주|\baccount\b|\bacct\b`)
}()

func TestFindBanksIsTheRegexp(t *testing.T) {
	t.Parallel()
	fixed := []string{
		"", "국민은행 123", "국.민 123", "농 협", "kb국민", "okbye", "bank", "mybank", "bank1", "banks", " bank.", "_bank",
		"account acct accounts", "카카오뱅크은행", "국민뱅크", "국민 은행", "하나은행하나", "우 리 은 행", "sc제일은행", "k뱅크",
		"예금주 홍길동 계좌", "\xff국민\xff은행", "새마을금고", "새마을", "씨티은행뱅크", "국_민.은 행",
	}
	for _, s := range fixed {
		require.Equal(t, bankSpec.FindAllStringIndex(s, -1), findBanks(s), "%q", s)
	}
	// Random texts from the pieces that matter: names cut anywhere, with
	// separators, word characters and bytes that are not UTF-8.
	var pieces []string
	for _, n := range bankNames {
		pieces = append(pieces, string(n), string(n[:len(n)/2+1]))
	}
	pieces = append(pieces, "은행", "뱅크", "bank", "account", "acct", "계좌", "예금주", " ", ".", "_", "a", "k", "1", "은", "행", "국", "민", "\xff", "b", "x")
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range 1 + rng.IntN(8) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		require.Equal(t, bankSpec.FindAllStringIndex(s, -1), findBanks(s), "%q", s)
	}
}
