package eval

import (
	"slices"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/eval/stats"
)

// The paired comparison's fixed settings.
const (
	// Alpha is the significance level of every test and the complement of
	// every interval's confidence (95 %).
	Alpha = 0.05
	// Resamples is the bootstrap's resample count.
	Resamples = 2000
	// DefaultPower is the power of the minimum detectable effect when
	// Config.Power is 0.
	DefaultPower = 0.8
)

// Paired is one candidate against the reference on one category (or
// "overall": any flag), over the labelled cases both reviewed.
type Paired struct {
	Candidate, Category string
	// Positives are the paired cases whose truth is this category, in the
	// first repetition.
	Positives int
	// Ref and Cand are the counts over every repetition at the lowest
	// concurrency; the intervals are Wilson's of their recall and
	// precision.
	Ref, Cand                   stats.Counts
	RefRecall, CandRecall       stats.Interval
	RefPrecision, CandPrecision stats.Interval
	// Deltas are candidate minus reference, bootstrapped by room.
	Deltas stats.Deltas
	// B and C are the discordant positives of the first repetition:
	// found by the reference and missed by the candidate, and the reverse.
	B, C int
	// Decision is the non-inferiority decision on recall.
	Decision stats.Decision
	// NeededN is how many positives a loss of the margin needs to be
	// detected at the run's power (Connor's approximation).
	NeededN int
}

// Flips compares the labels two runs gave the same cases: two endpoints,
// or two repetitions of one endpoint (its noise floor; A and B the same
// name).
type Flips struct {
	A, B    string
	Cases   int
	Flipped int
	Kappa   float64
}

// caseCounts is a case's confusion counts for one category ("overall":
// any flag against any abuse) when reviewed as r (ok false: not reviewed,
// a miss).
func caseCounts(c *Case, r Review, ok bool, category string) stats.Counts {
	pf, tf := flagged(r, ok), c.Truth.Label != pipeline.LabelClean
	if category == "overall" {
		return stats.Counts{TP: b2i(pf && tf), FP: b2i(pf && !tf), FN: b2i(!pf && tf)}
	}
	pc := pf && string(r.Verdict.Category) == category
	tc := tf && string(c.Truth.Category) == category
	return stats.Counts{TP: b2i(pc && tc), FP: b2i(pc && !tc), FN: b2i(!pc && tc)}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// byRep is one endpoint's reviews at the lowest concurrency: repetition →
// case id → review.
type byRep map[int]map[string]Review

func reviewsByRep(res Result, endpoint string, conc int) byRep {
	out := byRep{}
	for _, r := range res.Reviews {
		if r.Endpoint != endpoint || r.Concurrency != conc {
			continue
		}
		if out[r.Rep] == nil {
			out[r.Rep] = map[string]Review{}
		}
		out[r.Rep][r.Case.ID] = r
	}
	return out
}

// categories are "overall" and every truth category of the labelled
// cases, sorted.
func categories(cases []Case) []string {
	var out []string
	for _, c := range cases {
		if c.Truth != nil && c.Truth.Label != pipeline.LabelClean && !slices.Contains(out, string(c.Truth.Category)) {
			out = append(out, string(c.Truth.Category))
		}
	}
	slices.Sort(out)
	return append([]string{"overall"}, out...)
}

// pairedAll compares every endpoint but the reference with it.
func pairedAll(res Result, conc int) []Paired {
	ref := res.Config.Reference
	if ref == "" {
		return nil
	}
	refR := reviewsByRep(res, ref, conc)
	noise := noiseFloor(res.Cases, refR)
	var out []Paired
	for _, ep := range res.Endpoints {
		if ep.Name == ref {
			continue
		}
		candR := reviewsByRep(res, ep.Name, conc)
		for _, cat := range categories(res.Cases) {
			out = append(out, paired(res, refR, candR, ep.Name, cat, noise[cat]))
		}
	}
	return out
}

// paired compares cand with ref on one category. noisePsi is the
// reference's own share of positives that flip between repetitions: the
// minimum detectable effect uses the larger of it and the observed
// discordance, so an unlucky quiet sample does not promise too much.
func paired(res Result, ref, cand byRep, name, cat string, noisePsi float64) Paired {
	p := Paired{Candidate: name, Category: cat}
	clusters := map[string]*stats.Cluster{}
	for rep, rr := range ref {
		for i := range res.Cases {
			c := &res.Cases[i]
			if c.Truth == nil {
				continue
			}
			a, okA := rr[c.ID]
			b, okB := cand[rep][c.ID]
			if !okA && !okB {
				continue // neither reviewed it in this repetition
			}
			ca, cb := caseCounts(c, a, okA, cat), caseCounts(c, b, okB, cat)
			cl := clusters[c.ID] // a room, with every repetition of it
			if cl == nil {
				cl = &stats.Cluster{}
				clusters[c.ID] = cl
			}
			cl.A, cl.B = cl.A.Add(ca), cl.B.Add(cb)
			p.Ref, p.Cand = p.Ref.Add(ca), p.Cand.Add(cb)
			if rep == 0 && ca.TP+ca.FN > 0 {
				p.Positives++
				p.B += b2i(ca.TP == 1 && cb.TP == 0)
				p.C += b2i(ca.TP == 0 && cb.TP == 1)
			}
		}
	}
	return finishPaired(p, sortedClusters(clusters), res.Config, noisePsi)
}

func sortedClusters(m map[string]*stats.Cluster) []stats.Cluster {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // map order must not move a seeded bootstrap
	out := make([]stats.Cluster, len(keys))
	for i, k := range keys {
		out[i] = *m[k]
	}
	return out
}

// finishPaired adds the intervals, the test and the decision to counts.
func finishPaired(p Paired, clusters []stats.Cluster, cfg Config, noisePsi float64) Paired {
	conf := 1 - Alpha
	p.RefRecall = wilson(p.Ref.TP, p.Ref.TP+p.Ref.FN, conf)
	p.CandRecall = wilson(p.Cand.TP, p.Cand.TP+p.Cand.FN, conf)
	p.RefPrecision = wilson(p.Ref.TP, p.Ref.TP+p.Ref.FP, conf)
	p.CandPrecision = wilson(p.Cand.TP, p.Cand.TP+p.Cand.FP, conf)
	p.Deltas = stats.PairedBootstrap(clusters, Resamples, conf, cfg.Seed)
	power := cfg.Power
	if power == 0 {
		power = DefaultPower
	}
	psi := noisePsi
	if p.Positives > 0 {
		psi = max(psi, float64(p.B+p.C)/float64(p.Positives))
	}
	margin := cfg.MaxRecallLoss.For(p.Category)
	loss := p.Ref.Recall() - p.Cand.Recall()
	lossCI := stats.LossInterval(p.Deltas.Recall, p.B, p.C, p.Positives, conf)
	mde := stats.MDE(p.Positives, psi, Alpha, power)
	p.Decision = stats.Decide(loss, lossCI, stats.McNemarExact(p.B, p.C), Alpha, margin, mde, p.Positives)
	p.NeededN = stats.PairedN(margin, psi, Alpha, power)
	return p
}

func wilson(k, n int, conf float64) stats.Interval {
	lo, hi := stats.Wilson(k, n, conf)
	return stats.Interval{Lo: lo, Hi: hi}
}

// noiseFloor is, per category, the share of the reference's positives
// whose recall outcome differs between its first two repetitions (0 with
// one repetition).
func noiseFloor(cases []Case, ref byRep) map[string]float64 {
	out := map[string]float64{}
	r0, r1 := ref[0], ref[1]
	if r0 == nil || r1 == nil {
		return out
	}
	for _, cat := range categories(cases) {
		n, flipped := 0, 0
		for i := range cases {
			c := &cases[i]
			if c.Truth == nil {
				continue
			}
			a, okA := r0[c.ID]
			b, okB := r1[c.ID]
			ca, cb := caseCounts(c, a, okA, cat), caseCounts(c, b, okB, cat)
			if ca.TP+ca.FN == 0 {
				continue
			}
			n++
			flipped += b2i(ca.TP != cb.TP)
		}
		if n > 0 {
			out[cat] = float64(flipped) / float64(n)
		}
	}
	return out
}

// flipsBetween compares the labels of a and b on every case both
// reviewed successfully (labelled or not).
func flipsBetween(nameA, nameB string, cases []Case, a, b map[string]Review) Flips {
	f := Flips{A: nameA, B: nameB}
	var la, lb []string
	for i := range cases {
		x, okx := a[cases[i].ID]
		y, oky := b[cases[i].ID]
		if !okx || !oky || !x.OK() || !y.OK() {
			continue
		}
		f.Cases++
		f.Flipped += b2i(x.Verdict.Label != y.Verdict.Label)
		la, lb = append(la, string(x.Verdict.Label)), append(lb, string(y.Verdict.Label))
	}
	f.Kappa = stats.Kappa(la, lb)
	return f
}

// flipsAll is the reference against each candidate, then every
// endpoint's first two repetitions (its noise floor).
func flipsAll(res Result, conc int) []Flips {
	var out []Flips
	byName := map[string]byRep{}
	for _, ep := range res.Endpoints {
		byName[ep.Name] = reviewsByRep(res, ep.Name, conc)
	}
	if ref := res.Config.Reference; ref != "" {
		for _, ep := range res.Endpoints {
			if ep.Name != ref {
				out = append(out, flipsBetween(ref, ep.Name, res.Cases, byName[ref][0], byName[ep.Name][0]))
			}
		}
	}
	for _, ep := range res.Endpoints {
		if r := byName[ep.Name]; r[1] != nil {
			out = append(out, flipsBetween(ep.Name, ep.Name, res.Cases, r[0], r[1]))
		}
	}
	return out
}
