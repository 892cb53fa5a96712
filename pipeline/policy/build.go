package policy

import (
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// Action builds the action body of a written decision about ev, decided
// at now: its deterministic key, the policy's version and hash, and the
// Coop-named fields. It carries ids and enumerations only.
func (p *Policy) Action(d Decision, ev Evidence, now time.Time) pipeline.ProtectiveAction {
	now = now.UTC()
	a := pipeline.ProtectiveAction{
		SchemaVersion:   pipeline.ActionSchemaVersion,
		IdempotencyKey:  pipeline.ForwardActionKey(ev.Key, ev.Revision, d.Rule.ID, d.Kind, d.Account),
		PolicyVersion:   p.Version,
		PolicyHash:      p.Hash,
		VerdictRevision: ev.Revision,
		Source:          ev.Source,
		Mode:            d.Mode,
		IssuedAt:        now,
		ExpiresAt:       now.Add(time.Duration(p.Defaults.ActionTTL)),
		Item:            pipeline.ActionEntity{ID: ev.Key.RoomID, TypeID: pipeline.EntityRoom},
		Action:          pipeline.ActionRef{ID: d.Kind},
		Rules:           []pipeline.ActionRule{{ID: d.Rule.ID, Name: d.Rule.Name}},
	}
	if !ev.MessageAt.IsZero() {
		m := ev.MessageAt.UTC()
		a.MessageAt = &m
	}
	if d.Account != "" {
		a.Creator = pipeline.ActionEntity{ID: d.Account, TypeID: pipeline.EntityAccount}
	}
	if ev.Category.Valid() && ev.Category != pipeline.CategoryClean {
		a.Policies = []pipeline.ActionPolicy{{ID: ev.Category, Name: categoryName(ev.Category), Penalty: pipeline.PenaltyFromSeverity(ev.Severity)}}
	}
	switch {
	case d.Kind.Notice():
		a.Custom.Template = pipeline.NoticeTemplate(d.Kind, ev.Category)
		a.Custom.Locale = p.Defaults.Locale
		if d.Kind == pipeline.ActionWarnCounterpart {
			a.Custom.Counterpart = counterpart(ev.OffenderRole)
		}
	case d.Kind == pipeline.ActionRestrictSender:
		until := now.Add(time.Duration(p.Defaults.RestrictFor))
		a.Custom.Until = &until
	}
	return a
}

// counterpart is the side a counterpart notice is shown to: the one the
// verdict is not about (the buyer when the offender is unknown: most
// scams in these rooms are a seller's).
func counterpart(offender pipeline.SenderRole) pipeline.SenderRole {
	if offender == pipeline.RoleBuyer {
		return pipeline.RoleSeller
	}
	return pipeline.RoleBuyer
}

func categoryName(c pipeline.Category) string {
	s := strings.ReplaceAll(string(c), "_", " ")
	return strings.ToUpper(s[:1]) + s[1:]
}
