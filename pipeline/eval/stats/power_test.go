package stats

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The statistics-level power suite: the decisions `worker eval` makes,
// on simulated paired outcomes of rooms with one window each or three
// windows that fail together, several hundred sets per scenario in a
// second or two. deploy/local's `make eval-power` checks the same
// properties end to end on the project's case sets with the simulator's
// error model; this one keeps them in the normal tests.

// simSpec is one scenario: rooms of positives spread over categories,
// windows per room, and each endpoint's miss rate (a positive room's
// windows are all missed or all found: the worst correlation) and
// false-flag rate on negative rooms.
type simSpec struct {
	name               string
	posRooms, negRooms int
	windows, cats      int
	refMiss, candMiss  float64
	refFA, candFA      float64
}

// simResult counts one scenario's outcomes over its trials.
type simResult struct {
	trials                           int
	overallLoss, anyCategory, flagUp int
	covered, coveredByWindow         int
	lossByWindow                     int
	noLossWhenLoss                   int
}

const (
	simAlpha      = 0.05
	simMargin     = 0.01
	simFlagMargin = 0.02
)

// simTrial draws one set and decides it as the report does; byWindow
// decides the overall recall once more with every window its own cluster
// (the clustering the report had before rooms were keys), for contrast.
func simTrial(rng *rand.Rand, s simSpec) (overall Decision, cats []Decision, flag Decision, byWindow Decision) {
	n := s.posRooms + s.negRooms
	rec, flg := make([]PairedUnit, 0, n), make([]PairedUnit, 0, n)
	catUnits := make([][]PairedUnit, s.cats)
	var win []PairedUnit
	var up, down int
	w := s.windows
	for i := range n {
		if i < s.posRooms {
			ra, ca := b2iT(rng.Float64() >= s.refMiss), b2iT(rng.Float64() >= s.candMiss)
			u := PairedUnit{D: float64(w * (ra - ca)), N: w, Discordant: w * b2iT(ra != ca)}
			rec = append(rec, u)
			catUnits[i%s.cats] = append(catUnits[i%s.cats], u)
			for range w {
				win = append(win, PairedUnit{D: float64(ra - ca), N: 1, Discordant: b2iT(ra != ca)})
			}
			flg = append(flg, PairedUnit{D: float64(w * (ca - ra)), N: w, Discordant: w * b2iT(ra != ca)})
			up, down = up+w*b2iT(ca > ra), down+w*b2iT(ra > ca)
			continue
		}
		rf, cf := b2iT(rng.Float64() < s.refFA), b2iT(rng.Float64() < s.candFA)
		flg = append(flg, PairedUnit{D: float64(w * (cf - rf)), N: w, Discordant: w * b2iT(rf != cf)})
		up, down = up+w*b2iT(cf > rf), down+w*b2iT(rf > cf)
	}
	disc := func(units []PairedUnit) (Diff, Discordance) {
		d := ClusteredDiff(units)
		var bb, cc int
		for _, u := range units {
			bb += (u.Discordant + int(u.D)) / 2
			cc += (u.Discordant - int(u.D)) / 2
		}
		return d, Discordance{B: bb, C: cc, N: d.N, Deff: d.Deff}
	}
	decide := func(units []PairedUnit, alpha float64) Decision {
		d, dc := disc(units)
		return Decide(RecallLoss, d, dc, alpha, simMargin, 0)
	}
	overall = decide(rec, simAlpha)
	byWindow = decide(win, simAlpha)
	ps := make([]float64, s.cats)
	for k := range ps {
		d, dc := disc(catUnits[k])
		ps[k] = dc.P(d)
	}
	for k, level := range Holm(ps, simAlpha) {
		cats = append(cats, decide(catUnits[k], level))
	}
	fd := ClusteredDiff(flg)
	flag = Decide(FlagRateIncrease, fd, Discordance{B: up, C: down, N: fd.N, Deff: fd.Deff}, simAlpha, simFlagMargin, 0)
	return overall, cats, flag, byWindow
}

func b2iT(b bool) int {
	if b {
		return 1
	}
	return 0
}

func runSim(s simSpec, trials int, seed uint64) simResult {
	rng := rand.New(rand.NewPCG(seed, 44))
	truth := s.candMiss - s.refMiss
	r := simResult{trials: trials}
	for range trials {
		o, cats, f, bw := simTrial(rng, s)
		r.overallLoss += b2iT(o.Outcome == LossDetected)
		r.lossByWindow += b2iT(bw.Outcome == LossDetected)
		r.noLossWhenLoss += b2iT(o.Outcome == NoLossBeyondMargin && truth > simMargin)
		anyCat := false
		for _, d := range cats {
			anyCat = anyCat || d.Outcome == LossDetected
		}
		r.anyCategory += b2iT(anyCat)
		r.flagUp += b2iT(f.Outcome == LossDetected)
		r.covered += b2iT(o.CI.Lo <= truth && truth <= o.CI.Hi)
		r.coveredByWindow += b2iT(bw.CI.Lo <= truth && truth <= bw.CI.Hi)
	}
	return r
}

// rate is k of n with its 95 % Wilson interval, as the table prints it.
func rate(k, n int) (string, Interval) {
	lo, hi := Wilson(k, n, 0.95)
	return fmt.Sprintf("%.3f [%.3f, %.3f]", float64(k)/float64(n), lo, hi), Interval{lo, hi}
}

// TestPowerSuite checks, on simulated sets, the properties the decision
// promises: on equal endpoints "loss detected" overall and in any
// category (Holm) at most at 7.5 % (the Wilson interval's upper bound,
// the one-sided ceiling being α/2 = 2.5 %), with one window per room and
// with three correlated windows per room; the clustered interval covering
// the truth at least 93 % of the time with correlated windows (where the
// same interval clustered by window does not); a planted 3-point loss at
// the set size Plan gives for 90 % power detected with the interval's
// lower bound at 85 % or more; a planted 5-point flag-rate increase at
// equal recall detected as well. With -v it prints the table.
func TestPowerSuite(t *testing.T) {
	t.Parallel()
	const trials = 400
	refMiss, loss := 0.05, 0.03
	psi := refMiss*(1-refMiss-loss) + (refMiss+loss)*(1-refMiss)
	plan := Plan(PlanInput{Psi: psi, Deff: 1, PerCluster: 1, Loss: loss, Alpha: simAlpha}, 0.9)[0]
	specs := []simSpec{
		{name: "equal endpoints, 1 window per room", posRooms: 900, negRooms: 900, windows: 1, cats: 3, refMiss: refMiss, candMiss: refMiss, refFA: 0.03, candFA: 0.03},
		{name: "equal endpoints, 3 correlated windows per room", posRooms: 300, negRooms: 300, windows: 3, cats: 3, refMiss: refMiss, candMiss: refMiss, refFA: 0.03, candFA: 0.03},
		{name: fmt.Sprintf("3-point recall loss, %d positives (Plan, 90 %% power)", plan.DetectPositives), posRooms: plan.DetectPositives, negRooms: plan.DetectPositives,
			windows: 1, cats: 3, refMiss: refMiss, candMiss: refMiss + loss, refFA: 0.03, candFA: 0.03},
		{name: "+5-point flag rate, equal recall", posRooms: 300, negRooms: 300, windows: 1, cats: 3, refMiss: refMiss, candMiss: refMiss, refFA: 0.03, candFA: 0.13},
	}
	var table strings.Builder
	table.WriteString("| scenario | sets | loss detected (overall) | loss detected (any category, Holm) | clustered CI covers the truth | by window: loss detected | by window: covers | flag-rate increase detected |\n")
	table.WriteString("| --- | ---: | --- | --- | --- | --- | --- | --- |\n")
	for i, s := range specs {
		r := runSim(s, trials, uint64(i+1))
		ol, olCI := rate(r.overallLoss, trials)
		ac, acCI := rate(r.anyCategory, trials)
		cv, _ := rate(r.covered, trials)
		bl, _ := rate(r.lossByWindow, trials)
		bc, _ := rate(r.coveredByWindow, trials)
		fu, fuCI := rate(r.flagUp, trials)
		fmt.Fprintf(&table, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", s.name, trials, ol, ac, cv, bl, bc, fu)
		switch {
		case s.candMiss == s.refMiss && s.candFA == s.refFA:
			if olCI.Hi > 0.075 || acCI.Hi > 0.075 {
				t.Errorf("%s: false loss detected overall %s, any category %s: upper bound above 7.5 %%", s.name, ol, ac)
			}
			if s.windows > 1 && float64(r.covered)/trials < 0.93 {
				t.Errorf("%s: the clustered interval covers the truth in %s of sets, below 93 %%", s.name, cv)
			}
			if s.windows > 1 && float64(r.coveredByWindow)/trials >= 0.90 {
				t.Errorf("%s: clustered by window the interval still covers %s: the scenario does not show correlation", s.name, bc)
			}
		case s.candMiss > s.refMiss:
			if olCI.Lo < 0.85 {
				t.Errorf("%s: detected %s, lower bound below 85 %%", s.name, ol)
			}
			if r.noLossWhenLoss > 0 {
				t.Errorf("%s: %d sets passed a planted loss as no loss", s.name, r.noLossWhenLoss)
			}
		default:
			if fuCI.Lo < 0.85 {
				t.Errorf("%s: flag-rate increase detected %s, lower bound below 85 %%", s.name, fu)
			}
			if olCI.Hi > 0.075 {
				t.Errorf("%s: false recall loss %s", s.name, ol)
			}
		}
	}
	t.Logf("ψ %.3f, Plan's 90 %% size %d positives; %d sets per scenario, α %.2f, margin %.0f point(s), flag margin %.0f points:\n%s",
		psi, plan.DetectPositives, trials, simAlpha, 100*simMargin, 100*simFlagMargin, table.String())
}
