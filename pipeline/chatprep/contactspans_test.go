package chatprep

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestContactSpansAreScansMasks: contactSpans searches only the contact
// details; it must mask exactly what every signal of scan masks, on every
// text of the signal, payment, injection and long-text corpora (which mix
// contacts with prepayment words, payment links and injections).
func TestContactSpansAreScansMasks(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	texts, masked := 0, 0
	for _, f := range files {
		fh, err := os.Open(f)
		require.NoError(t, err)
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var c struct {
				Text string `json:"text"`
			}
			require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
			want := scanMaskSpans(c.Text)
			require.Equal(t, want, contactSpans(c.Text), "%s: %q", f, c.Text)
			texts++
			if len(want) > 0 {
				masked++
			}
		}
		require.NoError(t, sc.Err())
		fh.Close()
	}
	require.Greater(t, texts, 500)
	require.Greater(t, masked, 100, "the corpora have contacts to mask")
}

// scanMaskSpans is contactSpans as it was: every match of the full scan
// that carries a mask, sorted and without overlaps.
func scanMaskSpans(s string) []maskSpan {
	if s == "" {
		return nil
	}
	n := Normalize(s)
	var spans []maskSpan
	for _, m := range scan(n) {
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
