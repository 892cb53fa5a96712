package chatprep

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPseudonymsAreTypedAndConsistent(t *testing.T) {
	t.Parallel()
	p := NewPseudonyms()
	a := p.Apply("연락 010-1234-5678 or kim.deal@naver.com, 카톡 아이디: dealking99")
	require.NotContains(t, a, "1234")
	require.NotContains(t, a, "kim.deal")
	require.NotContains(t, a, "dealking99")
	require.Contains(t, a, "<PHONE_1>")
	require.Contains(t, a, "<EMAIL_1>")
	require.Contains(t, a, "<MESSENGER_ID_1>")
	// The same number, spelled otherwise and datamarked, in a later message.
	b := p.Apply(MarkData("again 010 1234 5678 and 010-9999-8888"))
	require.Contains(t, b, "<PHONE_1>")
	require.Contains(t, b, "<PHONE_2>")
	require.NotContains(t, b, "9999")
	require.Equal(t, 4, p.Len())
	for _, s := range []string{a, b} {
		require.Empty(t, scanContacts(s), s)
	}
	// An answer that quotes a placeholder gets the original back.
	got := string(p.RestoreJSON([]byte(`{"quote":"call <PHONE_1>","n":0.123456789}`)))
	require.Equal(t, `{"quote":"call 010-1234-5678","n":0.123456789}`, got)
	require.Equal(t, "no contact here", p.Apply("no contact here"))
}

// scanContacts lists the contact signals left in s.
func scanContacts(s string) []string {
	var out []string
	for _, sg := range FindSignals("m", s) {
		if _, ok := placeholderNames[sg.Kind]; ok {
			out = append(out, string(sg.Kind)+" "+sg.Value)
		}
	}
	return out
}

func TestPseudonymsKeepText(t *testing.T) {
	t.Parallel()
	in := strings.Repeat("네고 가능할까요? ", 3)
	require.Equal(t, in, NewPseudonyms().Apply(in))
}

func TestRedactMasksNamesWhereTheChatSaysSo(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"예금주 홍길동 으로 보내주세요":       "예금주 홍** 으로 보내주세요",
		"입금자명: 김철수":              "입금자명: 김**",
		"받는분 이영희, 010-1234-5678": "받는분 이**, ***-****-**78",
		"my name is John Smith.": "my name is J*** *****.",
		"이름 알려주세요":               "이름 알려주세요",
		"네고 가능한가요":               "네고 가능한가요",
		"예금주는 박민수 입니다":           "예금주는 박** 입니다",
	} {
		require.Equal(t, want, Redact(in), in)
	}
}

// TestConcealUndoesRestore: what RestoreJSON put back into an answer is
// concealed again as its placeholder, even a value (a messenger id) that
// Redact only recognises next to the words that introduced it.
func TestConcealUndoesRestore(t *testing.T) {
	t.Parallel()
	p := NewPseudonyms()
	sent := p.Apply("카톡 아이디: dealking99 아니면 010-1234-5678 로 전화")
	require.Equal(t, "카톡 아이디: <MESSENGER_ID_1> 아니면 <PHONE_1> 로 전화", sent)
	restored := string(p.RestoreJSON([]byte(`"연락은 <MESSENGER_ID_1>, 또는 <PHONE_1>"`)))
	require.Equal(t, `"연락은 dealking99, 또는 010-1234-5678"`, restored)
	require.Contains(t, Redact(restored), "dealking99", "out of context, Redact alone misses the id")
	require.Equal(t, `"연락은 <MESSENGER_ID_1>, 또는 <PHONE_1>"`, p.Conceal(restored))
	require.Equal(t, "nothing to hide", NewPseudonyms().Conceal("nothing to hide"))
}

// TestApplyReplacesKnownValuesAnywhere: a value that has a placeholder is
// replaced even where nothing around it says what it is, as in a repair
// request that echoes the pool's answer with the value restored.
func TestApplyReplacesKnownValuesAnywhere(t *testing.T) {
	t.Parallel()
	p := NewPseudonyms()
	require.Equal(t, "카톡 아이디: <MESSENGER_ID_1>", p.Apply("카톡 아이디: dealking99"))
	require.Equal(t, `{"risk":"<MESSENGER_ID_1>"}`, p.Apply(`{"risk":"dealking99"}`))
	require.Equal(t, "call <MESSENGER_ID_1> or <PHONE_1> → <PHONE_1>", p.Apply("call dealking99 or 010-1234-5678 → 010 1234 5678"))
}

// TestPseudonymsFindWhatScanFinds: Pseudonyms looks only for contact
// details (findContacts), and finds every one that the full scan finds, at
// the same spans and in the same order (the order numbers placeholders),
// over every checked-in corpus and each corpus as one text.
func TestPseudonymsFindWhatScanFinds(t *testing.T) {
	t.Parallel()
	contacts := func(ms []match) []match {
		var out []match
		for _, m := range ms {
			if _, ok := placeholderNames[m.kind]; ok {
				out = append(out, m)
			}
		}
		return out
	}
	found := 0
	for _, file := range []string{"signals.jsonl", "payment.jsonl", "injection_text.jsonl", "long.jsonl"} {
		var all []string
		for _, c := range readJSONL[signalCase](t, filepath.Join("testdata", file)) {
			all = append(all, c.Text)
		}
		for _, text := range append(all, strings.Join(all, "\n")) {
			n := Normalize(text)
			want := contacts(scan(n))
			var got []match
			if strings.TrimSpace(n.Text) != "" {
				got, _, _ = findContacts(lowerSameLen(n.Text))
			}
			require.Equal(t, want, contacts(got), "%s: %q", file, text)
			found += len(want)
		}
	}
	require.Greater(t, found, 100, "the corpora hold contact details to compare")
}
