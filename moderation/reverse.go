package moderation

import (
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// PlanReversal returns the reversal of every action of rows in force (of
// the one keyed only, when only is not ""), at now, caused by decision
// decisionID, with a cleared state for each account and rule reversed. The
// keys are deterministic: an overturn retried after a failure plans the
// same actions again, and the store keeps the first.
func PlanReversal(rows []RoomAction, only string, decisionID uint64, now time.Time, cfg ReversalConfig) Reversal {
	r := Reversal{At: now, DecisionID: decisionID}
	cleared := map[string]bool{}
	for _, a := range rows {
		if !a.InForce() || (only != "" && a.Key != only) {
			continue
		}
		rev := baseAction(a, now, cfg)
		rev.IdempotencyKey = pipeline.ReversalActionKey(a.Key, 1)
		rev.Action = pipeline.ActionRef{ID: a.Action.ReversedBy()}
		if rev.Action.ID == pipeline.ActionRetractNotice {
			// The row keeps no template: the retraction names its
			// audience's generic notice; the chat service retracts by key.
			rev.Custom.Template, rev.Custom.Locale = pipeline.NoticeTemplate(a.Action, ""), cfg.Locale
		}
		r.Actions = append(r.Actions, pipeline.ActionRecord{ProtectiveAction: rev, Key: a.Verdict})
		if k := pipeline.ActionClearedKey(a.Account, a.Rule); a.Account != "" && !cleared[k] {
			cleared[k] = true
			r.Clear = append(r.Clear, pipeline.ActionClearance{Account: a.Account, Rule: a.Rule, Until: now.Add(cfg.ClearedFor)})
		}
	}
	return r
}

// PlanReapply returns the re-application of every action of rows that a
// moderator's reversal undid and that was not re-applied before, at now,
// for a verdict about offender (its OffenderRole) in category, and the
// removal of the cleared states the overturn recorded.
func PlanReapply(rows []RoomAction, offender pipeline.SenderRole, category pipeline.Category, decisionID uint64, now time.Time, cfg ReversalConfig) Reversal {
	r := Reversal{At: now, DecisionID: decisionID}
	keys := make(map[string]bool, len(rows))
	byModerator := map[string]bool{}
	for _, a := range rows {
		keys[a.Key] = true
		if a.Action.Reversal() && a.Source == pipeline.ActionSourceModerator {
			byModerator[a.Reverses] = true
		}
	}
	uncleared := map[string]bool{}
	for _, a := range rows {
		key := pipeline.ReapplyActionKey(a.Key, 1)
		if a.State != ActionReversed || a.Action.ReversedBy() == "" || !byModerator[a.Key] || keys[key] {
			continue
		}
		re := baseAction(a, now, cfg)
		re.IdempotencyKey = key
		re.Action = pipeline.ActionRef{ID: a.Action}
		switch {
		case a.Action.Notice():
			re.Custom.Template, re.Custom.Locale = pipeline.NoticeTemplate(a.Action, category), cfg.Locale
			if a.Action == pipeline.ActionWarnCounterpart {
				re.Custom.Counterpart = counterpartOf(offender)
			}
		case a.Action == pipeline.ActionRestrictSender:
			until := now.Add(cfg.RestrictFor)
			re.Custom.Until = &until
		}
		r.Actions = append(r.Actions, pipeline.ActionRecord{ProtectiveAction: re, Key: a.Verdict})
		if k := pipeline.ActionClearedKey(a.Account, a.Rule); a.Account != "" && !uncleared[k] {
			uncleared[k] = true
			r.Unclear = append(r.Unclear, pipeline.ActionClearance{Account: a.Account, Rule: a.Rule})
		}
	}
	return r
}

// counterpartOf is the other side of a trade from the offender; a buyer
// when the verdict does not say (the common case: a seller's scam).
func counterpartOf(offender pipeline.SenderRole) pipeline.SenderRole {
	if offender == pipeline.RoleBuyer {
		return pipeline.RoleSeller
	}
	return pipeline.RoleBuyer
}

// baseAction is the envelope a moderator's action about a's room and
// account carries: a's policy and verdict, source moderator, a's mode,
// reverses a's key.
func baseAction(a RoomAction, now time.Time, cfg ReversalConfig) pipeline.ProtectiveAction {
	p := pipeline.ProtectiveAction{
		SchemaVersion: pipeline.ActionSchemaVersion, PolicyVersion: a.PolicyVersion, PolicyHash: a.PolicyHash,
		VerdictRevision: a.VerdictRevision, Source: pipeline.ActionSourceModerator, Mode: a.Mode,
		IssuedAt: now, ExpiresAt: now.Add(cfg.TTL), Reverses: a.Key,
		Item:  pipeline.ActionEntity{ID: a.Verdict.RoomID, TypeID: pipeline.EntityRoom},
		Rules: []pipeline.ActionRule{{ID: a.Rule, Name: a.Rule}},
	}
	if a.Account != "" {
		p.Creator = pipeline.ActionEntity{ID: a.Account, TypeID: pipeline.EntityAccount}
	}
	return p
}
