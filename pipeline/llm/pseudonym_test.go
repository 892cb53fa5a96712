package llm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
)

// TestPseudonymizedPoolSeesPlaceholders: a pool with Pseudonymize gets the
// request's texts through its Pseudonyms, and its answer (which quotes a
// placeholder) reaches Validate and the caller with the original restored;
// a pool without it gets the texts as they are. The system message is the
// caller's instructions and goes unchanged, though its wording reads as a
// messenger id to the scanner.
func TestPseudonymizedPoolSeesPlaceholders(t *testing.T) {
	t.Parallel()
	const quoted = `{"risk":"high","reason":"asks to call <PHONE_1>"}`
	prim := newFake(t, status(503, "30"))
	fb := newFake(t, answer(quoted))
	r, _ := setup(t, setupOpts{primary: prim, fallback: fb, tweak: func(c *Config) { c.Fallback.Pseudonymize = true }})
	req := triageReq()
	const sys = "Flag a move to KakaoTalk or Telegram; give its message id exactly as in the transcript."
	req.Messages[0].Text = sys
	require.NotEqual(t, sys, chatprep.NewPseudonyms().Apply(sys), "the scanner would replace a word of the instructions")
	req.Messages[1].Text = "seller: 010-1234-5678 로 연락주세요, mail kim.deal@naver.com"
	req.Pseudonyms = chatprep.NewPseudonyms()
	var validated string
	req.Validate = func(b []byte) error {
		validated = string(b)
		var v map[string]any
		return json.Unmarshal(b, &v)
	}
	resp, err := r.Complete(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, pipeline.PoolFallback, resp.Pool)

	var sentFB string
	require.NoError(t, json.Unmarshal(fb.requests()[0].Messages[1].Content, &sentFB))
	require.Equal(t, "seller: <PHONE_1> 로 연락주세요, mail <EMAIL_1>", sentFB)
	var sysFB string
	require.NoError(t, json.Unmarshal(fb.requests()[0].Messages[0].Content, &sysFB))
	require.Equal(t, sys, sysFB, "the instructions reach the pseudonymized pool as written")
	var sentPrim string
	require.NoError(t, json.Unmarshal(prim.requests()[0].Messages[1].Content, &sentPrim))
	require.Contains(t, sentPrim, "010-1234-5678", "the primary pool is not pseudonymized")
	require.Contains(t, validated, "010-1234-5678", "the answer is validated with the original restored")
	require.True(t, strings.Contains(string(resp.Content), "010-1234-5678"))
}
