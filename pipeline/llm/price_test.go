package llm

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPriceCost(t *testing.T) {
	t.Parallel()
	api := Price{PromptPerMTok: 2.5, CachedPerMTok: 1.25, CompletionPerMTok: 10}
	// 1,000,000 prompt tokens of which 600,000 cached, 100,000 out.
	require.InDelta(t, 0.4*2.5+0.6*1.25+0.1*10, api.Cost(1_000_000, 600_000, 100_000, time.Second), 1e-12)
	require.InDelta(t, 1.25, api.Cost(1_000_000, 2_000_000, 0, 0), 1e-12, "cached is capped at prompt")
	gpu := Price{GPUHour: 3.6, SharedBy: 8}
	require.InDelta(t, 2*3.6/3600/8, gpu.Cost(5000, 0, 300, 2*time.Second), 1e-15, "busy seconds at the shared GPU price")
	require.Zero(t, Price{}.Cost(1000, 0, 100, time.Minute), "no price, no cost")
	require.NoError(t, api.Validate())
	err := Price{PromptPerMTok: -1, GPUHour: math.NaN(), SharedBy: -2}.Validate()
	require.ErrorContains(t, err, "prompt price -1")
	require.ErrorContains(t, err, "gpu-hour price NaN")
	require.ErrorContains(t, err, "shared-by")
}

func TestParsePrice(t *testing.T) {
	t.Parallel()
	p, err := ParsePrice(" prompt=2.5, cached=1.25,completion=10,gpu_hour=4.5,shared_by=32 ")
	require.NoError(t, err)
	require.Equal(t, Price{PromptPerMTok: 2.5, CachedPerMTok: 1.25, CompletionPerMTok: 10, GPUHour: 4.5, SharedBy: 32}, p)
	p, err = ParsePrice("")
	require.NoError(t, err)
	require.Zero(t, p)
	_, err = ParsePrice("prompt=x,tokens=3,shared_by=1.5,cached")
	require.ErrorContains(t, err, `prompt "x"`)
	require.ErrorContains(t, err, `key "tokens"`)
	require.ErrorContains(t, err, "shared_by")
	require.ErrorContains(t, err, `"cached" is not key=value`)
	_, err = ParsePrice("completion=-1")
	require.ErrorContains(t, err, "completion price -1")
}

func TestPriceStringIsWhatParsePriceReads(t *testing.T) {
	t.Parallel()
	require.Empty(t, Price{}.String(), "free prints as the empty default")
	for _, p := range []Price{
		{PromptPerMTok: 2.5, CachedPerMTok: 1.25, CompletionPerMTok: 10},
		{GPUHour: 4.5, SharedBy: 32},
		{CompletionPerMTok: 0.1, GPUHour: 1e-3},
	} {
		got, err := ParsePrice(p.String())
		require.NoError(t, err, p.String())
		require.Equal(t, p, got)
	}
	require.Equal(t, "prompt=2.5,completion=10", Price{PromptPerMTok: 2.5, CompletionPerMTok: 10}.String())
}
