package llmsim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

func TestPrefillGrowsWithUncachedPromptTokens(t *testing.T) {
	s, err := New(func() Config { c := fastConfig(); c.PrefillPerToken = 10 * time.Microsecond; return c }())
	require.NoError(t, err)
	cfg := s.cfg.Load()
	short := &call{cfg: cfg, promptTokens: 100}
	long := &call{cfg: cfg, promptTokens: 4000}
	require.Equal(t, time.Millisecond, s.prefillTime(short))
	require.Equal(t, 40*time.Millisecond, s.prefillTime(long))
	// What the prefix cache holds is not prefilled again.
	warm := &call{cfg: cfg, promptTokens: 4000, cachedTokens: 3000}
	require.Equal(t, 10*time.Millisecond, s.prefillTime(warm))
}

func TestTokenLatencyGrowsWithTheRunningBatch(t *testing.T) {
	cfg := fastConfig()
	cfg.ITL, cfg.BatchSlowdown, cfg.MaxRunning = 10*time.Millisecond, 1, 64
	s, err := New(cfg)
	require.NoError(t, err)
	c := &call{cfg: s.cfg.Load(), itl: cfg.ITL}
	require.Equal(t, 10*time.Millisecond, s.tokenLatency(c))
	s.sched.nRunning.Store(32)
	require.Equal(t, 15*time.Millisecond, s.tokenLatency(c))
	s.sched.nRunning.Store(64)
	require.Equal(t, 20*time.Millisecond, s.tokenLatency(c))

	// The replica's token rate still grows with the batch, so a full batch
	// is its maximum goodput: 64 sequences of 1 ms TTFT + the tokens after
	// the first chunk (of 4) at 20 ms.
	require.InDelta(t, 64/0.121, cfg.MaxGoodput(0, 10), 0.01)
}

func TestBucketRefillsPerMinute(t *testing.T) {
	var b bucket
	t0 := time.Unix(1000, 0)
	// 600/min, a 1 s window: 10 at once, then one per 100 ms.
	for i := range 10 {
		ok, _, rem := b.take(t0, 600, time.Second, 1)
		require.True(t, ok, i)
		require.Equal(t, 9-i, rem)
	}
	ok, wait, _ := b.take(t0, 600, time.Second, 1)
	require.False(t, ok)
	require.Equal(t, 100*time.Millisecond, wait)
	ok, _, _ = b.take(t0.Add(100*time.Millisecond), 600, time.Second, 1)
	require.True(t, ok)
	// More than the bucket can ever hold waits a whole window.
	ok, wait, _ = b.take(t0.Add(time.Hour), 600, time.Second, 11)
	require.False(t, ok)
	require.Equal(t, time.Second, wait)
}

func TestManagedProfileRefusesOverRPMWithRetryAfter(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.RPM, cfg.RateWindow = 60, 2*time.Second // a burst of 2, then 1/s
	fx := setup(t, cfg, nil)
	for range 2 {
		_, err := fx.client.CreateChatCompletion(t.Context(), stageRequest(pipeline.StageTriage, testChat))
		require.NoError(t, err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, fx.run.URL+"/chat/completions",
		jsonBody(t, stageRequest(pipeline.StageTriage, testChat)))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, secs, 1)
	require.Equal(t, "60", resp.Header.Get("x-ratelimit-limit-requests"))
	require.Equal(t, int64(1), fx.sim.Stats().ChatRequests(OutcomeRateLimited))
	require.Equal(t, int64(2), fx.sim.Stats().ChatRequests(OutcomeOK))
}

func TestManagedProfileRefusesOverTPM(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.TPM = 60 // far less than one stage prompt
	fx := setup(t, cfg, nil)
	_, err := fx.client.CreateChatCompletion(t.Context(), stageRequest(pipeline.StageTriage, testChat))
	requireAPIError(t, err, http.StatusTooManyRequests, "rate_limit_exceeded")
	require.Equal(t, int64(1), fx.sim.Stats().ChatRequests(OutcomeRateLimited))
}

func TestServingMetrics(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.ITL = 100 * time.Microsecond
	cfg.BatchSlowdown = 1
	fx := setup(t, cfg, nil)
	_, _, _, _, err := streamAll(t, fx.client, stageRequest(pipeline.StageJudge, testChat))
	require.NoError(t, err)
	m := adminDo(t, http.MethodGet, fx.run.Root+"/metrics", "", http.StatusOK)
	require.Contains(t, m, `vllm:kv_cache_usage_perc{model_name="chatguard-sim"} 0`)
	require.Contains(t, m, `vllm:time_per_output_token_seconds_count{model_name="chatguard-sim"}`)
	require.NotContains(t, m, `vllm:time_per_output_token_seconds_count{model_name="chatguard-sim"} 0`)
	require.Zero(t, fx.sim.KVCacheUsage())

	// A running sequence holds its tokens.
	release := fx.sim.holdKV(256 * defaultKVTokensPerSeq / 2)
	require.InDelta(t, 0.5, fx.sim.KVCacheUsage(), 1e-9)
	release()
	require.Zero(t, fx.sim.KVCacheUsage())
}

func jsonBody(t *testing.T, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return bytes.NewReader(b)
}
