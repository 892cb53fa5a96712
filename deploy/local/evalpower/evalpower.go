// Package evalpower is the power suite of `worker eval`'s decisions (make
// eval-power): the project's own case sets (the sample lake's labelled
// rooms, one window per room or three correlated windows per room), two
// endpoints given llmsim's seeded error model, a fresh seed per set, and
// every set decided by pipeline/eval's Summarise exactly as a report
// decides it. It counts, over hundreds of seeds per scenario, how often
// the decision lines say what is true, with Wilson intervals.
//
// Each chat is analysed by llmsim's rules once and the error model is
// applied per seed in process (llmsim.Prepare, ErrorModel.Judge): the
// verdict the judge stage would give over HTTP, without a server, so that
// thousands of sets take minutes. TestJudgeMatchesTheServer checks that
// the in-process verdict is the one a review over HTTP gets.
package evalpower

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/chatguard/chatguard/deploy/local/evalsample"
	"github.com/chatguard/chatguard/deploy/local/llmsim"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/pipeline/eval"
	"github.com/chatguard/chatguard/pipeline/eval/stats"
	"github.com/chatguard/chatguard/stages"
)

// The suite's fixed settings: a report's defaults.
const (
	Margin     = 0.01 // --max-recall-loss 1
	FlagMargin = 0.02 // --max-flag-rate-increase 2
	Power      = 0.8
	// PlantedLoss and PlantedFlag are the planted recall loss and
	// flag-rate increase.
	PlantedLoss = 0.03
	PlantedFlag = 0.05
)

// Base is the reference's error model, and the candidate's where nothing
// is planted: the sample report's (evalsample.Profiles) rates.
func Base() llmsim.ErrorModel {
	return llmsim.ErrorModel{Miss: map[pipeline.Category]float64{"*": 0.03},
		FalseAlarm: map[pipeline.Category]float64{pipeline.CategorySpam: 0.01}, HardNegative: 0.05, Nondeterminism: 0.04}
}

// Room is one labelled room of the sample lake, analysed once.
type Room struct {
	Case     eval.Case
	Prepared llmsim.Prepared
	// RulesFlag: the rules alone flag it.
	RulesFlag bool
}

// Rooms generates the sample lake (seed, n rooms) and analyses its
// labelled rooms, by room id.
func Rooms(ctx context.Context, seed int64, n int) ([]Room, error) {
	cases, err := evalsample.SampleCases(ctx, seed, n, 0)
	if err != nil {
		return nil, err
	}
	out := make([]Room, len(cases))
	for i, c := range cases {
		c.RoomID = c.ID
		// The window the reviewer builds (chatprep with the review's
		// defaults; an eval case is its whole chat, without context),
		// as the stages send it: the block llmsim's draws are keyed by.
		w := chatprep.Prepare(c.Messages, chatprep.Config{}.WithDefaults())
		p := llmsim.Prepare(stages.FormatMarkedTranscript(w.Messages))
		l, _ := llmsim.ErrorModel{}.Judge(p, nil)
		out[i] = Room{Case: c, Prepared: p, RulesFlag: l != pipeline.LabelClean}
	}
	return out, nil
}

// Set is the first rooms holding the given number of positives (every
// room when there are fewer), each as windows cases that share the room's
// chat: the same transcript reviewed again, as real time reviews a room's
// growing history window after window, so that a mistake on one window is
// made on the others (the correlation clustering must account for).
func Set(rooms []Room, positives, windows int) []Room {
	var out []Room
	n := 0
	for _, r := range rooms {
		if n >= positives {
			break
		}
		if r.Case.Truth.Label != pipeline.LabelClean {
			n++
		}
		for w := range windows {
			x := r
			if windows > 1 {
				x.Case.ID = fmt.Sprintf("%s#w%d", r.Case.ID, w+1)
			}
			out = append(out, x)
		}
	}
	return out
}

// Positives counts the set's positive cases (windows included).
func Positives(set []Room) int {
	n := 0
	for _, r := range set {
		n += b2i(r.Case.Truth.Label != pipeline.LabelClean)
	}
	return n
}

// Scenario is one row of the suite.
type Scenario struct {
	Name      string
	Set       []Room
	Ref, Cand llmsim.ErrorModel
	// Truth is the true overall recall loss (reference minus candidate,
	// expected over seeds), what the interval should cover.
	Truth float64
}

// Outcome counts a scenario's decisions over its sets.
type Outcome struct {
	Sets, Positives, Rooms                int
	LossDetected, AnyCategory, NoLoss     int
	Covered, FlagDetected, FlagNoIncrease int
	Clustering                            string
	MeanDeff                              float64
}

// Run decides the scenario's set once per seed, seeds first..first+n-1;
// a canceled ctx stops it between sets (the outcome then counts fewer
// sets).
func Run(ctx context.Context, sc Scenario, first uint64, n int) Outcome {
	o := Outcome{Sets: n, Positives: Positives(sc.Set)}
	rooms := map[string]bool{}
	for _, r := range sc.Set {
		rooms[r.Case.RoomID] = true
	}
	o.Rooms = len(rooms)
	for s := first; s < first+uint64(n); s++ {
		if ctx.Err() != nil {
			o.Sets = int(s - first)
			break
		}
		sum := eval.Summarise(result(sc, s))
		ov := sum.Paired[0]
		o.Clustering = ov.Clustering
		o.MeanDeff += ov.Decision.Deff
		o.LossDetected += b2i(ov.Decision.Outcome == stats.LossDetected)
		o.NoLoss += b2i(ov.Decision.Outcome == stats.NoLossBeyondMargin)
		o.Covered += b2i(ov.Decision.CI.Lo <= sc.Truth && sc.Truth <= ov.Decision.CI.Hi)
		o.FlagDetected += b2i(ov.FlagRate.Outcome == stats.LossDetected)
		o.FlagNoIncrease += b2i(ov.FlagRate.Outcome == stats.NoLossBeyondMargin)
		anyCat := false
		for _, p := range sum.Paired[1:] {
			anyCat = anyCat || p.Decision.Outcome == stats.LossDetected
		}
		o.AnyCategory += b2i(anyCat)
	}
	o.MeanDeff /= float64(max(o.Sets, 1))
	return o
}

// result is one seed's run as `worker eval` would have recorded it: every
// case reviewed once by each endpoint, the verdicts the error models give.
func result(sc Scenario, seed uint64) eval.Result {
	cases := make([]eval.Case, len(sc.Set))
	for i, r := range sc.Set {
		cases[i] = r.Case
	}
	res := eval.Result{Cases: cases, Endpoints: []eval.Endpoint{{Name: "ref"}, {Name: "cand"}},
		Config: eval.Config{Concurrency: []int{1}, Repetitions: 1, Reference: "ref", Power: Power,
			MaxRecallLoss: eval.Margins{Default: Margin}, MaxFlagRateIncrease: FlagMargin, Resamples: -1, Seed: seed}}
	ref, cand := sc.Ref, sc.Cand
	ref.Seed, cand.Seed = int64(2*seed+1), int64(2*seed+2)
	coin := rand.New(rand.NewPCG(seed, 0x44)).Float64
	for _, m := range []struct {
		name string
		e    llmsim.ErrorModel
	}{{"ref", ref}, {"cand", cand}} {
		for i := range cases {
			l, c := m.e.Judge(sc.Set[i].Prepared, coin)
			res.Reviews = append(res.Reviews, eval.Review{Endpoint: m.name, Concurrency: 1, Case: &cases[i],
				Verdict: pipeline.Verdict{Status: pipeline.StatusDone, Label: l, Category: c}})
		}
	}
	return res
}

// TrueLoss is the expected overall recall loss of cand against ref on the
// set: the mean over seeds first..first+n-1 of the recall difference (the
// seeds are not those of Run).
func TrueLoss(set []Room, ref, cand llmsim.ErrorModel, first uint64, n int) float64 {
	pos := Positives(set)
	if pos == 0 {
		return 0
	}
	total := 0.0
	for s := first; s < first+uint64(n); s++ {
		ref.Seed, cand.Seed = int64(2*s+1), int64(2*s+2)
		coin := rand.New(rand.NewPCG(s, 0x44)).Float64
		d := 0
		for _, m := range []struct {
			e    llmsim.ErrorModel
			sign int
		}{{ref, 1}, {cand, -1}} {
			for _, r := range set {
				if r.Case.Truth.Label == pipeline.LabelClean {
					continue
				}
				l, _ := m.e.Judge(r.Prepared, coin)
				d += m.sign * b2i(l != pipeline.LabelClean)
			}
		}
		total += float64(d) / float64(pos)
	}
	return total / float64(n)
}

// PlantLoss is base with its miss rate raised so that the expected
// overall recall loss on set is about loss: the rules flag only a share of
// the positives, and an unstable chat's miss is a coin whatever the rate.
func PlantLoss(base llmsim.ErrorModel, set []Room, loss float64) llmsim.ErrorModel {
	pos, flagged := 0, 0
	for _, r := range set {
		if r.Case.Truth.Label != pipeline.LabelClean {
			pos++
			flagged += b2i(r.RulesFlag)
		}
	}
	share := float64(flagged) / float64(max(pos, 1)) * (1 - base.Nondeterminism)
	out := clone(base)
	out.Miss["*"] = min(1, base.Miss["*"]+loss/max(share, 1e-9))
	return out
}

// CalibrateLoss is PlantLoss corrected once by measurement: the miss
// rate's increment scaled by loss over the true loss it gave on set (mean
// of seeds first..first+n-1), so that the planted loss is loss and not
// the first guess's (the rules' answer and the unstable chats' coins
// make it fall a little short).
func CalibrateLoss(base llmsim.ErrorModel, set []Room, loss float64, first uint64, n int) llmsim.ErrorModel {
	cand := PlantLoss(base, set, loss)
	got := TrueLoss(set, base, cand, first, n)
	if got <= 0 {
		return cand
	}
	inc := (cand.Miss["*"] - base.Miss["*"]) * loss / got
	cand.Miss["*"] = min(1, base.Miss["*"]+inc)
	return cand
}

// PlantFlags is base with its spam false-alarm rate raised so that the
// flag rate on set rises by about inc at equal recall: false alarms land
// only on chats without any signal.
func PlantFlags(base llmsim.ErrorModel, set []Room, inc float64) llmsim.ErrorModel {
	bare := 0
	for _, r := range set {
		bare += b2i(r.Prepared.Signalless())
	}
	out := clone(base)
	out.FalseAlarm[pipeline.CategorySpam] = min(1, base.FalseAlarm[pipeline.CategorySpam]+inc*float64(len(set))/float64(max(bare, 1)))
	return out
}

func clone(e llmsim.ErrorModel) llmsim.ErrorModel {
	out := e
	out.Miss, out.FalseAlarm = map[pipeline.Category]float64{}, map[pipeline.Category]float64{}
	for k, v := range e.Miss {
		out.Miss[k] = v
	}
	for k, v := range e.FalseAlarm {
		out.FalseAlarm[k] = v
	}
	return out
}

// Pilot is the set size `worker eval`'s report (and `worker eval plan`)
// recommends for 90 % power to detect loss, from one pilot run of the
// scenario at seed: its positives and rooms.
func Pilot(sc Scenario, seed uint64, loss float64) (stats.PlanInput, stats.PlanRow) {
	sum := eval.Summarise(result(sc, seed))
	in := eval.PlanFrom(sum.Paired[0], eval.Config{})
	in.Loss = loss
	return in, stats.Plan(in, 0.9)[0]
}

// Rate is k of n with its 95 % Wilson interval.
func Rate(k, n int) (float64, stats.Interval) {
	lo, hi := stats.Wilson(k, n, 0.95)
	return float64(k) / float64(max(n, 1)), stats.Interval{Lo: lo, Hi: hi}
}

// FormatRate prints a rate as the table does.
func FormatRate(k, n int) string {
	r, iv := Rate(k, n)
	return fmt.Sprintf("%.3f [%.3f, %.3f]", r, iv.Lo, iv.Hi)
}

// Check is one property the suite must show.
type Check struct {
	What string
	OK   bool
}

// Checks are the properties of the scenarios' outcomes, by kind: "equal"
// (equal endpoints), "correlated" (equal, three windows per room),
// "loss" (a planted recall loss at the planned size), "flags" (a planted
// flag-rate increase at equal recall).
func Checks(kind string, o Outcome) []Check {
	_, loss := Rate(o.LossDetected, o.Sets)
	_, anyCat := Rate(o.AnyCategory, o.Sets)
	cov, _ := Rate(o.Covered, o.Sets)
	_, flag := Rate(o.FlagDetected, o.Sets)
	switch kind {
	case "equal", "correlated":
		out := []Check{
			{"false loss detected overall: upper bound ≤ 7.5 %", loss.Hi <= 0.075},
			{"false loss detected in any category (Holm): upper bound ≤ 7.5 %", anyCat.Hi <= 0.075},
		}
		if kind == "correlated" {
			out = append(out, Check{"clustered interval covers the truth ≥ 93 %", cov >= 0.93})
		}
		return out
	case "loss":
		return []Check{{"planted loss detected: lower bound ≥ 85 %", loss.Lo >= 0.85}, {"planted loss never passed as no loss", o.NoLoss == 0}}
	case "flags":
		return []Check{{"planted flag-rate increase detected: lower bound ≥ 85 %", flag.Lo >= 0.85}}
	}
	return nil
}

// Table is the suite's Markdown table.
func Table(names []string, os []Outcome) string {
	var b strings.Builder
	b.WriteString("| scenario | sets | positives | rooms | clustering | mean design effect | loss detected (overall) | loss detected (any category, Holm) | no loss beyond margin | interval covers the truth | flag-rate increase detected |\n")
	b.WriteString("| --- | ---: | ---: | ---: | --- | ---: | --- | --- | --- | --- | --- |\n")
	for i, o := range os {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %.2f | %s | %s | %s | %s | %s |\n", names[i], o.Sets, o.Positives, o.Rooms, o.Clustering, o.MeanDeff,
			FormatRate(o.LossDetected, o.Sets), FormatRate(o.AnyCategory, o.Sets), FormatRate(o.NoLoss, o.Sets),
			FormatRate(o.Covered, o.Sets), FormatRate(o.FlagDetected, o.Sets))
	}
	return b.String()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
