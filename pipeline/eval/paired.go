package eval

import (
	"math"
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
	// precision, widened by the clusters' design effect.
	Ref, Cand                   stats.Counts
	RefRecall, CandRecall       stats.Interval
	RefPrecision, CandPrecision stats.Interval
	// Deltas are candidate minus reference, bootstrapped by cluster
	// (descriptive: the decision is made from Decision's interval).
	Deltas stats.Deltas
	// B and C are the discordant positives over every repetition: found
	// by the reference and missed by the candidate, and the reverse.
	B, C int
	// Decision is the non-inferiority decision on recall: the primary
	// one for "overall", under Holm's procedure for a category.
	Decision stats.Decision
	// FlagRate is, for "overall" only, the decision on the flag rate
	// (the moderators' load): the candidate's share of labelled cases
	// flagged minus the reference's, against its own margin.
	FlagRate *stats.Decision
	// RefFlagRate and CandFlagRate are the flag rates themselves
	// ("overall" only).
	RefFlagRate, CandFlagRate float64
	// NeededN is how many positives a loss of the margin needs to be
	// detected at the run's power, clustered (Connor's approximation
	// times the design effect).
	NeededN int
	// Clustering names the clusters the intervals resample.
	Clustering string

	recall, flag     stats.Diff
	recallDisc       stats.Discordance
	flagDisc         stats.Discordance
	psi, margin      float64
	flagUp, flagDown int
	flagN            int
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

// pairedAll compares every endpoint but the reference with it: per
// candidate, the overall recall decision (primary, at α), the flag-rate
// decision (at α), and the categories' recall decisions under Holm's
// procedure at familywise α.
func pairedAll(res Result, conc int) []Paired {
	ref := res.Config.Reference
	if ref == "" {
		return nil
	}
	refR := reviewsByRep(res, ref, conc)
	noise := noiseFloor(res.Cases, refR)
	cl := clusterCases(res.Cases)
	var out []Paired
	for _, ep := range res.Endpoints {
		if ep.Name == ref {
			continue
		}
		candR := reviewsByRep(res, ep.Name, conc)
		var ps []Paired
		for _, cat := range categories(res.Cases) {
			ps = append(ps, paired(res, refR, candR, ep.Name, cat, cl))
		}
		out = append(out, decideAll(ps, res.Config, noise)...)
	}
	return out
}

// decideAll decides one candidate's comparisons: ps[0] is "overall".
func decideAll(ps []Paired, cfg Config, noise map[string]float64) []Paired {
	pw := power(cfg)
	decideRecall(&ps[0], Alpha, pw, noise[ps[0].Category])
	o := &ps[0]
	fpsi := ratio(o.flagUp, o.flagN)
	fd := stats.Decide(stats.FlagRateIncrease, o.flag, o.flagDisc, Alpha, cfg.MaxFlagRateIncrease,
		stats.WaldMDE(o.flag.N, fpsi, o.flag.Deff, Alpha, pw))
	o.FlagRate = &fd
	holmCategories(ps[1:], pw, noise)
	return ps
}

// holmCategories decides the categories' recall under Holm's procedure at
// familywise α: each interval is stated at its Holm step's level, so that
// "loss detected" is exactly Holm's rejection.
func holmCategories(cats []Paired, pw float64, noise map[string]float64) {
	pvals := make([]float64, len(cats))
	for i := range cats {
		pvals[i] = cats[i].recallDisc.P(cats[i].recall)
	}
	levels := stats.Holm(pvals, Alpha)
	for i := range cats {
		decideRecall(&cats[i], levels[i], pw, noise[cats[i].Category])
		cats[i].Decision.Holm = len(cats) > 1
	}
}

// decideRecall makes p's recall decision at level alpha; noisePsi is the
// reference's own repetition-to-repetition discordance, a floor under the
// observed one for the MDE so that an unlucky quiet sample does not
// promise too much.
func decideRecall(p *Paired, alpha, pw, noisePsi float64) {
	psi := max(noisePsi, p.psi)
	mde := stats.WaldMDE(p.recall.N, psi, p.recall.Deff, alpha, pw)
	p.Decision = stats.Decide(stats.RecallLoss, p.recall, p.recallDisc, alpha, p.margin, mde)
	p.NeededN = int(math.Ceil(float64(stats.PairedN(p.margin, psi, alpha, pw)) * max(p.recall.Deff, 1)))
}

// caseRep is one labelled case's outcomes in one repetition.
type caseRep struct {
	cluster int
	ca, cb  stats.Counts
	rep     int
}

// paired compares cand with ref on one category, clustered by cl.
func paired(res Result, ref, cand byRep, name, cat string, cl clustering) Paired {
	p := Paired{Candidate: name, Category: cat, Clustering: cl.name, margin: res.Config.MaxRecallLoss.For(cat)}
	var reps []caseRep
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
			reps = append(reps, caseRep{cluster: cl.of[c.ID], ca: caseCounts(c, a, okA, cat), cb: caseCounts(c, b, okB, cat), rep: rep})
		}
	}
	return fromReps(p, reps, cl.n, res.Config)
}

// fromReps fills p's counts, clustered differences and intervals from the
// case repetitions, n clusters.
func fromReps(p Paired, reps []caseRep, n int, cfg Config) Paired {
	clusters := make([]stats.Cluster, n)
	recall, flag := make([]stats.PairedUnit, n), make([]stats.PairedUnit, n)
	posK, posN := make([]int, n), make([]int, n)
	for _, r := range reps {
		ca, cb, k := r.ca, r.cb, r.cluster
		clusters[k].A, clusters[k].B = clusters[k].A.Add(ca), clusters[k].B.Add(cb)
		p.Ref, p.Cand = p.Ref.Add(ca), p.Cand.Add(cb)
		if ca.TP+ca.FN > 0 {
			d := ca.TP - cb.TP
			recall[k].D += float64(d)
			recall[k].N++
			recall[k].Discordant += b2i(d != 0)
			p.B += b2i(d > 0)
			p.C += b2i(d < 0)
			posK[k] += ca.TP
			posN[k]++
			if r.rep == 0 {
				p.Positives++
			}
		}
		fa, fb := ca.TP+ca.FP, cb.TP+cb.FP // "overall": flagged or not
		flag[k].D += float64(fb - fa)
		flag[k].N++
		flag[k].Discordant += b2i(fa != fb)
		p.flagUp += b2i(fb > fa)
		p.flagDown += b2i(fb < fa)
		p.flagN++
		p.RefFlagRate += float64(fa)
		p.CandFlagRate += float64(fb)
	}
	if p.flagN > 0 {
		p.RefFlagRate /= float64(p.flagN)
		p.CandFlagRate /= float64(p.flagN)
	}
	p.recall, p.flag = stats.ClusteredDiff(recall), stats.ClusteredDiff(flag)
	conf := 1 - Alpha
	// The floor never counts a repetition as new evidence: with no
	// discordance there is no variance to show that repetitions agree,
	// so the floor's design effect is at least the repetitions per case.
	perCase := 1.0
	if p.Positives > 0 {
		perCase = float64(p.recall.N) / float64(p.Positives)
	}
	p.recallDisc = stats.Discordance{B: p.B, C: p.C, N: p.recall.N, Deff: max(p.recall.Deff, perCase)}
	p.flagDisc = stats.Discordance{B: p.flagUp, C: p.flagDown, N: p.flag.N, Deff: max(p.flag.Deff, perCase)}
	p.psi = ratio(p.B+p.C, p.recall.N)
	deff := stats.ProportionDeff(posK, posN)
	p.RefRecall = stats.ClusteredWilson(p.Ref.TP, p.Ref.TP+p.Ref.FN, deff, conf)
	p.CandRecall = stats.ClusteredWilson(p.Cand.TP, p.Cand.TP+p.Cand.FN, deff, conf)
	p.RefPrecision = stats.ClusteredWilson(p.Ref.TP, p.Ref.TP+p.Ref.FP, deff, conf)
	p.CandPrecision = stats.ClusteredWilson(p.Cand.TP, p.Cand.TP+p.Cand.FP, deff, conf)
	if rs := cfg.resamples(); rs > 0 {
		p.Deltas = stats.PairedBootstrap(clusters, rs, conf, cfg.Seed)
	}
	return p
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
