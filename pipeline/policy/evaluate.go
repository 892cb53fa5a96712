package policy

import (
	"slices"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// Evidence is what a rule matches: one done verdict and what the review
// knew beyond the room.
type Evidence struct {
	Key          pipeline.ReviewKey
	Revision     int
	Label        pipeline.Label
	Category     pipeline.Category
	Severity     int
	Confidence   float64
	Source       pipeline.ActionSource
	OffenderRole pipeline.SenderRole
	// Offenders are the accounts the verdict is about (its subjects).
	Offenders []string
	// Signals are the rule-signal kinds the review found.
	Signals []string
	// CampaignRooms is the widest spread of the room's campaign marks.
	CampaignRooms int
	// HistoryRooms counts earlier rooms where the offender's side was
	// judged abusive and not overturned.
	HistoryRooms int
	// MessageAt is the newest message of the window (zero when unknown).
	MessageAt time.Time
}

// EvidenceOf reads a stored, done verdict as evidence.
func EvidenceOf(v pipeline.Verdict, src pipeline.ActionSource) Evidence {
	ev := Evidence{
		Key: v.Key, Revision: v.Revision, Label: v.Label, Category: v.Category, Severity: v.Severity,
		Confidence: v.Confidence, Source: src, OffenderRole: v.OffenderRole,
		Offenders: slices.Clone(v.Subjects), MessageAt: v.NewestMessageAt,
	}
	ev.Signals = pipeline.RecordedSignalKinds(v.Stages)
	for _, c := range v.Campaigns {
		ev.CampaignRooms = max(ev.CampaignRooms, c.Rooms)
		ev.Signals = append(ev.Signals, "campaign_"+string(c.Kind))
	}
	if h := pipeline.RecordedHistory(v.Stages); h != nil {
		for _, l := range h.Lines {
			if l.Role == v.OffenderRole && l.Label == pipeline.LabelAbusive && !l.Overturned {
				ev.HistoryRooms += l.Rooms
			}
		}
	}
	return ev
}

// State is what the store knows that limits a decision (read only).
type State = pipeline.ActionState

// SuppressKey names a notice for suppression in State.
func SuppressKey(room, account, rule string) string {
	return pipeline.ActionSuppressKey(room, account, rule)
}

// ClearedKey names a cleared state in State.
func ClearedKey(account, rule string) string { return pipeline.ActionClearedKey(account, rule) }

// Outcome is what became of one action a matching rule named.
type Outcome string

// The outcomes, the outcome label of chatguard_actions_total.
const (
	// OutcomeWritten: the action is taken (in its mode).
	OutcomeWritten Outcome = "written"
	// OutcomeSuppressed: a notice of the rule about the offender in the
	// room is within the suppression period.
	OutcomeSuppressed Outcome = "suppressed"
	// OutcomeCleared: an overturn cleared the account for the rule.
	OutcomeCleared Outcome = "cleared"
	// OutcomeCapped: the rule's daily cap is reached.
	OutcomeCapped Outcome = "capped"
	// OutcomeRateLimited: the account has had its heavy actions today.
	OutcomeRateLimited Outcome = "rate_limited"
	// OutcomeWeakEvidence: a heavy action without evidence beyond the
	// room.
	OutcomeWeakEvidence Outcome = "weak_evidence"
	// OutcomeNoOffender: an action about an account when the verdict
	// names none.
	OutcomeNoOffender Outcome = "no_offender"
	// OutcomeOldChat: an action other than escalate on a campaign
	// re-review (pipeline.ActionSourceCampaign), an old chat: whatever a
	// rule says, it may only put the room before moderators.
	OutcomeOldChat Outcome = "old_chat"
)

// Outcomes lists every outcome (metrics).
var Outcomes = []Outcome{OutcomeWritten, OutcomeSuppressed, OutcomeCleared, OutcomeCapped,
	OutcomeRateLimited, OutcomeWeakEvidence, OutcomeNoOffender, OutcomeOldChat}

// Decision is one action of one matching rule about one account (none for
// escalate) and what became of it.
type Decision struct {
	Rule    *Rule
	Kind    pipeline.ActionKind
	Mode    pipeline.ActionMode
	Account string
	Outcome Outcome
}

// Evaluate matches every rule against ev at now and returns a decision for
// each action (not off) of each matching rule, per offender; st is read
// only, and the decisions of one call count against each other (two
// rules' heavy actions on one account share its rate limit). Pure: the
// same inputs give the same decisions, in rule and action order.
func (p *Policy) Evaluate(ev Evidence, st State, now time.Time) []Decision {
	ruleUsed := map[string]int{}
	heavyUsed := map[string]int{}
	var out []Decision
	for i := range p.Rules {
		r := &p.Rules[i]
		if !r.matches(ev, now) {
			continue
		}
		for _, a := range r.Actions {
			if a.Mode == pipeline.ModeOff {
				continue
			}
			for _, acct := range accountsFor(a.Action, ev.Offenders) {
				d := Decision{Rule: r, Kind: a.Action, Mode: a.Mode, Account: acct}
				d.Outcome = p.outcome(d, ev, st, ruleUsed[r.ID], heavyUsed[acct])
				if d.Outcome == OutcomeWritten {
					ruleUsed[r.ID]++
					if a.Action.Heavy() {
						heavyUsed[acct]++
					}
				}
				out = append(out, d)
			}
		}
	}
	return out
}

// accountsFor lists the accounts one action is taken about: none for
// escalate (one per room), each offender otherwise, or one empty account
// (no_offender) when the verdict names none.
func accountsFor(k pipeline.ActionKind, offenders []string) []string {
	if k == pipeline.ActionEscalate {
		return []string{""}
	}
	if len(offenders) == 0 {
		return []string{""}
	}
	return offenders
}

// outcome decides one action, the cheapest refusals first, the breaker
// last so that a refused action does not use the rule's cap.
func (p *Policy) outcome(d Decision, ev Evidence, st State, ruleUsed, heavyUsed int) Outcome {
	if d.Kind != pipeline.ActionEscalate && ev.Source == pipeline.ActionSourceCampaign {
		return OutcomeOldChat
	}
	if d.Kind != pipeline.ActionEscalate && d.Account == "" {
		return OutcomeNoOffender
	}
	if d.Account != "" && st.Cleared[ClearedKey(d.Account, d.Rule.ID)] {
		return OutcomeCleared
	}
	if d.Kind.Notice() && st.Suppressed[SuppressKey(ev.Key.RoomID, d.Account, d.Rule.ID)] {
		return OutcomeSuppressed
	}
	if d.Kind.Heavy() {
		if !d.Rule.SingleRoomHeavy && ev.CampaignRooms < p.heavyCampaign() && ev.HistoryRooms < p.heavyHistory() {
			return OutcomeWeakEvidence
		}
		if st.HeavyToday[d.Account]+heavyUsed >= p.Defaults.HeavyPerAccountDaily {
			return OutcomeRateLimited
		}
	}
	if st.RuleToday[d.Rule.ID]+ruleUsed >= d.Rule.DailyCap {
		return OutcomeCapped
	}
	return OutcomeWritten
}

// heavyCampaign and heavyHistory are the heavy-evidence bounds; a bound
// of 0 is never met (it would make every room strong evidence).
func (p *Policy) heavyCampaign() int {
	if p.Defaults.HeavyMinCampaignRooms < 1 {
		return int(^uint(0) >> 1)
	}
	return p.Defaults.HeavyMinCampaignRooms
}

func (p *Policy) heavyHistory() int {
	if p.Defaults.HeavyMinHistoryRooms < 1 {
		return int(^uint(0) >> 1)
	}
	return p.Defaults.HeavyMinHistoryRooms
}

func (r *Rule) matches(ev Evidence, now time.Time) bool {
	if r.Expires != nil && !now.Before(*r.Expires) {
		return false
	}
	m := r.Match
	if ev.Label != pipeline.LabelAbusive && ev.Label != pipeline.LabelSuspicious {
		return false
	}
	if !in(m.Labels, ev.Label) || !in(m.Categories, ev.Category) || !in(m.Sources, ev.Source) || !in(m.OffenderRoles, ev.OffenderRole) {
		return false
	}
	if ev.Severity < m.MinSeverity || ev.Confidence < m.MinConfidence {
		return false
	}
	if ev.CampaignRooms < m.MinCampaignRooms || ev.HistoryRooms < m.MinHistoryRooms {
		return false
	}
	if len(m.SignalsAny) > 0 && !slices.ContainsFunc(ev.Signals, func(s string) bool { return slices.Contains(m.SignalsAny, s) }) {
		return false
	}
	return true
}

// in reports whether v is in list; an empty list holds everything.
func in[T comparable](list []T, v T) bool { return len(list) == 0 || slices.Contains(list, v) }
