package stats

import (
	"fmt"
	"math"
)

// Outcome is a non-inferiority decision's result.
type Outcome int

// The outcomes. There is no bare pass: a candidate is either shown not to
// worsen the measure beyond the margin, shown to worsen it, or the set is
// too small to tell, and the decision says which.
const (
	Inconclusive Outcome = iota
	NoLossBeyondMargin
	LossDetected
)

// Measure names what a decision is about; the words of its line follow it.
type Measure int

// The measures decided on.
const (
	// RecallLoss is the reference's recall minus the candidate's.
	RecallLoss Measure = iota
	// FlagRateIncrease is the candidate's flag rate (share of the
	// labelled cases it flags: the moderators' load) minus the
	// reference's.
	FlagRateIncrease
)

// Decision is a candidate's non-inferiority decision on one measure
// (recall, overall or one category; or the flag rate) against the
// reference. It is made from one interval: worse when the interval lies
// above zero, no worse beyond the margin when it lies below the margin,
// inconclusive otherwise. P is the test the interval inverts, so the two
// cannot disagree.
type Decision struct {
	Measure Measure
	Outcome Outcome
	// Loss is the measure's worsening (positive: the candidate is worse),
	// as a share; CI its interval at confidence 1-Alpha.
	Loss float64
	CI   Interval
	// Alpha is the level the interval is stated at: the run's α for the
	// primary (overall) decision, Holm's step level for a category.
	Alpha float64
	// Holm says the decision is one of a family under Holm's procedure.
	Holm bool
	// P is the two-sided p-value of "no difference", from the same
	// clustered z as the interval.
	P float64
	// Margin is the largest worsening accepted; MDE the smallest the set
	// detects at the run's power.
	Margin, MDE float64
	// Pairs is how many paired case repetitions the decision rests on,
	// Clusters in how many independent clusters, Deff the design effect.
	Pairs, Clusters int
	Deff            float64
}

// Discordance is what a decision's small-sample guard needs: B of the N
// paired case repetitions went against the candidate, C for it, with the
// design effect Deff (at least the repetitions per case).
type Discordance struct {
	B, C, N int
	Deff    float64
	// NoCredit keeps the pairs for the candidate from lowering the upper
	// bound (a flag added elsewhere does not make up for one dropped).
	NoCredit bool
}

// P is the decision's two-sided p-value for d: the larger of the
// cluster-robust z's and the score test's of the discordant pairs' split
// (B of B+C at one half, at the design effect). Holm's procedure is run
// on it, so that each interval Decide states at a Holm level excludes
// zero exactly when Holm rejects.
func (disc Discordance) P(d Diff) float64 {
	p := d.P()
	if pairs := disc.B + disc.C; pairs > 0 {
		neff := float64(pairs) / max(disc.Deff, 1)
		z := (float64(disc.B)/float64(pairs) - 0.5) / math.Sqrt(0.25/neff)
		p = max(p, 2*Phi(-math.Abs(z)))
	}
	return p
}

// Decide makes the decision from the clustered difference d (d.Est is the
// worsening) stated at level alpha. The interval is the cluster-robust
// one, widened where the set is too small for it: its lower bound no
// higher than the score interval of the discordant pairs' split (Wilson on
// B of B+C, at the design effect), so that a loss is never detected on
// three lost pairs and none won, where the standard error is zero; its
// upper bound no lower than Wilson's on B of N less C/N, so that 0 lost of
// 300 still allows a loss of 1.3 points; both within [-1, 1]. P is the
// larger of the two tests' p-values, so P < alpha exactly when the lower
// bound is above zero for a positive estimate.
func Decide(m Measure, d Diff, disc Discordance, alpha, margin, mde float64) Decision {
	conf := 1 - alpha
	ci := d.Interval(conf)
	if disc.N > 0 {
		credit := disc.C
		if disc.NoCredit {
			credit = 0
		}
		ci.Hi = max(ci.Hi, LossFloor(disc.B, credit, disc.N, disc.Deff, conf))
		if pairs := disc.B + disc.C; pairs > 0 {
			q := ClusteredWilson(disc.B, pairs, disc.Deff, conf)
			ci.Lo = min(ci.Lo, float64(pairs)/float64(disc.N)*(2*q.Lo-1))
		}
	}
	ci.Lo, ci.Hi = max(ci.Lo, -1), min(ci.Hi, 1)
	out := Decision{Measure: m, Loss: d.Est, CI: ci, Alpha: alpha, P: disc.P(d), Margin: margin, MDE: mde,
		Pairs: d.N, Clusters: d.Clusters, Deff: d.Deff}
	switch {
	case ci.Lo > 0:
		out.Outcome = LossDetected
	case ci.Hi < margin:
		out.Outcome = NoLossBeyondMargin
	}
	return out
}

// LossFloor is the least upper bound an interval of a worsening may have:
// the clustered Wilson upper bound of the share of the n pairs that went
// against the candidate (b), less the share that went for it (c). A
// difference estimated from few discordant pairs has a standard error
// near zero, and 0 lost of 300 must still allow a loss of 1.3 points.
func LossFloor(b, c, n int, deff, conf float64) float64 {
	if n <= 0 {
		return 1
	}
	return ClusteredWilson(b, n, deff, conf).Hi - float64(c)/float64(n)
}

// words are a measure's phrases: what is detected, what is ruled out.
func (d Decision) words() (detected, ruledOut, name string) {
	if d.Measure == FlagRateIncrease {
		return "flag-rate increase detected", "no flag-rate increase beyond the margin", "flag-rate increase"
	}
	return "loss detected", "no loss beyond the margin", "loss"
}

// String is the decision line, figures in percentage points.
func (d Decision) String() string {
	pts := func(x float64) string { return fmt.Sprintf("%.1f", 100*x) }
	detected, ruledOut, name := d.words()
	level := fmt.Sprintf("%.3g %%", 100*(1-d.Alpha))
	if d.Holm {
		level += " (Holm)"
	}
	interval := fmt.Sprintf("%s %s points (%s CI %s to %s, p=%.3g; %d pairs in %d clusters, design effect %.2f)",
		name, pts(d.Loss), level, pts(d.CI.Lo), pts(d.CI.Hi), d.P, d.Pairs, d.Clusters, d.Deff)
	switch d.Outcome {
	case LossDetected:
		where := "beyond"
		if d.CI.Hi < d.Margin {
			where = "within"
		}
		return fmt.Sprintf("**%s**: %s; its upper bound is %s the %s-point margin", detected, interval, where, pts(d.Margin))
	case NoLossBeyondMargin:
		return fmt.Sprintf("**%s** of %s points: %s", ruledOut, pts(d.Margin), interval)
	}
	mde := "the set can only detect " + pts(d.MDE) + " points"
	if math.IsNaN(d.MDE) || d.MDE <= 0 {
		mde = "the interval spans both zero and the margin"
	}
	return fmt.Sprintf("**inconclusive**: %s (margin %s): %s", mde, pts(d.Margin), interval)
}

// WaldMDE is the smallest difference the decision's test (the clustered z
// at alpha, two-sided) detects with the given power over n pairs, a share
// psi of them discordant, with design effect deff: Connor's power at the
// effective n/deff pairs, inverted by bisection. n of 0 gives 1.
func WaldMDE(n int, psi, deff, alpha, power float64) float64 {
	neff := int(math.Floor(float64(n) / max(deff, 1)))
	if neff <= 0 {
		return 1
	}
	lo, hi := 0.0, 1.0
	for range 40 {
		mid := (lo + hi) / 2
		if PairedPower(neff, mid, psi, alpha) >= power {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}
