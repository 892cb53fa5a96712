// Package protect is the worker's protective-action step: after the judge,
// it evaluates the policy (package pipeline/policy) over a done verdict
// against the store's record of earlier actions, and attaches the actions
// it decides to the verdict, which the store writes in the verdict's own
// transaction with the outbox rows that send the `on` ones to the
// `actions` queue. It also observes protection latency as the relay
// publishes.
package protect

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/policy"
)

// Planner decides a verdict's protective actions. It is safe for
// concurrent use.
type Planner struct {
	pol    *policy.Policy
	ledger pipeline.ActionLedger
	rules  []string
	clk    clock.Clock
	m      *Metrics
	log    *slog.Logger
}

// New returns a planner of pol over ledger, timed on clk (nil: the wall
// clock). m and log may be nil.
func New(pol *policy.Policy, ledger pipeline.ActionLedger, clk clock.Clock, m *Metrics, log *slog.Logger) *Planner {
	if m == nil {
		m = NewMetrics(nil)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Planner{pol: pol, ledger: ledger, clk: clock.Or(clk), m: m, log: log}
	for _, r := range pol.Rules {
		p.rules = append(p.rules, r.ID)
	}
	m.policyInfo(pol)
	return p
}

// Plan returns v with the actions the policy decides for it
// (v.Actions, replacing any an earlier attempt attached): none for a
// verdict that is not done or is clean. src is where the verdict came
// from. An action the policy refuses (suppressed, cleared, capped,
// rate-limited, weak evidence, no offender) is counted under its outcome.
// A failure to read the store's record fails the plan: the verdict must
// not be saved without the actions it owes.
func (p *Planner) Plan(ctx context.Context, v pipeline.Verdict, src pipeline.ActionSource) (pipeline.Verdict, error) {
	v.Actions = nil
	if v.Status != pipeline.StatusDone || (v.Label != pipeline.LabelAbusive && v.Label != pipeline.LabelSuspicious) {
		return v, nil
	}
	now := p.clk.Now().UTC()
	ev := policy.EvidenceOf(v, src)
	// A review from a queue saves over its key's current revision, the
	// first unless a moderator re-reviewed it (then the done-guard keeps
	// the re-review and writes none of these).
	ev.Revision = max(ev.Revision, 1)
	st, err := p.ledger.ActionState(ctx, pipeline.ActionStateQuery{RoomID: v.Key.RoomID, Accounts: ev.Offenders, Rules: p.rules, Now: now})
	if err != nil {
		p.m.planErrors.Inc()
		return v, fmt.Errorf("protect: %w", err)
	}
	for _, d := range p.pol.Evaluate(ev, st, now) {
		if d.Outcome != policy.OutcomeWritten {
			p.m.count(d.Kind, d.Mode, string(d.Outcome))
			continue
		}
		r := pipeline.ActionRecord{ProtectiveAction: p.pol.Action(d, ev, now), Key: v.Key}
		if d.Kind.Notice() {
			r.SuppressUntil = now.Add(time.Duration(p.pol.Defaults.SuppressNotices))
		}
		v.Actions = append(v.Actions, r)
	}
	return v, nil
}

// Committed counts the actions of a verdict the store committed as
// written (a notice the store found suppressed at the save is among them:
// the save leaves it out without telling).
func (p *Planner) Committed(v pipeline.Verdict) {
	for _, a := range v.Actions {
		p.m.count(a.Action.ID, a.Mode, string(policy.OutcomeWritten))
		for _, r := range a.Rules {
			p.m.byRule.WithLabelValues(r.ID, string(a.Mode)).Inc()
		}
	}
}
