package stats

import "fmt"

// Outcome is a non-inferiority decision's result.
type Outcome int

// The outcomes. There is no bare pass: a candidate is either shown not to
// lose more than the margin, shown to lose, or the set is too small to
// tell, and the decision says which.
const (
	Inconclusive Outcome = iota
	NoLossBeyondMargin
	LossDetected
)

// Decision is a candidate's non-inferiority decision on one measure
// (recall, overall or one category) against the reference.
type Decision struct {
	Outcome Outcome
	// Loss is reference minus candidate (positive: the candidate is
	// worse), as a share; CI its interval.
	Loss float64
	CI   Interval
	// P is McNemar's exact p-value on the paired outcomes.
	P float64
	// Margin is the largest loss accepted; MDE the smallest loss the set
	// can detect at the run's power.
	Margin, MDE float64
	// Pairs is how many paired cases the decision rests on.
	Pairs int
}

// Decide makes the decision. "Loss detected" when the loss is positive
// and McNemar's test rejects equality at alpha; otherwise "no loss beyond
// the margin" when the interval's upper bound is below the margin;
// otherwise inconclusive. A detected loss still reports whether its
// upper bound is within the margin (String).
func Decide(loss float64, ci Interval, p, alpha, margin, mde float64, pairs int) Decision {
	d := Decision{Loss: loss, CI: ci, P: p, Margin: margin, MDE: mde, Pairs: pairs}
	switch {
	case loss > 0 && p < alpha:
		d.Outcome = LossDetected
	case ci.Hi < margin:
		d.Outcome = NoLossBeyondMargin
	}
	return d
}

// String is the decision line, figures in percentage points.
func (d Decision) String() string {
	pts := func(x float64) string { return fmt.Sprintf("%.1f", 100*x) }
	interval := fmt.Sprintf("loss %s points (95 %% CI %s to %s, McNemar p=%.3g, %d pairs)", pts(d.Loss), pts(d.CI.Lo), pts(d.CI.Hi), d.P, d.Pairs)
	switch d.Outcome {
	case LossDetected:
		where := "beyond"
		if d.CI.Hi < d.Margin {
			where = "within"
		}
		return fmt.Sprintf("**loss detected**: %s; its upper bound is %s the %s-point margin", interval, where, pts(d.Margin))
	case NoLossBeyondMargin:
		return fmt.Sprintf("**no loss beyond the margin** of %s points: %s", pts(d.Margin), interval)
	}
	return fmt.Sprintf("**inconclusive**: the set can only detect %s points (margin %s): %s", pts(d.MDE), pts(d.Margin), interval)
}

// LossInterval is the interval of the candidate's loss (reference minus
// candidate) from the bootstrap's interval of the delta (candidate minus
// reference), with its upper bound made honest for small or quiet sets:
// a bootstrap cannot resample a loss it never saw, so with few or no
// discordant pairs its interval collapses to a point. The upper bound is
// therefore no lower than the Wilson upper bound of the share of the n
// pairs the candidate lost (b), less the share it won (c): 0 lost of 300
// still allows a loss of 1.3 points.
func LossInterval(delta Interval, b, c, n int, conf float64) Interval {
	iv := Interval{Lo: -delta.Hi, Hi: -delta.Lo}
	if n > 0 {
		_, hi := Wilson(b, n, conf)
		iv.Hi = max(iv.Hi, hi-float64(c)/float64(n))
	}
	return iv
}
