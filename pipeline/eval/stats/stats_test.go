package stats

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWilsonMatchesReferenceValues(t *testing.T) {
	t.Parallel()
	// R: binom::binom.wilson(8, 10) gives 0.4902 to 0.9433; by hand, with
	// z = 1.95996: centre (0.8 + z²/20)/(1 + z²/10) = 0.7167, half-width
	// z/(1 + z²/10)·√(0.016 + z²/400) = 0.2266.
	lo, hi := Wilson(8, 10, 0.95)
	require.InDelta(t, 0.4902, lo, 1e-4)
	require.InDelta(t, 0.9433, hi, 1e-4)
	// 0 of 10: the upper bound is z²/(n+z²) = 3.8415/13.8415 = 0.2775.
	lo, hi = Wilson(0, 10, 0.95)
	require.Zero(t, lo)
	require.InDelta(t, 0.2775, hi, 1e-4)
	lo, hi = Wilson(10, 10, 0.95)
	require.InDelta(t, 1-0.2775, lo, 1e-4)
	require.Equal(t, 1.0, hi)
	lo, hi = Wilson(0, 0, 0.95)
	require.Equal(t, [2]float64{0, 1}, [2]float64{lo, hi})
}

func TestMcNemarExactMatchesTheBinomialTest(t *testing.T) {
	t.Parallel()
	// R: binom.test(2, 12)$p.value = 0.03857: 2·(C(12,0)+C(12,1)+C(12,2))/2¹² = 2·79/4096.
	require.InDelta(t, 2*79.0/4096, McNemarExact(2, 10), 1e-12)
	require.InDelta(t, 2*79.0/4096, McNemarExact(10, 2), 1e-12, "two-sided: symmetric")
	// 0 of 5: 2/32.
	require.InDelta(t, 0.0625, McNemarExact(0, 5), 1e-12)
	require.Equal(t, 1.0, McNemarExact(6, 6), "capped at 1")
	require.Equal(t, 1.0, McNemarExact(0, 0))
	// Large n stays finite (log-gamma): 400 vs 500 discordant pairs is
	// far from even (z ≈ 3.33, two-sided p ≈ 0.0009).
	p := McNemarExact(400, 500)
	require.Greater(t, p, 0.0004)
	require.Less(t, p, 0.0012)
}

func TestKappaMatchesTheTextbookExample(t *testing.T) {
	t.Parallel()
	// The usual example: 50 items, yes/yes 20, yes/no 5, no/yes 10, no/no
	// 15: po = 0.7, pe = 0.5·0.6 + 0.5·0.4 = 0.5, κ = 0.4.
	var a, b []string
	add := func(x, y string, n int) {
		for range n {
			a, b = append(a, x), append(b, y)
		}
	}
	add("yes", "yes", 20)
	add("yes", "no", 5)
	add("no", "yes", 10)
	add("no", "no", 15)
	require.InDelta(t, 0.4, Kappa(a, b), 1e-12)
	require.Equal(t, 1.0, Kappa([]string{"x", "x"}, []string{"x", "x"}))
	require.Equal(t, 1.0, Kappa(a, a))
	require.Zero(t, Kappa([]string{"x"}, nil))
}

func TestPairedSampleSizeMatchesConnorsFormula(t *testing.T) {
	t.Parallel()
	// δ = 0.1, ψ = 0.2, α = 0.05, power 0.8, by hand:
	// (1.95996·√0.2 + 0.84162·√0.19)² / 0.01 = (0.87652 + 0.36685)²/0.01 = 154.6 → 155.
	require.Equal(t, 155, PairedN(0.1, 0.2, 0.05, 0.8))
	// The power at that n is at least 0.8, one pair fewer below it.
	require.GreaterOrEqual(t, PairedPower(155, 0.1, 0.2, 0.05), 0.8)
	require.Less(t, PairedPower(154, 0.1, 0.2, 0.05), 0.8)
	// MDE inverts the exact power, which the conservative exact test
	// keeps a little below Connor's: the MDE at 155 pairs is a little
	// above 0.1, and the exact power there is the target.
	m155 := MDE(155, 0.2, 0.05, 0.8)
	require.Greater(t, m155, 0.1)
	require.Less(t, m155, 0.12)
	require.InDelta(t, 0.8, ExactPairedPower(155, m155, 0.2, 0.05), 0.01)
	// Exact power by hand for a tiny case: n = 2, ψ = 1, δ = 1 (every pair
	// is discordant against the candidate): b = 2 of m = 2 has p = 0.5, so
	// nothing rejects at 0.05 and the power is 0.
	require.Zero(t, ExactPairedPower(2, 1, 1, 0.05))
	// n = 6, ψ = 1, δ = 1: b = 6 of 6 has p = 2/64 = 0.031 < 0.05, and it
	// happens with certainty.
	require.InDelta(t, 1, ExactPairedPower(6, 1, 1, 0.05), 1e-9)
	// A ψ below δ is raised to δ: identical endpoints still have an MDE.
	m := MDE(600, 0, 0.05, 0.8)
	require.Greater(t, m, 0.005)
	require.Less(t, m, 0.03)
	require.Zero(t, PairedN(0, 0.2, 0.05, 0.8))
	require.Equal(t, 1.0, MDE(0, 0.2, 0.05, 0.8))
}

func TestPairedBootstrapIsSeededAndPaired(t *testing.T) {
	t.Parallel()
	var cs []Cluster
	for i := range 300 {
		a := Counts{TP: 1}
		b := a
		if i%10 == 0 {
			b = Counts{FN: 1} // the candidate misses every tenth
		}
		cs = append(cs, Cluster{A: a, B: b})
	}
	d1 := PairedBootstrap(cs, 500, 0.95, 7)
	d2 := PairedBootstrap(cs, 500, 0.95, 7)
	require.Equal(t, d1, d2, "same seed, same intervals")
	require.NotEqual(t, d1, PairedBootstrap(cs, 500, 0.95, 8))
	// The recall delta is -0.1; its interval holds it and excludes 0.
	require.Less(t, d1.Recall.Lo, -0.1)
	require.Greater(t, d1.Recall.Hi, -0.1)
	require.Less(t, d1.Recall.Hi, 0.0)
	// Binomial SE of 0.1 on 300 is 0.017: the 95 % interval is about ±0.034.
	require.InDelta(t, 0.068, d1.Recall.Hi-d1.Recall.Lo, 0.02)
	// Identical endpoints: a zero-width interval at 0, however resampled.
	same := make([]Cluster, len(cs))
	for i, c := range cs {
		same[i] = Cluster{A: c.A, B: c.A}
	}
	require.Equal(t, Deltas{}, PairedBootstrap(same, 200, 0.95, 1))
	require.Equal(t, Deltas{}, PairedBootstrap(nil, 200, 0.95, 1))
}

func TestClusteredDiffMatchesTheSandwichByHand(t *testing.T) {
	t.Parallel()
	// Four rooms of one case each, differences 1, 0, 0, -1 (one lost, one
	// won): θ = 0; V = 4/3 · (1 + 0 + 0 + 1)/16 = 1/6; independent
	// variance (2/4 - 0)/4 = 1/8, so the design effect is 4/3 (the
	// small-sample factor K/(K-1) alone).
	d := ClusteredDiff([]PairedUnit{{D: 1, N: 1, Discordant: 1}, {N: 1}, {N: 1}, {D: -1, N: 1, Discordant: 1}})
	require.Zero(t, d.Est)
	require.InDelta(t, math.Sqrt(1.0/6), d.SE, 1e-12)
	require.InDelta(t, 4.0/3, d.Deff, 1e-12)
	require.Equal(t, [2]int{4, 4}, [2]int{d.N, d.Clusters})
	// The same cases as three windows per room that fail together: the
	// estimate is the same, the standard error is not smaller (each room
	// still one unit), and the design effect is about three.
	d3 := ClusteredDiff([]PairedUnit{{D: 3, N: 3, Discordant: 3}, {N: 3}, {N: 3}, {D: -3, N: 3, Discordant: 3}})
	require.Zero(t, d3.Est)
	require.InDelta(t, d.SE, d3.SE, 1e-12, "triplicating a room adds no information")
	require.InDelta(t, 4.0, d3.Deff, 1e-12, "3 windows × 4/3")
	// Interval and test are one: the interval at 95 % excludes zero
	// exactly when P < 0.05.
	for _, est := range []float64{0.01, 0.0195, 0.0196, 0.02, 0.05} {
		x := Diff{Est: est, SE: 0.01}
		require.Equal(t, x.P() < 0.05, x.Interval(0.95).Lo > 0, "est %v", est)
	}
	require.Equal(t, Diff{Deff: 1}, ClusteredDiff(nil))
}

func TestHolmLevelsMakeTheIntervalTheRejection(t *testing.T) {
	t.Parallel()
	// p = 0.01, 0.04, 0.03, 0.5 at α 0.05: sorted, 0.01 ≤ 0.05/4 is
	// rejected; 0.03 > 0.05/3 stops the procedure, and it and every later
	// one are stated at 0.05/3.
	levels := Holm([]float64{0.01, 0.04, 0.03, 0.5}, 0.05)
	require.InDelta(t, 0.0125, levels[0], 1e-12)
	for _, i := range []int{1, 2, 3} {
		require.InDelta(t, 0.05/3, levels[i], 1e-12)
	}
	// All rejected: 0.001 at 0.05/3, 0.002 at 0.025, 0.04 at 0.05.
	levels = Holm([]float64{0.04, 0.001, 0.002}, 0.05)
	require.Equal(t, []float64{0.05, 0.05 / 3, 0.025}, levels)
	require.Equal(t, []float64{0.05}, Holm([]float64{0.3}, 0.05))
}

func TestDecideIsOneInterval(t *testing.T) {
	t.Parallel()
	big := Discordance{B: 30, C: 12, N: 600, Deff: 1.5} // the split's score z = 2.27
	d := Decide(RecallLoss, Diff{Est: 0.03, SE: 0.01, N: 600, Clusters: 200, Deff: 1.5}, big, 0.05, 0.01, 0.02)
	require.Equal(t, LossDetected, d.Outcome)
	require.Contains(t, d.String(), "**loss detected**")
	require.Contains(t, d.String(), "beyond the 1.0-point margin")
	require.Contains(t, d.String(), "600 pairs in 200 clusters, design effect 1.50")
	quiet := Discordance{B: 3, C: 3, N: 3000, Deff: 1}
	d = Decide(RecallLoss, Diff{Est: 0.001, SE: 0.002}, quiet, 0.05, 0.01, 0.008)
	require.Equal(t, NoLossBeyondMargin, d.Outcome)
	require.Contains(t, d.String(), "no loss beyond the margin")
	d = Decide(RecallLoss, Diff{Est: 0.001, SE: 0.002}, Discordance{B: 3, C: 3, N: 300, Deff: 1}, 0.05, 0.01, 0.008)
	require.Equal(t, Inconclusive, d.Outcome, "the Wilson floor keeps a small quiet set from promising too much")
	require.Contains(t, d.String(), "the set can only detect 0.8 points")
	d = Decide(FlagRateIncrease, Diff{Est: 0.05, SE: 0.01}, Discordance{B: 40, C: 10, N: 600, Deff: 1}, 0.05, 0.02, 0.01)
	require.Contains(t, d.String(), "**flag-rate increase detected**")
	d = Decide(RecallLoss, Diff{Est: 0.03, SE: 0.01}, big, 0.01, 0.01, 0.02)
	d.Holm = true
	require.Contains(t, d.String(), "99 % (Holm) CI")
	// 0 lost of 300: the floor is Wilson's 1.26 %.
	require.InDelta(t, 0.0126, LossFloor(0, 0, 300, 1, 0.95), 1e-4)
	require.Greater(t, LossFloor(0, 0, 300, 3, 0.95), 0.03, "three windows per room: a third of the information")
}

// TestDecideNeedsMoreThanAFewLostPairs: three positives all lost and
// none won have a cluster-robust standard error of zero; the score test
// of their split (p = 0.083, McNemar's exact 0.25) does not reject, and
// the interval says so. Six of six does (score p = 0.014, exact 0.031).
func TestDecideNeedsMoreThanAFewLostPairs(t *testing.T) {
	t.Parallel()
	units := []PairedUnit{{D: 1, N: 1, Discordant: 1}, {D: 1, N: 1, Discordant: 1}, {D: 1, N: 1, Discordant: 1}}
	d := ClusteredDiff(units)
	require.Zero(t, d.SE)
	three := Decide(RecallLoss, d, Discordance{B: 3, N: 3, Deff: 1}, 0.05, 0.01, 1)
	require.NotEqual(t, LossDetected, three.Outcome)
	require.InDelta(t, 2*Phi(-math.Sqrt(3)), three.P, 1e-12)
	require.GreaterOrEqual(t, three.CI.Lo, -1.0)
	six := append(units, units...)
	d = ClusteredDiff(six)
	require.Equal(t, LossDetected, Decide(RecallLoss, d, Discordance{B: 6, N: 6, Deff: 1}, 0.05, 0.01, 1).Outcome)
	// One case, one cluster: nothing is known.
	one := Decide(RecallLoss, ClusteredDiff(units[:1]), Discordance{B: 1, N: 1, Deff: 1}, 0.05, 0.01, 1)
	require.Equal(t, Inconclusive, one.Outcome)
	require.Less(t, one.CI.Lo, 0.0)
	require.Equal(t, 1.0, one.CI.Hi, "the upper bound is clamped to 100 points")
}

func TestPlanIsConnorsSizeTimesTheDesignEffect(t *testing.T) {
	t.Parallel()
	rows := Plan(PlanInput{Psi: 0.2, Deff: 1, PerCluster: 1, Loss: 0.1, Margin: 0.1, Alpha: 0.05}, 0.8)
	require.Equal(t, 155, rows[0].DetectPositives, "PairedN by hand")
	// No loss beyond 0.1 at no true loss: (1.95996 + 0.84162)²·0.2/0.01 = 157.0 → 157.
	require.Equal(t, 157, rows[0].NoLossPositives)
	rows = Plan(PlanInput{Psi: 0.2, Deff: 2, PerCluster: 3, Loss: 0.1, Margin: 0.1, Alpha: 0.05}, 0.8, 0.9)
	require.Equal(t, 310, rows[0].DetectPositives)
	require.Equal(t, 104, rows[0].DetectClusters)
	require.Greater(t, rows[1].DetectPositives, rows[0].DetectPositives)
}
