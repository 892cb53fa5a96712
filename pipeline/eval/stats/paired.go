package stats

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Counts are one endpoint's confusion counts on some cases.
type Counts struct{ TP, FP, FN int }

// Add returns the sum of c and d.
func (c Counts) Add(d Counts) Counts { return Counts{c.TP + d.TP, c.FP + d.FP, c.FN + d.FN} }

// Recall is TP/(TP+FN), 0 without positives.
func (c Counts) Recall() float64 { return ratio(c.TP, c.TP+c.FN) }

// Precision is TP/(TP+FP), 0 without flags.
func (c Counts) Precision() float64 { return ratio(c.TP, c.TP+c.FP) }

// F1 is 2TP/(2TP+FP+FN), 0 when every count is 0.
func (c Counts) F1() float64 { return ratio(2*c.TP, 2*c.TP+c.FP+c.FN) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Cluster is one cluster of cases (a room: its cases and their
// repetitions move together) with the reference's counts A and the
// candidate's B on exactly those cases.
type Cluster struct{ A, B Counts }

// Interval is a confidence interval [Lo, Hi].
type Interval struct{ Lo, Hi float64 }

// Deltas are intervals of candidate minus reference.
type Deltas struct{ Recall, Precision, F1 Interval }

// PairedBootstrap resamples whole clusters with replacement, resamples
// times, and returns the percentile intervals (at conf, two-sided) of the
// candidate's recall, precision and F1 minus the reference's on the same
// resample. Resampling clusters rather than cases keeps cases that are not
// independent (one room's repetitions) together, so the interval is not
// too narrow; pairing keeps what both endpoints got right or wrong on the
// same case from counting as noise. The same seed gives the same
// intervals. No clusters or no resamples give zero intervals.
func PairedBootstrap(clusters []Cluster, resamples int, conf float64, seed uint64) Deltas {
	if len(clusters) == 0 || resamples < 1 {
		return Deltas{}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	rec, prec, f1 := make([]float64, resamples), make([]float64, resamples), make([]float64, resamples)
	n := len(clusters)
	for r := range resamples {
		var a, b Counts
		for range n {
			c := clusters[rng.IntN(n)]
			a, b = a.Add(c.A), b.Add(c.B)
		}
		rec[r], prec[r], f1[r] = b.Recall()-a.Recall(), b.Precision()-a.Precision(), b.F1()-a.F1()
	}
	q := (1 - conf) / 2
	return Deltas{Recall: percentiles(rec, q), Precision: percentiles(prec, q), F1: percentiles(f1, q)}
}

// percentiles is [the q quantile, the 1-q quantile] of xs (sorted here),
// by nearest rank.
func percentiles(xs []float64, q float64) Interval {
	slices.Sort(xs)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(xs)))) - 1
		return xs[min(max(i, 0), len(xs)-1)]
	}
	return Interval{Lo: at(q), Hi: at(1 - q)}
}

// The sample size and minimum detectable effect of a paired comparison of
// proportions use Connor's normal approximation for McNemar's test
// (Connor, Biometrics 43, 1987):
//
//	n = (z(1-α/2)·√ψ + z(power)·√(ψ-δ²))² / δ²
//
// where δ is the difference to detect (the loss, as a share) and ψ the
// share of discordant pairs (cases the two endpoints score differently).
// ψ can be no smaller than δ (a loss of δ flips at least δ of the cases):
// a ψ below δ is raised to δ.

// PairedN is the number of pairs a two-sided test at alpha needs to detect
// a difference delta with the given power when a share psi of pairs is
// discordant (rounded up). A delta outside (0, 1) gives 0.
func PairedN(delta, psi, alpha, power float64) int {
	if delta <= 0 || delta >= 1 {
		return 0
	}
	psi = max(psi, delta)
	za, zb := Z(1-alpha/2), Z(power)
	s := za*math.Sqrt(psi) + zb*math.Sqrt(psi-delta*delta)
	return int(math.Ceil(s * s / (delta * delta)))
}

// PairedPower is the power of the two-sided test at alpha to detect a
// difference delta with n pairs, psi discordant.
func PairedPower(n int, delta, psi, alpha float64) float64 {
	if n <= 0 || delta <= 0 {
		return 0
	}
	psi = max(psi, delta)
	sd := math.Sqrt(psi - delta*delta)
	if sd == 0 {
		return 1
	}
	return Phi((delta*math.Sqrt(float64(n)) - Z(1-alpha/2)*math.Sqrt(psi)) / sd)
}

// MDE is the minimum detectable effect: the smallest loss the decision's
// test (ExactPairedPower) detects with the given power with n pairs, psi
// discordant (found by bisection). n of 0 gives 1.
func MDE(n int, psi, alpha, power float64) float64 {
	if n <= 0 {
		return 1
	}
	lo, hi := 0.0, 1.0
	for range 40 {
		mid := (lo + hi) / 2
		if ExactPairedPower(n, mid, psi, alpha) >= power {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// ExactPairedPower is the power of the test `worker eval` uses to call a
// loss, McNemar's exact test at alpha (two-sided) with the loss in the
// right direction, for n pairs of which a share psi are discordant and a
// share delta more go against the candidate than for it. It is computed
// exactly: the number of discordant pairs m is Binomial(n, ψ), and given
// m the pairs against the candidate are Binomial(m, (ψ+δ)/(2ψ)); the
// power sums the chance of every (m, b) the test rejects. The exact test
// is conservative, so this is below Connor's approximation (PairedPower):
// it is the power the decision actually has.
func ExactPairedPower(n int, delta, psi, alpha float64) float64 {
	if n <= 0 || delta <= 0 {
		return 0
	}
	psi = min(max(psi, delta), 1)
	q := (psi + delta) / (2 * psi)
	mean, sd := float64(n)*psi, math.Sqrt(float64(n)*psi*(1-psi))
	lo, hi := max(0, int(mean-10*sd-10)), min(n, int(mean+10*sd+10))
	power := 0.0
	for m := lo; m <= hi; m++ {
		b := criticalB(m, alpha)
		if b < 0 {
			continue
		}
		power += math.Exp(logBinom(n, m, psi)) * upperTail(m, b, q)
	}
	return min(power, 1)
}

// criticalB is the smallest b with b > m-b that McNemarExact(b, m-b)
// rejects at alpha, or -1 when none does.
func criticalB(m int, alpha float64) int {
	// Walk down from b = m, accumulating the one-sided tail P(B >= b) at
	// 1/2; the two-sided p-value of (b, m-b) for b > m/2 is twice it.
	tail := 0.0
	crit := -1
	for b := m; 2*b > m; b-- {
		tail += math.Exp(logChoose(m, b) - float64(m)*math.Ln2)
		if 2*tail >= alpha {
			break
		}
		crit = b
	}
	return crit
}

// upperTail is P(X >= k) for X ~ Binomial(m, q).
func upperTail(m, k int, q float64) float64 {
	s := 0.0
	for x := k; x <= m; x++ {
		s += math.Exp(logBinom(m, x, q))
	}
	return s
}

// logBinom is the log of the Binomial(n, p) probability of k.
func logBinom(n, k int, p float64) float64 {
	switch {
	case p <= 0:
		if k == 0 {
			return 0
		}
		return math.Inf(-1)
	case p >= 1:
		if k == n {
			return 0
		}
		return math.Inf(-1)
	}
	return logChoose(n, k) + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p)
}
