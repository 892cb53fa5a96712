package review

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
	"github.com/chatguard/chatguard/stages"
)

func testReviewer(t *testing.T, key string) *Reviewer {
	t.Helper()
	var keys *pseudonym.Keys
	if key != "" {
		var err error
		keys, err = pseudonym.New([]byte(key))
		require.NoError(t, err)
	}
	rev, err := New(Config{Keys: keys}, parrot{}, nil, nil, nil)
	require.NoError(t, err)
	return rev
}

// TestRedactMasksOnlyStringValues: numbers and ids are never masked, so a
// confidence with many decimals (whose digits look like a phone number)
// stays a valid number and the answer stays valid JSON.
func TestRedactMasksOnlyStringValues(t *testing.T) {
	t.Parallel()
	rev := testReviewer(t, "")
	in := stages.JudgeOutput{Label: pipeline.LabelAbusive, Category: pipeline.CategoryOffPlatform, Severity: 4, Confidence: 0.01012345678123456,
		Action: pipeline.ActionWarn, EvidenceIDs: []string{"01012345678"},
		Rationale: "seller asks to call 010-1234-5678 or mail kim.deal@naver.com, 카톡 아이디: dealking99"}
	out := rev.redactOutput(pipeline.StageJudge, in, chatprep.Redact)
	require.True(t, json.Valid([]byte(out)), out)
	var got map[string]any
	d := json.NewDecoder(strings.NewReader(out))
	d.UseNumber()
	require.NoError(t, d.Decode(&got))
	require.Equal(t, json.Number("0.01012345678123456"), got["confidence"], "numbers are copied as they are")
	require.Equal(t, []any{"01012345678"}, got["evidence_ids"], "ids are ours, never masked")
	r := got["rationale"].(string)
	for _, raw := range []string{"1234-5678", "kim.deal", "dealking99"} {
		require.NotContains(t, r, raw)
	}
	// The schema's field order.
	require.True(t, strings.HasPrefix(out, `{"label":"abusive","category":"off_platform","severity":4,"confidence":0.01012345678123456,`), out)
}

// TestQuoteDigestIsKeyed: a quote digest is an HMAC: it depends on the
// key, so a phone number cannot be found by hashing every candidate, and
// the dev key is labelled.
func TestQuoteDigestIsKeyed(t *testing.T) {
	t.Parallel()
	dev := testReviewer(t, "")
	a := testReviewer(t, strings.Repeat("a", 32))
	b := testReviewer(t, strings.Repeat("b", 32))
	q := "010-1234-5678"
	require.True(t, strings.HasPrefix(dev.quoteDigest(q), "hmac2-dev:"))
	require.True(t, strings.HasPrefix(a.quoteDigest(q), "hmac2:"))
	require.Equal(t, a.quoteDigest(q), a.quoteDigest(q), "equal quotes join")
	require.NotEqual(t, a.quoteDigest(q), b.quoteDigest(q))
	require.Contains(t, a.quoteDigest(q), " len:13")
	out := a.redactOutput(pipeline.StageExtract, stages.ExtractOutput{Evidence: []stages.Evidence{{MessageID: "m1", Category: pipeline.CategoryOffPlatform, Quote: "010-1234-5678"}}}, chatprep.Redact)
	require.Contains(t, out, `"message_id":"m1"`)
	require.Contains(t, out, `"quote":"hmac2:`)
	require.NotContains(t, out, "5678")
}
