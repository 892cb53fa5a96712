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

func TestLossIntervalIsNotNarrowerThanTheDiscordanceAllows(t *testing.T) {
	t.Parallel()
	// No discordant pair in 300: the bootstrap says [0, 0]; the Wilson
	// upper bound of 0/300 is z²/(n+z²) = 3.8415/303.84 = 1.26 %.
	iv := LossInterval(Interval{}, 0, 0, 300, 0.95)
	require.Zero(t, iv.Lo)
	require.InDelta(t, 0.0126, iv.Hi, 1e-4)
	// 30 lost and 15 won of 300: the bootstrap's interval of the delta
	// is about -0.05 ± 1.96·√((0.15-0.05²)/300) = [-0.0935, -0.0065]; the
	// floor, Wilson's 13.92 % for 30/300 less 5 %, is 8.92 %, below it:
	// the bootstrap's interval is kept (and turned into a loss).
	iv = LossInterval(Interval{Lo: -0.0935, Hi: -0.0065}, 30, 15, 300, 0.95)
	require.Equal(t, Interval{Lo: 0.0065, Hi: 0.0935}, iv)
	require.InDelta(t, 0.0892, LossInterval(Interval{}, 30, 15, 300, 0.95).Hi, 1e-4)
}

func TestDecide(t *testing.T) {
	t.Parallel()
	d := Decide(0.03, Interval{0.01, 0.05}, 0.001, 0.05, 0.01, 0.02, 600)
	require.Equal(t, LossDetected, d.Outcome)
	require.Contains(t, d.String(), "loss detected")
	require.Contains(t, d.String(), "beyond the 1.0-point margin")
	d = Decide(0.001, Interval{-0.004, 0.006}, 0.8, 0.05, 0.01, 0.008, 600)
	require.Equal(t, NoLossBeyondMargin, d.Outcome)
	require.Contains(t, d.String(), "no loss beyond the margin")
	d = Decide(0.004, Interval{-0.01, 0.02}, 0.4, 0.05, 0.01, 0.025, 600)
	require.Equal(t, Inconclusive, d.Outcome)
	require.Contains(t, d.String(), "the set can only detect 2.5 points")
	require.False(t, math.IsNaN(d.Loss))
}
