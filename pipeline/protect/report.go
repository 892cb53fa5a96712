package protect

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/eval/stats"
	"github.com/chatguard/chatguard/pipeline/policy"
)

// Case is a stored verdict the dry-run report replays the policy over,
// with the moderators' last decision on it.
type Case struct {
	Verdict pipeline.Verdict
	Source  pipeline.ActionSource
	// Decision is the last moderator decision: "confirm", "overturn", or
	// "" when none decided.
	Decision string
}

// CaseSource lists the done, flagged verdicts finished in [from, to),
// oldest first, at most limit; more says that limit cut the list.
type CaseSource interface {
	BacktestCases(ctx context.Context, from, to time.Time, limit int) (cases []Case, more bool, err error)
}

// RuleReport is one rule's would-be actions over a period.
type RuleReport struct {
	Rule string
	// Actions counts the actions the rule would have taken, by
	// "action:mode".
	Actions map[string]int
	// Verdicts and Accounts are how many verdicts it acted on and how many
	// distinct accounts.
	Verdicts, Accounts int
	// Decided of those verdicts had a moderator decision; Upheld of them
	// were confirmed. Precision is Upheld/Decided, with its 95 % Wilson
	// interval [Lo, Hi] (0 when none was decided).
	Decided, Upheld int
	Precision       float64
	Lo, Hi          float64
}

// sim is the store's record as the replay builds it.
type sim struct {
	ruleDay    map[string]int
	heavy      map[string][]time.Time
	suppressed map[string]time.Time
}

func (s *sim) state(ev policy.Evidence, now time.Time) pipeline.ActionState {
	st := pipeline.ActionState{RuleToday: map[string]int{}, HeavyToday: map[string]int{}, Suppressed: map[string]bool{}}
	day := now.UTC().Format(time.DateOnly)
	for k, n := range s.ruleDay {
		if rule, d, _ := strings.Cut(k, "\x00"); d == day {
			st.RuleToday[rule] = n
		}
	}
	for _, a := range ev.Offenders {
		for _, at := range s.heavy[a] {
			if now.Sub(at) < 24*time.Hour {
				st.HeavyToday[a]++
			}
		}
	}
	for k, until := range s.suppressed {
		if until.After(now) {
			st.Suppressed[k] = true
		}
	}
	return st
}

// Backtest replays p over cases in the order they were finished, with
// the suppressions, caps and per-account limits a live run would have
// applied (clearances aside: they come from overturns after the fact),
// and returns one report per rule, in the policy's order.
func Backtest(p *policy.Policy, cases []Case) []RuleReport {
	cases = slices.Clone(cases)
	slices.SortStableFunc(cases, func(a, b Case) int { return a.Verdict.FinishedAt.Compare(b.Verdict.FinishedAt) })
	s := &sim{ruleDay: map[string]int{}, heavy: map[string][]time.Time{}, suppressed: map[string]time.Time{}}
	reps := map[string]*RuleReport{}
	accounts := map[string]map[string]bool{}
	for _, r := range p.Rules {
		reps[r.ID] = &RuleReport{Rule: r.ID, Actions: map[string]int{}}
		accounts[r.ID] = map[string]bool{}
	}
	for _, c := range cases {
		now := c.Verdict.FinishedAt
		ev := policy.EvidenceOf(c.Verdict, c.Source)
		fired := map[string]bool{}
		for _, d := range p.Evaluate(ev, s.state(ev, now), now) {
			if d.Outcome != policy.OutcomeWritten {
				continue
			}
			s.record(p, d, ev, now)
			rep := reps[d.Rule.ID]
			rep.Actions[string(d.Kind)+":"+string(d.Mode)]++
			if d.Account != "" {
				accounts[d.Rule.ID][d.Account] = true
			}
			fired[d.Rule.ID] = true
		}
		for rule := range fired {
			rep := reps[rule]
			rep.Verdicts++
			if c.Decision != "" {
				rep.Decided++
				if c.Decision == "confirm" {
					rep.Upheld++
				}
			}
		}
	}
	out := make([]RuleReport, 0, len(p.Rules))
	for _, r := range p.Rules {
		rep := reps[r.ID]
		rep.Accounts = len(accounts[r.ID])
		if rep.Decided > 0 {
			rep.Precision = float64(rep.Upheld) / float64(rep.Decided)
			rep.Lo, rep.Hi = stats.Wilson(rep.Upheld, rep.Decided, 0.95)
		}
		out = append(out, *rep)
	}
	return out
}

func (s *sim) record(p *policy.Policy, d policy.Decision, ev policy.Evidence, now time.Time) {
	s.ruleDay[d.Rule.ID+"\x00"+now.UTC().Format(time.DateOnly)]++
	if d.Kind.Heavy() {
		s.heavy[d.Account] = append(s.heavy[d.Account], now)
	}
	if d.Kind.Notice() {
		s.suppressed[pipeline.ActionSuppressKey(ev.Key.RoomID, d.Account, d.Rule.ID)] = now.Add(time.Duration(p.Defaults.SuppressNotices))
	}
}

// WriteReport prints the reports as a table: per rule, the would-be
// actions, the verdicts and accounts acted on, and precision against the
// moderators' decisions with its 95 % interval.
func WriteReport(w io.Writer, p *policy.Policy, from, to time.Time, cases int, more bool, reps []RuleReport) error {
	fmt.Fprintf(w, "policy %s (sha256 %s), verdicts finished in [%s, %s): %d", p.Version, p.Hash[:12],
		from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), cases)
	if more {
		fmt.Fprint(w, " (cut by --limit: the period has more)")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "rule\tactions\tverdicts\taccounts\tdecided\tupheld\tprecision\t95% interval")
	for _, r := range reps {
		keys := make([]string, 0, len(r.Actions))
		for k := range r.Actions {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		acts := make([]string, len(keys))
		for i, k := range keys {
			acts[i] = fmt.Sprintf("%s=%d", k, r.Actions[k])
		}
		prec, ival := "-", "-"
		if r.Decided > 0 {
			prec, ival = fmt.Sprintf("%.3f", r.Precision), fmt.Sprintf("[%.3f, %.3f]", r.Lo, r.Hi)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", r.Rule, orDash(strings.Join(acts, " ")), r.Verdicts, r.Accounts, r.Decided, r.Upheld, prec, ival)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
