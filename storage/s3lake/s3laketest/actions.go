package s3laketest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// ActionAccount is the raw account id ActionEvents acts on in room i: it
// is in every generated body and must never reach the lake.
func ActionAccount(i int) string { return fmt.Sprintf("acct-raw-%05d", i) }

// ActionRecord returns a valid action record of kind by rule about room
// i's account, issued at, with its offender's keyed pseudonym.
func ActionRecord(i int, rule string, kind pipeline.ActionKind, mode pipeline.ActionMode, at time.Time) pipeline.ActionRecord {
	room := fmt.Sprintf("act-room-%05d", i)
	key := pipeline.ReviewKey{RoomID: room, WindowStart: at.Add(-10 * time.Minute), WindowEnd: at.Add(-time.Minute), PipelineVersion: "v1.2.0"}
	msgAt := at.Add(-time.Duration(20+i%40) * time.Second)
	a := pipeline.ProtectiveAction{
		SchemaVersion: pipeline.ActionSchemaVersion, IdempotencyKey: pipeline.ForwardActionKey(key, 1, rule, kind, ActionAccount(i)),
		PolicyVersion: "2026-12-01", PolicyHash: strings.Repeat("ab", 32), VerdictRevision: 1, Source: pipeline.ActionSourceRealtime,
		Mode: mode, IssuedAt: at, MessageAt: &msgAt, ExpiresAt: at.Add(time.Hour),
		Item: pipeline.ActionEntity{ID: room, TypeID: pipeline.EntityRoom}, Action: pipeline.ActionRef{ID: kind},
		Policies: []pipeline.ActionPolicy{{ID: pipeline.CategoryExternalPayment, Name: "External payment", Penalty: pipeline.PenaltyHigh}},
		Rules:    []pipeline.ActionRule{{ID: rule, Name: rule}},
	}
	if kind != pipeline.ActionEscalate {
		a.Creator = pipeline.ActionEntity{ID: ActionAccount(i), TypeID: pipeline.EntityAccount}
	}
	switch kind {
	case pipeline.ActionWarnCounterpart, pipeline.ActionWarnSender:
		a.Custom.Template, a.Custom.Locale = pipeline.NoticeTemplate(kind, pipeline.CategoryExternalPayment), "ko"
		if kind == pipeline.ActionWarnCounterpart {
			a.Custom.Counterpart = pipeline.RoleBuyer
		}
	case pipeline.ActionRestrictSender:
		until := at.Add(24 * time.Hour)
		a.Custom.Until = &until
	}
	return pipeline.ActionRecord{ProtectiveAction: a, Key: key, Offender: fmt.Sprintf("hmac2:%024x", i)}
}

// ActionEvents returns the protective_action events of n forward actions
// spread over hours hours from start, deterministic for a seed, as the
// store and the relay write them: each action's written event, an `on`
// one's published event a few seconds later (some after a second send),
// and every seventh `on` notice reversed an hour later (its reversal's
// written and published events). Bodies carry raw account ids
// (ActionAccount); the events must not.
func ActionEvents(n int, seed uint64, start time.Time, hours int) []pipeline.LakeEvent {
	r := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	rules := []string{"scam_payment_warn", "campaign_restrict", "escalate_severe"}
	kinds := map[string]pipeline.ActionKind{"scam_payment_warn": pipeline.ActionWarnCounterpart, "campaign_restrict": pipeline.ActionRestrictSender, "escalate_severe": pipeline.ActionEscalate}
	var out []pipeline.LakeEvent
	for i := range n {
		at := start.UTC().Add(time.Duration(r.Int64N(int64(hours) * int64(time.Hour)))).Truncate(time.Millisecond)
		rule := rules[r.IntN(len(rules))]
		mode := pipeline.ModeOn
		if r.IntN(4) == 0 {
			mode = pipeline.ModeDryRun
		}
		rec := ActionRecord(i, rule, kinds[rule], mode, at)
		out = append(out, pipeline.ActionWrittenEvent(rec))
		if mode != pipeline.ModeOn {
			continue
		}
		out = append(out, published(rec.ProtectiveAction, at.Add(time.Duration(200+r.IntN(5000))*time.Millisecond), 1+r.IntN(2)))
		if i%7 == 0 && kinds[rule] == pipeline.ActionWarnCounterpart {
			rev := rec.ProtectiveAction
			rev.IdempotencyKey, rev.Reverses = pipeline.ReversalActionKey(rec.IdempotencyKey, 1), rec.IdempotencyKey
			rev.Action.ID, rev.Source, rev.Custom = pipeline.ActionRetractNotice, pipeline.ActionSourceModerator, pipeline.ActionCustom{}
			rev.IssuedAt, rev.ExpiresAt, rev.MessageAt = at.Add(time.Hour), at.Add(2*time.Hour), nil
			out = append(out, pipeline.ActionWrittenEvent(pipeline.ActionRecord{ProtectiveAction: rev, Key: rec.Key}))
			out = append(out, published(rev, rev.IssuedAt.Add(time.Second), 1))
		}
	}
	return out
}

func published(a pipeline.ProtectiveAction, at time.Time, sends int) pipeline.LakeEvent {
	body, err := pipeline.EncodeProtectiveAction(a)
	if err != nil {
		panic(err) // the generator writes valid actions only
	}
	ev, err := pipeline.ActionPublishedEvent(body, at, sends)
	if err != nil {
		panic(err)
	}
	return ev
}
