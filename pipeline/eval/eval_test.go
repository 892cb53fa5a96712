package eval

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/eval/stats"
)

func TestMain(m *testing.M) { standin.Main(m) }

func TestParseEndpoint(t *testing.T) {
	t.Parallel()
	e, err := ParseEndpoint("fp8=http://vllm:8000/v1,qwen-fp8")
	require.NoError(t, err)
	require.Equal(t, Endpoint{Name: "fp8", BaseURL: "http://vllm:8000/v1", Model: "qwen-fp8"}, e)
	_, err = ParseEndpoint("no-model=http://x/v1")
	require.ErrorContains(t, err, "name=base_url,model")
	_, err = ParseEndpoint("bad name=ftp://x,m")
	require.ErrorContains(t, err, "endpoint name")
	require.ErrorContains(t, err, "not an http(s) URL")
}

func TestReadInjectionSuitePairsEachAttackWithItsBase(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../review/testdata/injection_suite.jsonl")
	require.NoError(t, err)
	defer f.Close()
	cases, err := ReadInjectionSuite(f)
	require.NoError(t, err)
	require.Len(t, cases, 2*52)
	byID := map[string]Case{}
	for _, c := range cases {
		byID[c.ID] = c
	}
	for _, c := range cases {
		if c.Source != SourceInjection {
			continue
		}
		base, ok := byID[c.BaseID]
		require.True(t, ok, c.ID)
		require.Len(t, base.Messages, len(c.Messages)-1, "the base lacks exactly the attack")
	}
	_, err = ReadInjectionSuite(strings.NewReader(`{"id":"x","chat":[{"role":"buyer","text":"a"}],"attack":3}`))
	require.ErrorContains(t, err, "attack 3")
}

func TestCasesRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC)
	in := []Case{{ID: "r1", Source: SourceSample, Truth: &Truth{Label: pipeline.LabelAbusive, Category: pipeline.CategorySpam},
		Messages: []pipeline.ChatMessage{{MessageID: "m1", SenderRole: pipeline.RoleBuyer, SentAt: at, Kind: pipeline.KindText, Text: "<b>&"}}}}
	var b strings.Builder
	require.NoError(t, WriteCases(&b, in))
	out, err := ReadCases(strings.NewReader(b.String()))
	require.NoError(t, err)
	require.Equal(t, in, out)
	_, err = ReadCases(strings.NewReader(`{"id":"","messages":[],"truth":{"label":"bad"}}`))
	require.ErrorContains(t, err, "id is empty")
	require.ErrorContains(t, err, "no messages")
	require.ErrorContains(t, err, `label "bad"`)
}

func rv(ep, id string, label pipeline.Label, cat pipeline.Category, stages ...pipeline.StageResult) Review {
	return Review{Endpoint: ep, Case: &Case{ID: id}, Verdict: pipeline.Verdict{Status: pipeline.StatusDone, Label: label, Category: cat, Stages: stages}}
}

func TestQualityCountsCategoriesAndFlags(t *testing.T) {
	t.Parallel()
	truth := func(l pipeline.Label, c pipeline.Category) *Truth { return &Truth{Label: l, Category: c} }
	cases := []Case{
		{ID: "a", Truth: truth(pipeline.LabelAbusive, pipeline.CategorySpam)},            // right
		{ID: "b", Truth: truth(pipeline.LabelAbusive, pipeline.CategorySpam)},            // flagged, wrong category
		{ID: "c", Truth: truth(pipeline.LabelClean, pipeline.CategoryClean)},             // false flag
		{ID: "d", Truth: truth(pipeline.LabelSuspicious, pipeline.CategoryPhishingLink)}, // missed
		{ID: "e", Truth: truth(pipeline.LabelClean, pipeline.CategoryClean)},             // right clean
		{ID: "f", Truth: truth(pipeline.LabelAbusive, pipeline.CategoryPhishingLink)},    // failed review: a miss
	}
	got := map[string]Review{
		"a": rv("x", "a", pipeline.LabelAbusive, pipeline.CategorySpam),
		"b": rv("x", "b", pipeline.LabelSuspicious, pipeline.CategoryOffPlatform),
		"c": rv("x", "c", pipeline.LabelSuspicious, pipeline.CategorySpam),
		"d": rv("x", "d", pipeline.LabelClean, pipeline.CategoryClean),
		"e": rv("x", "e", pipeline.LabelClean, pipeline.CategoryClean),
		"f": {Endpoint: "x", Case: &Case{ID: "f"}, Err: "timeout"},
	}
	q := map[string]Quality{}
	for _, x := range quality("x", cases, got) {
		q[x.Category] = x
	}
	o := q["overall"]
	require.Equal(t, [3]int{2, 1, 2}, [3]int{o.TP, o.FP, o.FN}) // a,b flagged right; c false; d,f missed
	require.InDelta(t, 2.0/3, o.Precision, 1e-9)
	require.InDelta(t, 0.5, o.Recall, 1e-9)
	s := q["spam"]
	require.Equal(t, [4]int{1, 1, 1, 2}, [4]int{s.TP, s.FP, s.FN, s.Support})
	require.Equal(t, 1, q["off_platform"].FP)
	require.Equal(t, 2, q["phishing_link"].FN)
}

func TestRobustnessAgreementAndCost(t *testing.T) {
	t.Parallel()
	cases := []Case{
		{ID: "i1", Source: SourceInjection, BaseID: "i1-base"}, {ID: "i1-base", Source: SourceBase},
		{ID: "i2", Source: SourceInjection, BaseID: "i2-base"}, {ID: "i2-base", Source: SourceBase},
	}
	st := pipeline.StageResult{Stage: pipeline.StageTriage, TokensIn: 1000, TokensCached: 900, TokensOut: 50, CostUSD: 0.002}
	x := map[string]Review{
		"i1": rv("x", "i1", pipeline.LabelClean, pipeline.CategoryClean, st), "i1-base": rv("x", "i1-base", pipeline.LabelAbusive, pipeline.CategorySpam, st),
		"i2": rv("x", "i2", pipeline.LabelAbusive, pipeline.CategorySpam, st), "i2-base": rv("x", "i2-base", pipeline.LabelAbusive, pipeline.CategorySpam, st),
	}
	rb := robustness("x", cases, x)
	require.Equal(t, 2, rb.Pairs)
	require.InDelta(t, 0.5, rb.Changed, 1e-9)
	require.InDelta(t, 0.5, rb.Cleaned, 1e-9)
	require.InDelta(t, 0.5, rb.Flagged, 1e-9)
	y := map[string]Review{
		"i1": rv("y", "i1", pipeline.LabelClean, pipeline.CategoryClean), "i1-base": rv("y", "i1-base", pipeline.LabelAbusive, pipeline.CategoryPhishingLink),
		"i2": rv("y", "i2", pipeline.LabelAbusive, pipeline.CategorySpam), "i2-base": rv("y", "i2-base", pipeline.LabelSuspicious, pipeline.CategorySpam),
	}
	ag := agreement("x", "y", cases, x, y)
	require.Equal(t, 4, ag.Cases)
	require.InDelta(t, 0.75, ag.Label, 1e-9)
	require.InDelta(t, 0.5, ag.LabelCategory, 1e-9)
	var all []Review
	for _, r := range x {
		all = append(all, r)
	}
	c := cost("x", all)
	require.Equal(t, 4, c.Reviews)
	require.InDelta(t, 900, c.CachedTokens, 1e-9)
	require.InDelta(t, 2.0, c.PerThousand, 1e-9)
}

func TestModeratorFeedbackPrecisionPerCategoryAndWeek(t *testing.T) {
	t.Parallel()
	ev := func(at, vl, vc, dl string) string {
		return `{"event_id":"x","event_type":"moderator_feedback","occurred_at":"` + at + `","schema_version":1,"payload":{"room_id":"r","verdict_label":"` + vl +
			`","verdict_category":"` + vc + `","decided_label":"` + dl + `"}}`
	}
	in := strings.Join([]string{
		ev("2026-11-02T10:00:00Z", "abusive", "spam", "abusive"),
		ev("2026-11-03T10:00:00Z", "suspicious", "spam", "clean"),
		ev("2026-11-03T11:00:00Z", "clean", "clean", "abusive"), // not a flag: left out
		ev("2026-11-10T10:00:00Z", "abusive", "spam", "suspicious"),
		`{"event_type":"inference_log","payload":{}}`, `not json`,
	}, "\n")
	got, err := ReadModeratorFeedback(strings.NewReader(in))
	require.NoError(t, err)
	require.Equal(t, []ModeratorPrecision{
		{Week: "2026-W45", Category: "spam", Decisions: 2, Kept: 1, Precision: 0.5},
		{Week: "2026-W46", Category: "spam", Decisions: 1, Kept: 1, Precision: 1},
	}, got)
}

// TestRunAndReportAgainstTheSimulator runs a few cases through two
// simulated endpoints and checks the report's figures and files.
func TestRunAndReportAgainstTheSimulator(t *testing.T) {
	t.Parallel()
	sim := standin.StartLLM(t, standin.LLMOptions{Name: "primary", Model: "m", Config: `{"ttft":"1ms","itl":"0s","version":"0.0-sim","max_model_len":32768}`})
	f, err := os.Open("../review/testdata/injection_suite.jsonl")
	require.NoError(t, err)
	defer f.Close()
	cases, err := ReadInjectionSuite(f)
	require.NoError(t, err)
	cases = cases[:6]
	cases[1].Truth = &Truth{Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment}
	var done atomic.Int64
	cfg := Config{
		Endpoints: []Endpoint{{Name: "a", BaseURL: sim.BaseURL, Model: "m", Notes: "dtype=bf16,tp=1"}, {Name: "b", BaseURL: sim.BaseURL, Model: "m"}},
		Cases:     cases, Concurrency: []int{1, 3}, Repetitions: 2, TTFTSLO: time.Second, ReviewTimeout: 30 * time.Second,
		Reference: "a", MaxRecallLoss: Margins{Default: 0.01},
	}
	cfg.Progress = func() { done.Add(1) }
	res, err := Run(t.Context(), cfg)
	require.NoError(t, err)
	require.Equal(t, int64(cfg.Total()), done.Load())
	require.Len(t, res.Reviews, 2*2*2*6)
	require.Len(t, res.Steps, 2*2*2)
	require.Equal(t, "0.0-sim", res.Facts["a"].Version)
	require.Equal(t, []ModelFact{{ID: "m", MaxModelLen: 32768, OwnedBy: "llmsim"}}, res.Facts["a"].Models)
	for _, r := range res.Reviews {
		require.True(t, r.OK(), "%s: %s", r.Case.ID, r.Err)
	}
	s := Summarise(res)
	require.Len(t, s.Agreement, 1)
	require.InDelta(t, 1, s.Agreement[0].Label, 1e-9, "the same simulator agrees with itself")
	require.Equal(t, 3, s.Robustness[0].Pairs)
	require.NotEmpty(t, s.Stages)
	require.Positive(t, s.Stages[0].PromptTokens)
	dir := t.TempDir()
	require.NoError(t, WriteReport(dir, res, s, ReportOptions{Note: "SIMULATED", Format: "png"}))
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "SIMULATED")
	require.Contains(t, string(md), "## Injection robustness")
	require.Contains(t, string(md), "| a | "+sim.BaseURL+" | m | 0.0-sim | 32768 | dtype=bf16,tp=1 |")
	require.Contains(t, string(md), "- b, **overall** recall: **inconclusive**: the set can only detect", "one positive case cannot decide")
	require.Contains(t, string(md), "clustered by **case (the set names no room_id")
	require.Contains(t, string(md), "### Set size for the next run")
	require.Contains(t, string(md), "| a | a (repetition 2) | 6 | 0 | 0.0% |")
	for _, p := range []string{"ttft.png", "wall.png", "goodput.png"} {
		fi, err := os.Stat(filepath.Join(dir, p))
		require.NoError(t, err)
		require.Positive(t, fi.Size())
	}
}

// pairedResult is a reference that finds every positive and a candidate
// that misses the first miss of them, over 300 positive and 100 clean
// rooms, two repetitions.
func pairedResult(miss int) Result {
	var cases []Case
	for i := range 400 {
		c := Case{ID: fmt.Sprintf("r%03d", i), Source: SourceSample, Truth: &Truth{Label: pipeline.LabelAbusive, Category: pipeline.CategorySpam}}
		if i >= 300 {
			c.Truth = &Truth{Label: pipeline.LabelClean, Category: pipeline.CategoryClean}
		}
		cases = append(cases, c)
	}
	res := Result{Cases: cases, Endpoints: []Endpoint{{Name: "ref"}, {Name: "cand"}},
		Config: Config{Concurrency: []int{1}, Repetitions: 2, Reference: "ref", MaxRecallLoss: Margins{Default: 0.01}, Seed: 1}}
	for rep := range 2 {
		for i := range cases {
			c := &cases[i]
			right := rv("ref", c.ID, c.Truth.Label, c.Truth.Category)
			right.Case, right.Concurrency, right.Rep = c, 1, rep
			cand := right
			cand.Endpoint = "cand"
			if i < miss {
				cand.Verdict.Label, cand.Verdict.Category = pipeline.LabelClean, pipeline.CategoryClean
			}
			res.Reviews = append(res.Reviews, right, cand)
		}
	}
	return res
}

func TestPairedComparisonDecides(t *testing.T) {
	t.Parallel()
	s := Summarise(pairedResult(30))
	require.Len(t, s.Paired, 2, "overall and spam")
	o := s.Paired[0]
	require.Equal(t, "overall", o.Category)
	require.Equal(t, 300, o.Positives)
	require.Equal(t, [2]int{60, 0}, [2]int{o.B, o.C}, "both repetitions, as the estimate counts them")
	require.Equal(t, 600, o.Decision.Pairs)
	require.Equal(t, 300, o.Decision.Clusters, "a repetition is not a cluster of its own")
	require.InDelta(t, 0.1, o.Decision.Loss, 1e-9)
	require.Equal(t, stats.LossDetected, o.Decision.Outcome)
	require.Less(t, o.Deltas.Recall.Hi, 0.0, "the bootstrap interval of the delta excludes 0")
	require.Equal(t, [2]int{60, 0}, [2]int{o.Ref.TP - o.Cand.TP, o.Cand.FP}, "both repetitions count")

	same := Summarise(pairedResult(0))
	require.Equal(t, stats.Inconclusive, same.Paired[0].Decision.Outcome, "0 lost of 300 still allows a loss of 1.3 points")
	require.Equal(t, stats.NoLossBeyondMargin, Summarise(withMargin(pairedResult(0), 0.02)).Paired[0].Decision.Outcome)
	require.Equal(t, Flips{A: "ref", B: "cand", Cases: 400, Kappa: 1}, same.Flips[0])
	require.Equal(t, Flips{A: "ref", B: "ref", Cases: 400, Kappa: 1}, same.Flips[1], "the reference against its second repetition")

	few := Summarise(pairedResult(2))
	require.Equal(t, stats.Inconclusive, few.Paired[0].Decision.Outcome, "2 of 300: neither significant nor bounded below 1 point")
	require.Positive(t, few.Paired[0].NeededN)
}

// TestPairedDecisionsClusterByRoomAccountAndCampaign: the same loss on
// three windows per room is one third of the evidence; cases sharing an
// account or a campaign are one cluster.
func TestPairedDecisionsClusterByRoomAccountAndCampaign(t *testing.T) {
	t.Parallel()
	flat := Summarise(pairedResult(30)).Paired[0]
	res := pairedResult(30)
	for i := range res.Cases {
		res.Cases[i].RoomID = fmt.Sprintf("room%03d", i/3) // windows 0-2 of a room
	}
	rooms := Summarise(res).Paired[0]
	require.Equal(t, "room", rooms.Clustering)
	require.Equal(t, 100, rooms.Decision.Clusters, "300 positives in 100 rooms")
	require.InDelta(t, flat.Decision.Loss, rooms.Decision.Loss, 1e-12, "the estimate does not move")
	require.Greater(t, rooms.Decision.CI.Hi-rooms.Decision.CI.Lo, 1.5*(flat.Decision.CI.Hi-flat.Decision.CI.Lo),
		"three windows failing together are not three pieces of evidence")
	require.Greater(t, rooms.Decision.Deff, 2.0)

	cl := clusterCases([]Case{
		{ID: "a", RoomID: "r1", Truth: &Truth{}}, {ID: "b", RoomID: "r2", Account: "hmac:x", Truth: &Truth{}},
		{ID: "c", RoomID: "r3", Account: "hmac:x", Campaign: "hmac:k", Truth: &Truth{}}, {ID: "d", RoomID: "r4", Campaign: "hmac:k", Truth: &Truth{}},
		{ID: "e", Truth: &Truth{}},
	})
	require.Equal(t, 3, cl.n, "r1; r2, r3 and r4 by account then campaign; e alone")
	require.Equal(t, cl.of["b"], cl.of["d"])
	require.NotEqual(t, cl.of["a"], cl.of["b"])
	require.Equal(t, "room, account and campaign (cases sharing any of them form one cluster)", cl.name)
}

// TestFlagRateDecisionSeesACandidateThatFlagsEverything: equal recall,
// every clean case flagged: the recall decision cannot see it, the flag
// rate's does.
func TestFlagRateDecisionSeesACandidateThatFlagsEverything(t *testing.T) {
	t.Parallel()
	res := pairedResult(0)
	for i := range res.Reviews {
		r := &res.Reviews[i]
		if r.Endpoint == "cand" && r.Case.Truth.Label == pipeline.LabelClean {
			r.Verdict.Label, r.Verdict.Category = pipeline.LabelAbusive, pipeline.CategorySpam
		}
	}
	res.Config.MaxFlagRateIncrease = 0.02
	o := Summarise(res).Paired[0]
	require.NotEqual(t, stats.LossDetected, o.Decision.Outcome)
	require.NotNil(t, o.FlagRate)
	require.Equal(t, stats.LossDetected, o.FlagRate.Outcome)
	require.InDelta(t, 0.25, o.FlagRate.Loss, 1e-12, "100 more flags in 400 cases")
	require.InDelta(t, 0.75, o.RefFlagRate, 1e-12)
	require.Contains(t, o.FlagRate.String(), "**flag-rate increase detected**")
}

// TestCategoriesAreDecidedUnderHolm: with several categories each
// category's interval is stated at its Holm level, wider than α's.
func TestCategoriesAreDecidedUnderHolm(t *testing.T) {
	t.Parallel()
	res := pairedResult(30)
	for i := range res.Cases {
		if i%2 == 1 && res.Cases[i].Truth.Label != pipeline.LabelClean {
			res.Cases[i].Truth.Category = pipeline.CategoryPhishingLink
		}
	}
	for i := range res.Reviews {
		r := &res.Reviews[i]
		if r.Verdict.Label != pipeline.LabelClean {
			r.Verdict.Category = r.Case.Truth.Category
		}
	}
	ps := Summarise(res).Paired
	require.Len(t, ps, 3)
	require.False(t, ps[0].Decision.Holm, "overall is primary, at α")
	require.InDelta(t, Alpha, ps[0].Decision.Alpha, 1e-12)
	for _, p := range ps[1:] {
		require.True(t, p.Decision.Holm)
		require.Less(t, p.Decision.Alpha, Alpha+1e-12)
	}
	require.Contains(t, ps[1].Decision.String(), "(Holm)")
}

func TestWeightedRecallUsesTheStrataWeights(t *testing.T) {
	t.Parallel()
	res := pairedResult(30)
	for i := range res.Cases {
		res.Cases[i].Weight = 1
		if i < 30 {
			res.Cases[i].Weight = 9 // the cases cand misses stand for many more
		}
	}
	s := Summarise(res)
	require.Len(t, s.Weighted, 2)
	cand := s.Weighted[1]
	require.Equal(t, "cand", cand.Endpoint)
	require.InDelta(t, 0.9, cand.Recall, 1e-12)
	require.InDelta(t, 270.0/(270+270), cand.WeightedRecall, 1e-12)
	var b strings.Builder
	writeWeighted(&b, s)
	require.Contains(t, b.String(), "| cand | 0.900 | 0.500 |")
}

func withMargin(r Result, m float64) Result {
	r.Config.MaxRecallLoss.Default = m
	return r
}

// inlineGate stands in for the worker's inlining gate: every image is
// "fetched" and sent as a data: URL.
type inlineGate struct{ calls atomic.Int64 }

func (g *inlineGate) Admit(context.Context, string) (string, error) {
	g.calls.Add(1)
	return "data:image/jpeg;base64,AAAA", nil
}

// TestInlineImagesSkipTheServersFetch reviews an image case with its URL
// and inline against a simulator whose image-URL fetch costs 300ms: the
// report shows the vision stage paying it with URLs only.
func TestInlineImagesSkipTheServersFetch(t *testing.T) {
	t.Parallel()
	sim := standin.StartLLM(t, standin.LLMOptions{Name: "primary", Model: "m", Config: `{"ttft":"1ms","itl":"0s","jitter":0,"image_url_fetch":"300ms"}`})
	at := time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC)
	img := Case{ID: "img", Source: SourceSample, Truth: &Truth{Label: pipeline.LabelClean, Category: pipeline.CategoryClean}, Messages: []pipeline.ChatMessage{
		{MessageID: "m1", SenderID: "s", SenderRole: pipeline.RoleSeller, SentAt: at, Kind: pipeline.KindText, Text: "사진 보내드릴게요"},
		{MessageID: "m2", SenderID: "s", SenderRole: pipeline.RoleSeller, SentAt: at.Add(time.Minute), Kind: pipeline.KindImage,
			ImageURL: "https://img.example-market.test/rooms/r1/m2-qr_code.png"}, // a rule flags it, so vision looks

	}}
	text := img
	text.ID, text.Messages = "text", img.Messages[:1]
	gate := &inlineGate{}
	cfg := Config{Endpoints: []Endpoint{{Name: "a", BaseURL: sim.BaseURL, Model: "m"}}, Cases: []Case{img, text},
		Concurrency: []int{1}, Repetitions: 1, TTFTSLO: time.Second, ReviewTimeout: 30 * time.Second, InlineImages: gate}
	require.Equal(t, 3, cfg.Total(), "two cases, and the image case again inline")
	res, err := Run(t.Context(), cfg)
	require.NoError(t, err)
	require.Len(t, res.Inline, 1)
	require.True(t, res.Inline[0].OK(), res.Inline[0].Err)
	require.Positive(t, gate.calls.Load())
	var url, inline time.Duration
	for _, r := range res.Reviews {
		for _, sr := range r.Verdict.Stages {
			if r.Case.ID == "img" && sr.Stage == pipeline.StageVision {
				url = sr.TTFT
			}
		}
	}
	for _, sr := range res.Inline[0].Verdict.Stages {
		if sr.Stage == pipeline.StageVision {
			inline = sr.TTFT
		}
	}
	require.GreaterOrEqual(t, url, 300*time.Millisecond, "the server fetched the URL")
	require.Less(t, inline, url, "inline: no fetch")
	dir := t.TempDir()
	require.NoError(t, WriteReport(dir, res, Summarise(res), ReportOptions{Format: "png"}))
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "## Image stage: URLs and inline")
	require.Contains(t, string(md), "| a | inline | 1 |")
}
