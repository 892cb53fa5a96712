package chatprep

// TestDetectionRates prints the detection rates docs/performance.md reports.
// It uses only FindSignals, MaskNumbers and Prepare as they were before the
// hostile-input defences, so the same file measures the code before and
// after them:
//
//	go test ./pipeline/chatprep -run TestDetectionRates -v

import (
	"bufio"
	"encoding/json"

	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

type rateCase struct {
	ID        string   `json:"id"`
	Technique string   `json:"technique"`
	Text      string   `json:"text"`
	Want      []string `json:"want"`
	Secret    string   `json:"secret"`
}

func loadRateCases(t *testing.T, path string) []rateCase {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []rateCase
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var c rateCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// secretSurvives reports whether a reader could rebuild secret from s:
// separators and invisible characters removed, digits of any script read.
func secretSurvives(s, secret string) bool {
	var b strings.Builder
	hd := map[rune]rune{'공': '0', '영': '0', '빵': '0', '일': '1', '이': '2', '삼': '3', '사': '4', '오': '5', '육': '6', '륙': '6', '칠': '7', '팔': '8', '구': '9'}
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= '０' && r <= '９':
			r = '0' + r - '０'
		case r >= '①' && r <= '⑨':
			r = '1' + r - '①'
		case r == '⓪':
			r = '0'
		case r >= '𝟎' && r <= '𝟗':
			r = '0' + r - '𝟎'
		case r >= 'ａ' && r <= 'ｚ':
			r = 'a' + r - 'ａ'
		}
		if d, ok := hd[r]; ok {
			r = d
		}
		if (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') {
			b.WriteRune(r)
		}
	}
	want := strings.Map(func(r rune) rune {
		if (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') {
			return r
		}
		return -1
	}, strings.ToLower(secret))
	return want != "" && strings.Contains(b.String(), want)
}

func TestDetectionRates(t *testing.T) {
	t.Parallel()
	type tally struct{ n, hit, masked int }
	fam := map[string]*tally{}
	neg, fp := 0, 0
	for _, c := range loadRateCases(t, "testdata/signals.jsonl") {
		kinds := map[string]bool{}
		for _, s := range FindSignals("m", c.Text) {
			kinds[string(s.Kind)] = true
		}
		if len(c.Want) == 0 {
			neg++
			for _, k := range []string{"phone", "bank_account", "card_number", "resident_id", "email", "messenger_id"} {
				if kinds[k] {
					fp++
					break
				}
			}
			continue
		}
		f, _, _ := strings.Cut(c.Technique, "/")
		if fam[f] == nil {
			fam[f] = &tally{}
		}
		fam[f].n++
		ok := true
		for _, w := range c.Want {
			ok = ok && kinds[w]
		}
		if ok {
			fam[f].hit++
		}
		if !secretSurvives(MaskNumbers(c.Text), c.Secret) {
			fam[f].masked++
		}
	}
	var names []string
	for k := range fam {
		names = append(names, k)
	}
	sort.Strings(names)
	all := tally{}
	for _, k := range names {
		v := fam[k]
		all.n, all.hit, all.masked = all.n+v.n, all.hit+v.hit, all.masked+v.masked
		t.Logf("signals %-10s detected %3d/%3d (%5.1f%%)  masked %3d/%3d", k, v.hit, v.n, pct(v.hit, v.n), v.masked, v.n)
	}
	t.Logf("signals %-10s detected %3d/%3d (%5.1f%%)  masked %3d/%3d (%5.1f%%)", "all", all.hit, all.n, pct(all.hit, all.n), all.masked, all.n, pct(all.masked, all.n))
	t.Logf("signals negatives: %d/%d with a false contact signal", fp, neg)

	if _, err := os.Stat("testdata/long.jsonl"); err == nil {
		n, hit := 0, 0
		for _, c := range loadRateCases(t, "testdata/long.jsonl") {
			n++
			m := pipeline.ChatMessage{MessageID: "big", SenderRole: pipeline.RoleSeller, Kind: pipeline.KindText, SentAt: time.Unix(0, 0), Text: c.Text}
			w := Prepare([]pipeline.ChatMessage{m}, Config{})
			kinds := map[string]bool{}
			for _, s := range w.Signals {
				kinds[string(s.Kind)] = true
			}
			ok := true
			for _, want := range c.Want {
				ok = ok && kinds[want]
			}
			if ok {
				hit++
			}
		}
		t.Logf("long messages: needle signal found in %d/%d (%5.1f%%)", hit, n, pct(hit, n))
	}
	if _, err := os.Stat("testdata/payment.jsonl"); err == nil {
		paymentRates(t)
	}
	if _, err := os.Stat("testdata/injection_text.jsonl"); err == nil {
		n, hit, neg, fp := 0, 0, 0, 0
		for _, c := range loadRateCases(t, "testdata/injection_text.jsonl") {
			found := false
			for _, s := range FindSignals("m", c.Text) {
				found = found || s.Kind == "injection"
			}
			if len(c.Want) == 0 {
				neg++
				if found {
					fp++
				}
				continue
			}
			n++
			if found {
				hit++
			}
		}
		t.Logf("injection text: detected %d/%d (%5.1f%%), false %d/%d", hit, n, pct(hit, n), fp, neg)
	}
}

// paymentRates logs, per family of testdata/payment.jsonl, how many
// positives carry their own kind and how many carry any rule signal at all
// (before the payment signals existed, a look-alike link was only a URL),
// and how many negatives fire a payment kind or any signal.
func paymentRates(t *testing.T) {
	type tally struct{ n, kind, any int }
	fam := map[string]*tally{}
	neg, negKind, negAny := 0, 0, 0
	for _, c := range loadRateCases(t, "testdata/payment.jsonl") {
		kinds := map[string]bool{}
		sigs := FindSignals("m", c.Text)
		for _, s := range sigs {
			kinds[string(s.Kind)] = true
		}
		if len(c.Want) == 0 {
			neg++
			if kinds["prepayment"] || kinds["payment_link"] {
				negKind++
			}
			if len(sigs) > 0 {
				negAny++
			}
			continue
		}
		f, _, _ := strings.Cut(c.Technique, "/")
		if fam[f] == nil {
			fam[f] = &tally{}
		}
		fam[f].n++
		if kinds[c.Want[0]] {
			fam[f].kind++
		}
		if len(sigs) > 0 {
			fam[f].any++
		}
	}
	for _, f := range []string{"prepayment", "payment_link"} {
		if v := fam[f]; v != nil {
			t.Logf("payment %-12s own kind %3d/%3d (%5.1f%%)  any signal %3d/%3d (%5.1f%%)", f, v.kind, v.n, pct(v.kind, v.n), v.any, v.n, pct(v.any, v.n))
		}
	}
	t.Logf("payment negatives: payment kind %d/%d, any signal %d/%d", negKind, neg, negAny, neg)
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}
