package console

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/live"
)

// A phone number streamed over several deltas leaves the process masked:
// tokens are flushed only at boundaries away from digits.
func TestTokensAreMaskedAcrossDeltas(t *testing.T) {
	hub, err := live.NewHub(live.DefaultConfig(), nil, nil)
	require.NoError(t, err)
	st, err := hub.Open("r")
	require.NoError(t, err)
	sub, _ := st.Subscribe(0)
	em := &emitter{st: st}
	em.Attempt(pipeline.StageJudge, 1, pipeline.PoolPrimary)
	for _, d := range []string{`{"rationale":"판매자가 `, "연락처 010", "-1234", "-5678 로 ", "카톡 이동을 요구", ` 합니다 "}`} {
		em.Delta(pipeline.StageJudge, d)
	}
	em.flush()
	st.Close()
	var text strings.Builder
	for ev := range sub.Events() {
		if ev.Type != pipeline.LiveToken {
			continue
		}
		var tok struct{ Text string }
		require.NoError(t, json.Unmarshal(ev.Data, &tok))
		text.WriteString(tok.Text)
	}
	require.Contains(t, text.String(), "카톡 이동을 요구")
	require.NotContains(t, text.String(), "1234")
	require.NotContains(t, text.String(), "5678")
}
