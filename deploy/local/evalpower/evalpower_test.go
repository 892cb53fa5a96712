package evalpower_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/evalpower"
	"github.com/chatguard/chatguard/deploy/local/llmsim"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/eval"
	"github.com/chatguard/chatguard/pipeline/eval/stats"
)

// TestJudgeMatchesTheServer: the verdict the suite computes in process
// for a chat is the one a review over HTTP gets from llmsim with the same
// error model (every stage, the same seeded mistakes), on 120 sample
// rooms with a planted loss and false alarms, so that the suite measures
// what `worker eval` would have measured.
func TestJudgeMatchesTheServer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rooms, err := evalpower.Rooms(ctx, 7, 120)
	require.NoError(t, err)
	em := evalpower.PlantFlags(evalpower.PlantLoss(evalpower.Base(), rooms, 0.2), rooms, 0.1)
	em.Nondeterminism = 0 // over HTTP each stage tosses its own coin; here one toss decides
	em.Seed = 11
	cfg := llmsim.DefaultConfig()
	cfg.TTFT, cfg.ITL, cfg.Jitter, cfg.Errors = 0, 0, 0, em
	sim, err := llmsim.Start(ctx, "127.0.0.1:0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sim.Stop(stopCtx)
	})
	cases := make([]eval.Case, len(rooms))
	for i, r := range rooms {
		cases[i] = r.Case
	}
	res, err := eval.Run(ctx, eval.Config{Endpoints: []eval.Endpoint{{Name: "sim", BaseURL: sim.URL, Model: cfg.Models[0]}}, Cases: cases,
		Concurrency: []int{8}, Repetitions: 1, TTFTSLO: time.Second, ReviewTimeout: time.Minute})
	require.NoError(t, err)
	byID := map[string]pipeline.Verdict{}
	for _, r := range res.Reviews {
		require.True(t, r.OK(), r.Err)
		byID[r.Case.ID] = r.Verdict
	}
	wrong, flagged := 0, 0
	for _, r := range rooms {
		l, _ := em.Judge(r.Prepared, nil)
		v := byID[r.Case.ID]
		flagged += b2i(l != pipeline.LabelClean)
		if (l == pipeline.LabelClean) != (v.Label == pipeline.LabelClean) {
			wrong++
			t.Logf("%s: in process %s, over HTTP %s %s", r.Case.ID, l, v.Label, v.Category)
		}
	}
	require.Zero(t, wrong, "in-process verdicts differ from the server's")
	require.Positive(t, flagged)
}

// TestSuiteDecidesASmallRun runs each kind of scenario for a few seeds:
// the plumbing (clustering by room, the flag-rate decision, the pilot's
// plan) works; the rates themselves are make eval-power's.
func TestSuiteDecidesASmallRun(t *testing.T) {
	t.Parallel()
	rooms, err := evalpower.Rooms(t.Context(), 7, 400)
	require.NoError(t, err)
	base := evalpower.Base()
	three := evalpower.Set(rooms, 60, 3)
	require.Equal(t, 3*len(evalpower.Set(rooms, 60, 1)), len(three))
	o := evalpower.Run(t.Context(), evalpower.Scenario{Set: three, Ref: base, Cand: base}, 1, 5)
	require.Equal(t, "room", o.Clustering)
	require.Equal(t, len(three)/3, o.Rooms)
	flags := evalpower.Run(t.Context(), evalpower.Scenario{Set: rooms, Ref: base, Cand: evalpower.PlantFlags(base, rooms, 0.3)}, 1, 5)
	require.Equal(t, 5, flags.FlagDetected, "a 30-point flag-rate increase is seen every time")
	in, plan := evalpower.Pilot(evalpower.Scenario{Set: rooms, Ref: base, Cand: evalpower.PlantLoss(base, rooms, 0.03)}, 1, 0.03)
	require.Positive(t, in.Psi)
	require.Greater(t, plan.DetectPositives, 500)
	require.Equal(t, stats.Interval{Lo: 0, Hi: 1}, func() stats.Interval { _, iv := evalpower.Rate(0, 0); return iv }())
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
