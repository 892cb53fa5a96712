package review

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/llm"
)

// TestCostMetricMatchesInferenceLogs checks that the spend metric and the
// inference-log rows tell one story: with both pools priced (the primary
// by GPU time, the fallback per token), the router's
// chatguard_llm_cost_dollars_total by stage and pool is the sum of the
// rows' cost_usd, failed attempts included.
func TestCostMetricMatchesInferenceLogs(t *testing.T) {
	t.Parallel()
	e := setup(t, envOpts{
		primPrice: llm.Price{GPUHour: 4.1, SharedBy: 32},
		fbPrice:   llm.Price{PromptPerMTok: 2.5, CachedPerMTok: 1.25, CompletionPerMTok: 10},
	})
	_, err := e.rev.Review(t.Context(), event("c1"), externalPaymentChat, 1)
	require.NoError(t, err)
	// A failing primary: its failed attempts cost GPU time, and the
	// fallback answers at its token prices.
	e.prim.Configure(t, `{"faults":{"500":1}}`)
	_, err = e.rev.Review(t.Context(), event("c2"), externalPaymentChat, 1)
	require.NoError(t, err)

	type key struct {
		stage pipeline.StageName
		pool  pipeline.Pool
	}
	rows := map[key]float64{}
	for _, ev := range e.sink.all() {
		p := ev.Payload.(pipeline.InferenceLog)
		rows[key{p.Stage, p.Pool}] += p.CostUSD
	}
	metric := map[key]float64{}
	mfs, err := e.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "chatguard_llm_cost_dollars_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var k key
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "stage":
					k.stage = pipeline.StageName(l.GetValue())
				case "pool":
					k.pool = pipeline.Pool(l.GetValue())
				case "class":
					require.Contains(t, []string{"realtime", "batch", "interactive", "shadow"}, l.GetValue())
				}
			}
			metric[k] += m.GetCounter().GetValue()
		}
	}
	byPool := map[pipeline.Pool]float64{}
	priced := 0
	for k, usd := range rows {
		byPool[k.pool] += usd
		require.InDelta(t, usd, metric[k], 1e-12, "%s/%s: metric and rows disagree", k.stage, k.pool)
		if usd > 0 {
			priced++
		}
	}
	// A free attempt (no tokens at a token price) adds no series.
	require.Len(t, metric, priced, "a metric series without rows")
	require.Positive(t, byPool[pipeline.PoolPrimary], "the primary's GPU time is priced")
	require.Positive(t, byPool[pipeline.PoolFallback], "the fallback's tokens are priced")
}

// TestStoredStageOutputIsTheLoggedOutput: a stage's stored output is the
// answer its answering attempt's inference-log event carries, redacted
// once for both.
func TestStoredStageOutputIsTheLoggedOutput(t *testing.T) {
	t.Parallel()
	e := setup(t, envOpts{})
	v, err := e.rev.Review(t.Context(), event("o1"), externalPaymentChat, 1)
	require.NoError(t, err)
	logged := map[pipeline.StageName]string{}
	for _, ev := range e.sink.all() {
		p := ev.Payload.(pipeline.InferenceLog)
		if p.Outcome == "ok" {
			logged[p.Stage] = p.Output
		}
	}
	require.Len(t, v.Stages, 3)
	for i, st := range v.Stages {
		require.NotEmpty(t, st.Output)
		out := string(st.Output)
		if i == 0 {
			// The first stage's stored output also records what the review
			// found beside the answer: the rule-signal kinds.
			var obj map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(st.Output, &obj))
			require.Contains(t, obj, pipeline.RuleSignalsOutputKey)
			delete(obj, pipeline.RuleSignalsOutputKey)
			b, err := json.Marshal(obj)
			require.NoError(t, err)
			out = string(b)
		}
		require.JSONEq(t, logged[st.Stage], out, "%s", st.Stage)
	}
}
