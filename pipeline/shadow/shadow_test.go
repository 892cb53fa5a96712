package shadow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/reviewjob"
	"github.com/chatguard/chatguard/pipeline/shadow"
)

var _ reviewjob.Mirror = (*shadow.Runner)(nil)

var t0 = time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)

// candidate is a reviewer that answers, fails or hangs until its context
// ends, and scribbles over the chat it is given (a reviewer may sort or
// rewrite its input: the live path's copy must not change).
type candidate struct {
	mode    string // ok, fail, hang
	entered chan struct{}
}

func (c *candidate) PipelineVersion() string { return "pv-candidate" }

func (c *candidate) Review(ctx context.Context, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage, _ int) (pipeline.Verdict, error) {
	for i := range msgs {
		msgs[i].Text = "overwritten by the candidate"
	}
	c.entered <- struct{}{}
	switch c.mode {
	case "fail":
		return pipeline.Verdict{}, &pipeline.RetryableError{Err: errors.New("HTTP 503 from the candidate, quoting the chat")}
	case "hang":
		<-ctx.Done()
		return pipeline.Verdict{}, context.Cause(ctx)
	}
	return pipeline.Verdict{Status: pipeline.StatusDone, Label: pipeline.LabelSuspicious, Category: pipeline.CategoryOffPlatform, Severity: 2,
		Confidence: 0.6, Action: pipeline.ActionWarn, Stages: []pipeline.StageResult{
			{Stage: pipeline.StageTriage, TokensIn: 100, TokensOut: 10, Latency: 300 * time.Millisecond, CostUSD: 0.001},
			{Stage: pipeline.StageJudge, TokensIn: 900, TokensOut: 90, Latency: 2 * time.Second, CostUSD: 0.004},
		}}, nil
}

type sink chan pipeline.LakeEvent

func (s sink) Publish(ev pipeline.LakeEvent) bool { s <- ev; return true }

func sampledKeys(n int, rate float64) []pipeline.ReviewKey {
	var out []pipeline.ReviewKey
	for i := 0; len(out) < n; i++ {
		k := pipeline.ReviewKey{RoomID: fmt.Sprintf("room-%d", i), WindowStart: t0.Add(-time.Hour), WindowEnd: t0, PipelineVersion: "pv-live"}
		if shadow.Sampled(k, rate) {
			out = append(out, k)
		}
	}
	return out
}

func live(k pipeline.ReviewKey) pipeline.Verdict {
	return pipeline.Verdict{Key: k, RunID: "run-1", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryPhishingLink, Severity: 4}
}

type env struct {
	r      *shadow.Runner
	cand   *candidate
	events sink
	reg    *prometheus.Registry
	clk    *clock.Fake
}

func setup(t *testing.T, mode string, conc int) *env {
	t.Helper()
	e := &env{cand: &candidate{mode: mode, entered: make(chan struct{}, 64)}, events: make(sink, 64), reg: prometheus.NewRegistry(), clk: clock.NewFake(t0)}
	r, err := shadow.New(shadow.Config{Rate: 0.5, Concurrency: conc, Timeout: time.Minute, Candidate: "managed-large", Model: "large-2",
		TextDiffers: true, Registerer: e.reg}, e.cand, e.events, e.clk)
	require.NoError(t, err)
	e.r = r
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return e
}

func (e *env) count(outcome string) float64 {
	return testutil.ToFloat64(e.r.Metrics().WithLabelValues(outcome))
}

func next(t *testing.T, events sink) pipeline.ShadowVerdict {
	t.Helper()
	select {
	case ev := <-events:
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		rec, err := pipeline.DecodeLakeEvent(b, t0)
		require.NoError(t, err, "the event is one the consumer admits")
		return rec.Payload.(pipeline.ShadowVerdict)
	case <-time.After(30 * time.Second):
		t.Fatal("no shadow event within 30s")
		return pipeline.ShadowVerdict{}
	}
}

func TestSamplingIsByKeyAndNearTheRate(t *testing.T) {
	t.Parallel()
	n := 0
	for i := range 20000 {
		k := pipeline.ReviewKey{RoomID: fmt.Sprintf("r%d", i), WindowStart: t0, WindowEnd: t0.Add(time.Hour), PipelineVersion: "v"}
		s := shadow.Sampled(k, 0.1)
		require.Equal(t, s, shadow.Sampled(k, 0.1), "the same key, the same answer")
		require.False(t, shadow.Sampled(k, 0))
		require.True(t, shadow.Sampled(k, 1))
		if s {
			n++
		}
	}
	require.InDelta(t, 2000, n, 200, "10 %% of 20,000 keys")
}

func TestAnsweringCandidateWritesItsVerdictBesideTheLiveOne(t *testing.T) {
	t.Parallel()
	e := setup(t, "ok", 2)
	k := sampledKeys(1, 0.5)[0]
	msgs := []pipeline.ChatMessage{{MessageID: "m1", Text: "010-1234-5678 카톡으로 연락주세요"}}
	v := live(k)
	e.r.Offer(v, pipeline.ReviewEvent{RoomID: k.RoomID}, msgs)
	p := next(t, e.events)
	require.Equal(t, pipeline.ShadowOK, p.Outcome)
	require.Equal(t, pipeline.LabelSuspicious, p.Label)
	require.Equal(t, pipeline.LabelAbusive, p.LiveLabel)
	require.Equal(t, "pv-candidate", p.CandidatePipelineVersion)
	require.Equal(t, "pv-live", p.PipelineVersion)
	require.True(t, p.TextDiffers)
	require.Equal(t, []pipeline.ShadowStage{{Stage: pipeline.StageTriage, TokensIn: 100, TokensOut: 10, LatencyMs: 300},
		{Stage: pipeline.StageJudge, TokensIn: 900, TokensOut: 90, LatencyMs: 2000}}, p.Stages)
	require.InDelta(t, 0.005, p.CostUSD, 1e-12)
	require.Equal(t, "010-1234-5678 카톡으로 연락주세요", msgs[0].Text, "the live chat is not the candidate's to change")
	require.Equal(t, live(k), v)
	require.Equal(t, 1.0, e.count("ok"))
}

func TestFailingSlowOrHangingCandidateChangesNothingLive(t *testing.T) {
	t.Parallel()
	t.Run("failing", func(t *testing.T) {
		t.Parallel()
		e := setup(t, "fail", 2)
		k := sampledKeys(1, 0.5)[0]
		e.r.Offer(live(k), pipeline.ReviewEvent{}, nil)
		p := next(t, e.events)
		require.Equal(t, pipeline.ShadowError, p.Outcome)
		require.Equal(t, "transient", p.ErrorKind, "a class, never the error's text")
		require.Empty(t, p.Label)
		require.Equal(t, 1.0, e.count("error"))
	})
	t.Run("hanging past its timeout", func(t *testing.T) {
		t.Parallel()
		e := setup(t, "hang", 2)
		k := sampledKeys(1, 0.5)[0]
		e.r.Offer(live(k), pipeline.ReviewEvent{}, nil)
		<-e.cand.entered
		e.clk.Advance(time.Minute + time.Second)
		p := next(t, e.events)
		require.Equal(t, pipeline.ShadowError, p.Outcome)
		require.Equal(t, "timeout", p.ErrorKind)
	})
	t.Run("saturated: offers beyond the slots are dropped at once", func(t *testing.T) {
		t.Parallel()
		e := setup(t, "hang", 2)
		keys := sampledKeys(5, 0.5)
		msgs := []pipeline.ChatMessage{{MessageID: "m1", Text: "안전결제로 할게요"}}
		for _, k := range keys {
			e.r.Offer(live(k), pipeline.ReviewEvent{}, msgs) // returns at once: the loop ends
		}
		<-e.cand.entered
		<-e.cand.entered
		require.Equal(t, 3.0, e.count("dropped_saturated"))
		require.Equal(t, "안전결제로 할게요", msgs[0].Text)
		require.NoError(t, e.r.Close(context.Background()), "drain cancels the hanging ones")
		for range 2 {
			p := next(t, e.events)
			require.Equal(t, pipeline.ShadowCanceled, p.Outcome)
		}
		require.Equal(t, 2.0, e.count("canceled"))
		e.r.Offer(live(keys[0]), pipeline.ReviewEvent{}, nil)
		require.Empty(t, e.events, "nothing runs after Close")
	})
	t.Run("not sampled or not done", func(t *testing.T) {
		t.Parallel()
		e := setup(t, "ok", 2)
		k := sampledKeys(1, 0.5)[0]
		failed := live(k)
		failed.Status = pipeline.StatusFailed
		e.r.Offer(failed, pipeline.ReviewEvent{}, nil)
		for i := 0; ; i++ {
			other := pipeline.ReviewKey{RoomID: fmt.Sprintf("x%d", i), WindowStart: t0, WindowEnd: t0.Add(time.Hour), PipelineVersion: "v"}
			if !shadow.Sampled(other, 0.5) {
				e.r.Offer(live(other), pipeline.ReviewEvent{}, nil)
				break
			}
		}
		require.NoError(t, e.r.Close(context.Background()))
		require.Empty(t, e.events)
		require.Empty(t, e.cand.entered)
	})
}

func TestConfigValidateJoinsEveryProblem(t *testing.T) {
	t.Parallel()
	err := shadow.Config{Rate: 2}.Validate()
	for _, want := range []string{"rate 2 is outside 0-1", "concurrency", "timeout", "candidate name"} {
		require.ErrorContains(t, err, want)
	}
}
