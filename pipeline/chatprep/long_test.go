package chatprep

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// longCase positions: where in the message the needle sits.
const (
	posHead   = "head"
	posMiddle = "middle"
	posEnd    = "end"
	posEdge   = "edge" // across where the head would be cut
)

var fillers = []string{
	"네 상품 상태 정말 좋아요 박스 풀구성이고 기스 하나 없습니다. ",
	"The item is in great condition, barely used, with the original box. ",
	"ㅋㅋㅋ 그럼요 ~~ 천천히 보시고 연락주세요!! ",
	"가격은 조금 조정 가능하니까 말씀해 주세요 ",
	"lorem ipsum dolor sit amet consectetur adipiscing elit ",
}

func genLongCorpus() []signalCase {
	r := rand.New(rand.NewPCG(corpusSeed, 2))
	var out []signalCase
	needles := []struct {
		kind string
		fn   func() (string, string)
	}{
		{string(SignalPhone), func() (string, string) {
			g := genPhone(r)
			return "제 번호 " + strings.Join(g, "-") + " 로 연락", strings.Join(g, "")
		}},
		{string(SignalPhone), func() (string, string) {
			g := genPhone(r)
			return "번호 " + digitObfuscations[1].fn(r, g), strings.Join(g, "")
		}},
		{string(SignalBankAccount), func() (string, string) {
			g := genAccount(r, false)
			return "농협 " + strings.Join(g, "-") + " 선입금 부탁", strings.Join(g, "")
		}},
		{string(SignalEmail), func() (string, string) { return "mail: fast_seller 골뱅이 naver 점 com", "fast_seller" }},
		{string(SignalURL), func() (string, string) { return "결제는 https://bunjang-pay.safe24.xyz/pay 여기서", "" }},
		{string(SignalMessengerID), func() (string, string) { return "텔레 t.me/quicksell99 로 와요", "quicksell99" }},
	}
	sizes := []int{3_000, 12_000, 100_000}
	for _, size := range sizes {
		for _, pos := range []string{posHead, posMiddle, posEnd, posEdge} {
			for i, n := range needles {
				if size == 100_000 && i != 0 {
					continue // a few 100 KB messages are enough, and keep testdata small
				}
				needle, secret := n.fn()
				var b strings.Builder
				for b.Len() < size {
					b.WriteString(fillers[r.IntN(len(fillers))])
				}
				filler := []rune(b.String())
				var at int
				switch pos {
				case posHead:
					at = 20
				case posMiddle:
					at = len(filler) / 2
				case posEnd:
					at = len(filler)
				case posEdge:
					at = DefaultMaxMessageRunes/2 - utf8.RuneCountInString(needle)/2
				}
				text := string(filler[:at]) + " " + needle + " " + string(filler[at:])
				out = append(out, signalCase{ID: fmt.Sprintf("l%03d", len(out)+1), Technique: fmt.Sprintf("%s/%d/%s", n.kind, size, pos), Text: text, Want: []string{n.kind}, Secret: secret})
			}
		}
	}
	return out
}

func TestLongCorpus(t *testing.T) {
	t.Parallel()
	cases := readJSONL[signalCase](t, "testdata/long.jsonl")
	require.GreaterOrEqual(t, len(cases), 50)
	for _, c := range cases {
		m := pipeline.ChatMessage{MessageID: "big", SenderRole: pipeline.RoleSeller, Kind: pipeline.KindText, SentAt: t0, Text: c.Text}
		w := Prepare([]pipeline.ChatMessage{msg("a", -1, pipeline.RoleBuyer, pipeline.KindText, "아직 있나요?"), m}, Config{})
		require.Len(t, w.Messages, 2, c.ID)
		seen := w.Messages[1].Text
		var found *Signal
		for i, s := range w.Signals {
			if string(s.Kind) == c.Want[0] {
				found = &w.Signals[i]
			}
		}
		require.NotNil(t, found, "%s (%s): the needle's signal is lost; got %v", c.ID, c.Technique, kvs(w.Signals))
		require.Equal(t, "big", found.MessageID)
		// The span points at the needle in the original text.
		require.Greater(t, found.End, found.Start)
		norm := Normalize(c.Text).Text
		total := utf8.RuneCountInString(norm)
		if total <= DefaultMaxMessageRunes {
			require.Equal(t, norm, seen, c.ID)
			require.False(t, found.Cut)
			continue
		}
		// A cut message keeps its head and tail around the marker, which
		// says how much is missing.
		require.Equal(t, 1, w.Truncated, c.ID)
		require.Contains(t, seen, CutMarker(w.CutRunes), c.ID)
		require.Equal(t, total, utf8.RuneCountInString(seen)-utf8.RuneCountInString(" "+CutMarker(w.CutRunes)+" ")+w.CutRunes, c.ID)
		head, tail, _ := strings.Cut(seen, " "+CutMarker(w.CutRunes)+" ")
		require.True(t, strings.HasPrefix(norm, head), c.ID)
		require.True(t, strings.HasSuffix(norm, tail), c.ID)
		// The models either see the needle whole or are told it was cut.
		needleText := c.Text[found.Start:found.End]
		visible := strings.Contains(seen, Normalize(needleText).Text)
		require.Equal(t, !visible, found.Cut, "%s (%s): cut=%v but visible=%v", c.ID, c.Technique, found.Cut, visible)
		pos := c.Technique[strings.LastIndexByte(c.Technique, '/')+1:]
		switch pos {
		case posMiddle:
			require.True(t, found.Cut, c.ID)
		case posHead, posEnd, posEdge:
			require.False(t, found.Cut, "%s: a needle at the %s stays visible", c.ID, pos)
		}
		if c.Secret != "" && len(c.Text) < 50_000 {
			// Masking is position-independent; the short cases prove it.
			require.NotContains(t, canonical(Redact(c.Text)), canonical(c.Secret), c.ID)
		}
	}
}
