// Package stats holds the statistics `worker eval` uses to compare two
// endpoints on the same cases: the clustered paired difference its
// decisions are made from (a cluster-robust interval whose z is also the
// test, cluster.go), Holm's procedure, Wilson intervals for a proportion
// (shrunk by a design effect where cases cluster), a paired bootstrap
// resampled by cluster, Cohen's kappa, McNemar's exact test and its exact
// power (the textbook references the others are checked against), and
// the sample size, minimum detectable effect and set plan of a paired
// comparison. Every function is pure and deterministic (the bootstrap
// takes its seed).
package stats

import (
	"math"
)

// Z is the standard normal quantile of p (0 < p < 1).
func Z(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }

// Phi is the standard normal distribution function.
func Phi(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// Wilson is the Wilson score interval of k successes in n trials at
// confidence level conf (0.95 for 95 %). It stays inside [0, 1] and is
// sound at k = 0 and k = n, where the normal (Wald) interval collapses.
// With n = 0 it is [0, 1]: nothing is known.
func Wilson(k, n int, conf float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	z := Z(1 - (1-conf)/2)
	p, nf := float64(k)/float64(n), float64(n)
	den := 1 + z*z/nf
	mid := (p + z*z/(2*nf)) / den
	half := z / den * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf))
	return max(0, mid-half), min(1, mid+half)
}

// McNemarExact is the two-sided p-value of McNemar's exact test: b and c
// are the discordant pairs (first right and second wrong, and the
// reverse); under the null each discordant pair goes either way with
// probability 1/2, so the p-value is the binomial test of min(b, c) in
// b+c at 1/2, doubled and capped at 1 (R's binom.test and
// mcnemar.exact). No discordant pair gives 1.
func McNemarExact(b, c int) float64 {
	n := b + c
	if n == 0 {
		return 1
	}
	k := min(b, c)
	sum := 0.0
	for i := 0; i <= k; i++ {
		sum += math.Exp(logChoose(n, i) - float64(n)*math.Ln2)
	}
	return min(1, 2*sum)
}

func logChoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// Kappa is Cohen's kappa of two raters' labels of the same items, a[i]
// and b[i] (labels compared as strings): the agreement beyond what the
// raters' own label frequencies would give by chance, (po-pe)/(1-pe).
// When chance agreement is total (both always give one same label) it is
// 1 if they agree everywhere, else 0. Slices of different lengths or no
// items give 0.
func Kappa(a, b []string) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	n := float64(len(a))
	ca, cb := map[string]float64{}, map[string]float64{}
	agree := 0.0
	for i := range a {
		ca[a[i]]++
		cb[b[i]]++
		if a[i] == b[i] {
			agree++
		}
	}
	po, pe := agree/n, 0.0
	for k, x := range ca {
		pe += x / n * cb[k] / n
	}
	if pe >= 1 {
		if po == 1 {
			return 1
		}
		return 0
	}
	return (po - pe) / (1 - pe)
}
