package stats

import (
	"math"
	"slices"
)

// A clustered paired difference is the estimator every decision of
// `worker eval` rests on. Cases are grouped in clusters (a room, an
// account, a campaign: whatever makes their outcomes move together), and
// a cluster i contributes the sum D_i of the paired differences of its
// cases (every repetition included) and the count N_i of those cases. The
// difference is the ratio Σ D_i / Σ N_i, and its variance the
// cluster-robust (sandwich) variance of a ratio,
//
//	V = K/(K-1) · Σ (D_i - θ·N_i)² / (Σ N_i)²
//
// over the K clusters: correlated cases add their differences before they
// are squared, so three windows of one room that fail together count as
// one noisy unit, not three independent ones. The interval is θ ± z·√V;
// the test of θ = 0 is the same z, so the interval excludes zero exactly
// when the test rejects (they cannot disagree). Repetitions of a case sit
// in its cluster, so the estimate and the test use them alike.

// Diff is a clustered paired difference and its standard error.
type Diff struct {
	// Est is Σ D_i / Σ N_i; SE its cluster-robust standard error.
	Est, SE float64
	// N is Σ N_i; Clusters is K.
	N, Clusters int
	// Deff is the design effect: the clustered variance over the variance
	// the same cases would have as independent pairs (1 when clustering
	// changes nothing; 1 when there is no variance at all).
	Deff float64
}

// PairedUnit is one cluster's paired sums: D the sum of its cases'
// differences (each -1, 0 or 1 per case and repetition), N how many case
// repetitions it holds, Discordant how many of them differ (Σ|d|, what the
// variance as if independent needs).
type PairedUnit struct {
	D             float64
	N, Discordant int
}

// ClusteredDiff is the clustered ratio estimate of units. No units, or no
// cases, give the zero Diff with Deff 1.
func ClusteredDiff(units []PairedUnit) Diff {
	d := Diff{Deff: 1}
	sumD, k := 0.0, 0
	for _, u := range units {
		if empty(u) {
			continue
		}
		sumD += u.D
		d.N += u.N
		k++
	}
	d.Clusters = k
	if d.N == 0 {
		return d
	}
	d.Est = sumD / float64(d.N)
	if k < 2 {
		return d
	}
	clustered, independent := 0.0, 0.0
	for _, u := range units {
		if empty(u) {
			continue
		}
		r := u.D - d.Est*float64(u.N)
		clustered += r * r
	}
	n := float64(d.N)
	clustered *= float64(k) / float64(k-1) / (n * n)
	// As if independent: each case repetition its own cluster; for
	// paired 0/1 outcomes d² = |d|, so Σ d² is the discordant count.
	for _, u := range units {
		independent += float64(u.Discordant)
	}
	independent = max(independent/n-d.Est*d.Est, 0) / n
	d.SE = math.Sqrt(clustered)
	if independent > 0 && clustered > independent {
		d.Deff = clustered / independent
	}
	return d
}

// empty is a unit with nothing in it (a cluster without a case of the
// measure); a unit with a difference but no cases of the denominator
// (a flag added where the reference had none) still counts.
func empty(u PairedUnit) bool { return u.N == 0 && u.D == 0 && u.Discordant == 0 }

// Interval is the diff's two-sided interval at confidence conf.
func (d Diff) Interval(conf float64) Interval {
	z := Z(1 - (1-conf)/2)
	return Interval{Lo: d.Est - z*d.SE, Hi: d.Est + z*d.SE}
}

// P is the two-sided p-value of Est = 0 from the same z the interval
// uses: P < 1-conf exactly when the interval at conf excludes zero. A
// zero standard error gives 1 for a zero estimate and 0 otherwise.
func (d Diff) P() float64 {
	if d.SE == 0 {
		if d.Est == 0 {
			return 1
		}
		return 0
	}
	return 2 * Phi(-math.Abs(d.Est)/d.SE)
}

// Holm runs Holm's step-down procedure over the two-sided p-values ps at
// familywise level alpha and returns, for each hypothesis, the level at
// which its interval is stated so that "the interval excludes zero" is
// exactly Holm's rejection: the k-th smallest p-value is tested at
// alpha/(m-k+1) while every smaller one was rejected; the first that is
// not rejected, and every later one, are stated at the level of that
// first failure. One hypothesis gets alpha.
func Holm(ps []float64, alpha float64) []float64 {
	m := len(ps)
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case ps[a] < ps[b]:
			return -1
		case ps[a] > ps[b]:
			return 1
		}
		return 0
	})
	levels := make([]float64, m)
	stopped := -1.0
	for k, i := range order {
		level := alpha / float64(m-k)
		if stopped >= 0 {
			levels[i] = stopped
			continue
		}
		levels[i] = level
		if ps[i] >= level {
			stopped = level
		}
	}
	return levels
}

// ClusteredWilson is the Wilson interval of k successes in n trials made
// honest for clustering: the sample is shrunk to its effective size n/deff
// (deff at least 1), the share kept.
func ClusteredWilson(k, n int, deff, conf float64) Interval {
	if n <= 0 {
		return Interval{Lo: 0, Hi: 1}
	}
	deff = max(deff, 1)
	neff := float64(n) / deff
	p := float64(k) / float64(n)
	z := Z(1 - (1-conf)/2)
	den := 1 + z*z/neff
	mid := (p + z*z/(2*neff)) / den
	half := z / den * math.Sqrt(p*(1-p)/neff+z*z/(4*neff*neff))
	return Interval{Lo: max(0, mid-half), Hi: min(1, mid+half)}
}

// ProportionDeff is the design effect of a proportion over clusters of
// (successes k_i, trials n_i): the cluster-robust variance of Σk/Σn over
// the binomial one. Fewer than two clusters, or no variance, give 1.
func ProportionDeff(k, n []int) float64 {
	units := make([]PairedUnit, len(k))
	tk, tn := 0, 0
	for i := range k {
		units[i] = PairedUnit{D: float64(k[i]), N: n[i], Discordant: k[i]}
		tk, tn = tk+k[i], tn+n[i]
	}
	d := ClusteredDiff(units)
	if tn == 0 {
		return 1
	}
	p := float64(tk) / float64(tn)
	binom := p * (1 - p) / float64(tn)
	if binom <= 0 || d.SE == 0 {
		return 1
	}
	return max(1, d.SE*d.SE/binom)
}
