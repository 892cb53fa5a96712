package llmsim

import (
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

func msgs(sys, user string, images ...string) []chatMessage {
	return []chatMessage{
		{Role: "system", Content: content{text: sys}},
		{Role: "user", Content: content{text: user, images: images}},
	}
}

func TestPrefixCacheCountsLeadingBlocks(t *testing.T) {
	t.Parallel()
	p := newPrefixCache(1000)
	shared := strings.Repeat("abcd", 200) // 200 tokens
	prompt, cached := p.lookup(msgs("sys", shared+" triage task"))
	require.Equal(t, 0, cached, "a cold cache holds nothing")
	require.Equal(t, 2*perMessageTokens+countTokens("sys")+countTokens(shared+" triage task"), prompt,
		"the same count as usage.prompt_tokens")

	_, cached = p.lookup(msgs("sys", shared+" judge: a different task"))
	sharedTokens := 2*perMessageTokens + countTokens("sys") + countTokens(shared)
	require.Equal(t, sharedTokens/PrefixBlockTokens*PrefixBlockTokens, cached, "whole blocks of the shared prefix")

	prompt, cached = p.lookup(msgs("sys", shared+" triage task"))
	require.Equal(t, (prompt-1)/PrefixBlockTokens*PrefixBlockTokens, cached, "a repeat leaves the last token to compute")

	_, cached = p.lookup(msgs("other system prompt", shared+" triage task"))
	require.Equal(t, 0, cached, "a block hits only when everything before it matches")

	_, cached = p.lookup(msgs("sys", shared+" judge: a different task", "https://img.test/a.png"))
	require.GreaterOrEqual(t, cached, sharedTokens/PrefixBlockTokens*PrefixBlockTokens)
	st := p.stats()
	require.Positive(t, st.HitTokens)
	require.Greater(t, st.QueryTokens, st.HitTokens)
}

func TestPrefixCacheEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	p := newPrefixCache(20)
	a, b := strings.Repeat("aaaa", 160), strings.Repeat("bbbb", 160) // 10+ blocks each
	p.lookup(msgs("", a))
	p.lookup(msgs("", b))
	require.LessOrEqual(t, p.stats().Blocks, 20)
	p.lookup(msgs("", strings.Repeat("cccc", 160)))
	_, cached := p.lookup(msgs("", a))
	require.Equal(t, 0, cached, "a's blocks were the least recently used and went first")
	p.resize(0)
	require.Equal(t, 0, p.stats().Blocks)
	_, cached = p.lookup(msgs("", a))
	require.Equal(t, 0, cached, "size 0 turns the cache off")
}

func TestCachedTokensOverTheWire(t *testing.T) {
	t.Parallel()
	f := setup(t, fastConfig(), nil)
	chat := []line{{"b", "안녕하세요 " + strings.Repeat("물건 상태 어떤가요? ", 30), ""}}
	req := stageRequest(pipeline.StageTriage, chat)
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	_, _, u1, _, err := streamAll(t, f.client, req)
	require.NoError(t, err)
	require.NotNil(t, u1.PromptTokensDetails)
	require.Equal(t, 0, u1.PromptTokensDetails.CachedTokens)
	req.Stream, req.StreamOptions = false, nil
	resp, err := f.client.CreateChatCompletion(t.Context(), req)
	require.NoError(t, err)
	require.NotNil(t, resp.Usage.PromptTokensDetails)
	require.Greater(t, resp.Usage.PromptTokensDetails.CachedTokens, resp.Usage.PromptTokens*9/10)
	st := f.sim.Stats().PrefixCache
	require.Equal(t, int64(resp.Usage.PromptTokensDetails.CachedTokens), st.HitTokens)
	body := adminDo(t, "GET", strings.TrimSuffix(f.run.URL, "/v1")+"/metrics", "", 200)
	require.Contains(t, body, "vllm:prefix_cache_hits_total")
	require.NoError(t, f.sim.UpdateConfig(func(c *Config) { c.PrefixCacheBlocks = 0 }))
	resp, err = f.client.CreateChatCompletion(t.Context(), req)
	require.NoError(t, err)
	require.Nil(t, resp.Usage.PromptTokensDetails, "off, the server says nothing about caching")
}
