package evalsample_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/evalsample"
	"github.com/chatguard/chatguard/deploy/local/llmsim"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/eval"
	"github.com/chatguard/chatguard/stages"
)

// TestPromptsReuseTheTranscriptFromThePrefixCache measures what the
// shared-prefix prompts are for (less prefill, so cheaper reviews) on the sample window (200 labelled
// rooms of the sample lake, seed 7) against llmsim's prefix-cache model:
//
//   - every stage after triage finds at least 90 % of its review's shared
//     prefix (system prompt, transcript, rule signals) in the cache: cached
//     tokens / triage's whole prompt, a lower bound, since triage's prompt
//     is that prefix plus triage's own task;
//   - prefill tokens per review (prompt minus cached) fall by at least 50 %
//     against the old layout at its best (each stage's own system prompt
//     cached, nothing else: the old prompts began with the stage's name);
//   - the verdicts are the same with the cache on and off, and agree with
//     the labels as before.
//
// It prints the table docs/performance.md quotes.
func TestPromptsReuseTheTranscriptFromThePrefixCache(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cases, err := evalsample.SampleCases(ctx, 7, 600, 200)
	require.NoError(t, err)
	cfg := llmsim.DefaultConfig()
	cfg.TTFT, cfg.ITL, cfg.Jitter = 0, 0, 0
	on, err := llmsim.Start(ctx, "127.0.0.1:0", cfg)
	require.NoError(t, err)
	cfg.PrefixCacheBlocks = 0
	off, err := llmsim.Start(ctx, "127.0.0.1:0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = on.Stop(c)
		_ = off.Stop(c)
	})
	res, err := eval.Run(ctx, eval.Config{
		Endpoints: []eval.Endpoint{{Name: "cache", BaseURL: on.URL, Model: llmsim.DefaultModel}, {Name: "nocache", BaseURL: off.URL, Model: llmsim.DefaultModel}},
		Cases:     cases, Concurrency: []int{1}, Repetitions: 1, TTFTSLO: time.Second, ReviewTimeout: time.Minute,
	})
	require.NoError(t, err)

	// The old layout at its best: each stage had a system prompt of its
	// own (naming the stage in its first words and holding the stage's
	// task), so a prefix cache could serve that system prompt across
	// reviews and nothing of the user message, which began with the
	// stage's name. Its prefill per call is taken as the user message of
	// the same call in the new layout (the old user message held the same
	// window header, chat, signals, findings and images, with
	// "Stage: <name>." in front instead of the short tail after the chat):
	// the call's prompt minus the shared system prompt and its 4 template
	// tokens. That leaves out the old system prompts' last partial block,
	// so it flatters the old layout a little.
	sysTokens := 4 + approxTokens(stages.SystemPrompt(pipeline.StageTriage))

	type acc struct{ calls, prompt, cached int }
	per := map[pipeline.StageName]*acc{}
	var reviews, prompt, cached, oldPrefill, minReuseBelow int
	minReuse := 1.0
	verdicts := map[string]pipeline.Verdict{}
	for _, r := range res.Reviews {
		require.True(t, r.OK(), "%s %s: %s", r.Endpoint, r.Case.ID, r.Err)
		if r.Endpoint == "nocache" {
			verdicts[r.Case.ID] = r.Verdict
			continue
		}
		reviews++
		var triagePrompt int
		for _, st := range r.Verdict.Stages {
			a := per[st.Stage]
			if a == nil {
				a = &acc{}
				per[st.Stage] = a
			}
			a.calls++
			a.prompt += st.TokensIn
			a.cached += st.TokensCached
			prompt += st.TokensIn
			cached += st.TokensCached
			oldPrefill += st.TokensIn - min(sysTokens, st.TokensIn)
			if st.Stage == pipeline.StageTriage {
				triagePrompt = st.TokensIn
				continue
			}
			reuse := float64(st.TokensCached) / float64(triagePrompt)
			minReuse = min(minReuse, reuse)
			if reuse < 0.9 {
				minReuseBelow++
			}
		}
	}
	t.Logf("%d reviews of the sample window; prefix cache of 16-token blocks", reviews)
	t.Logf("| stage | calls | prompt tokens/call | cached tokens/call | cached share |")
	t.Logf("| --- | ---: | ---: | ---: | ---: |")
	for _, st := range pipeline.Stages {
		if a := per[st]; a != nil {
			t.Logf("| %s | %d | %.0f | %.0f | %.1f%% |", st, a.calls, float64(a.prompt)/float64(a.calls), float64(a.cached)/float64(a.calls), 100*float64(a.cached)/float64(a.prompt))
		}
	}
	newPrefill := prompt - cached
	t.Logf("prefill tokens per review: no cache %.0f; old layout, best case %.0f; shared prefix %.0f (%.1f%% less than the old layout)",
		float64(prompt)/float64(reviews), float64(oldPrefill)/float64(reviews), float64(newPrefill)/float64(reviews),
		100*(1-float64(newPrefill)/float64(oldPrefill)))
	t.Logf("stages after triage: least reuse of the shared prefix %.1f%%; %d calls under 90%%", 100*minReuse, minReuseBelow)

	require.Zero(t, minReuseBelow, "every stage after triage reuses >= 90%% of the transcript")
	require.LessOrEqual(t, float64(newPrefill), 0.5*float64(oldPrefill), "prefill per review down >= 50%%")

	same, labelled, right := 0, 0, 0
	for _, r := range res.Reviews {
		if r.Endpoint != "cache" {
			continue
		}
		o := verdicts[r.Case.ID]
		if o.Label == r.Verdict.Label && o.Category == r.Verdict.Category && o.Severity == r.Verdict.Severity {
			same++
		}
		if r.Case.Truth != nil {
			labelled++
			if r.Verdict.Label == r.Case.Truth.Label {
				right++
			}
		}
	}
	t.Logf("verdicts identical with the cache on and off: %d of %d; label agrees with the truth set: %d of %d (%.1f%%)",
		same, reviews, right, labelled, 100*float64(right)/float64(labelled))
	require.Equal(t, reviews, same)
	require.GreaterOrEqual(t, float64(right)/float64(labelled), 0.9, "label agreement")
}

// approxTokens is llmsim's token estimate (4 ASCII bytes or one other rune
// per token), for the old layout's system-prompt bound.
func approxTokens(s string) int {
	n, ascii := 0, 0
	for _, r := range s {
		if r < 0x80 {
			ascii++
			if ascii == 4 {
				n++
				ascii = 0
			}
			continue
		}
		if ascii > 0 {
			n++
			ascii = 0
		}
		n++
	}
	if ascii > 0 {
		n++
	}
	return n
}
