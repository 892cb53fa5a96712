package moderationtest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// ProtectHarness is what the protective-actions suite runs on: the port,
// and how to seed a verdict's action, read whether an account is cleared
// for a rule at a time, and list the actions queue's outbox event ids.
type ProtectHarness struct {
	Store   moderation.ProtectiveActions
	Seed    func(pipeline.ActionRecord) error
	Cleared func(account, rule string, at time.Time) bool
	Outbox  func() []string
}

var protectT0 = time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)

// SeedAction returns a valid action record of the kind about room's
// account acct under rule, issued at.
func SeedAction(room, acct, rule string, kind pipeline.ActionKind, mode pipeline.ActionMode, at time.Time) pipeline.ActionRecord {
	key := pipeline.ReviewKey{RoomID: room, WindowStart: at.Add(-10 * time.Minute), WindowEnd: at.Add(-time.Minute), PipelineVersion: "pv-test"}
	a := pipeline.ProtectiveAction{
		SchemaVersion: pipeline.ActionSchemaVersion, IdempotencyKey: pipeline.ForwardActionKey(key, 1, rule, kind, acct),
		PolicyVersion: "test", PolicyHash: strings.Repeat("ab", 32), VerdictRevision: 1, Source: pipeline.ActionSourceRealtime,
		Mode: mode, IssuedAt: at, ExpiresAt: at.Add(time.Hour),
		Item: pipeline.ActionEntity{ID: room, TypeID: pipeline.EntityRoom}, Action: pipeline.ActionRef{ID: kind},
		Policies: []pipeline.ActionPolicy{{ID: pipeline.CategoryExternalPayment, Name: "External payment", Penalty: pipeline.PenaltyHigh}},
		Rules:    []pipeline.ActionRule{{ID: rule, Name: rule}},
	}
	if kind != pipeline.ActionEscalate {
		a.Creator = pipeline.ActionEntity{ID: acct, TypeID: pipeline.EntityAccount}
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
	return pipeline.ActionRecord{ProtectiveAction: a, Key: key}
}

// RunProtectiveActionsConformance holds an implementation of
// moderation.ProtectiveActions to the port's contract: a room's actions
// newest first; an overturn's reversals written once with their states,
// outbox messages (mode on only) and cleared states; its undo re-applying
// and uncleared; a second overturn reversing the re-applications; an
// invalid action refusing the whole write.
func RunProtectiveActionsConformance(t *testing.T, newHarness func(t *testing.T) ProtectHarness) {
	h := newHarness(t)
	ctx := testCtx(t)
	room := "room-prot"
	warn := SeedAction(room, "acct-1", "rule_notice", pipeline.ActionWarnCounterpart, pipeline.ModeOn, protectT0)
	restrict := SeedAction(room, "acct-1", "rule_heavy", pipeline.ActionRestrictSender, pipeline.ModeDryRun, protectT0.Add(time.Second))
	esc := SeedAction(room, "", "rule_notice", pipeline.ActionEscalate, pipeline.ModeOn, protectT0.Add(2*time.Second))
	other := SeedAction(room+"-x", "acct-1", "rule_notice", pipeline.ActionWarnSender, pipeline.ModeOn, protectT0)
	for _, r := range []pipeline.ActionRecord{warn, restrict, esc, other} {
		require.NoError(t, h.Seed(r))
	}
	rows, err := h.Store.RoomActions(ctx, room, 100)
	require.NoError(t, err)
	require.Equal(t, []string{esc.IdempotencyKey, restrict.IdempotencyKey, warn.IdempotencyKey}, keysOf(rows), "the room's, newest first")
	w := rows[2]
	require.Equal(t, pipeline.ActionWarnCounterpart, w.Action)
	require.Equal(t, pipeline.ModeOn, w.Mode)
	require.Equal(t, "rule_notice", w.Rule)
	require.Equal(t, "acct-1", w.Account)
	require.Equal(t, moderation.ActionWritten, w.State)
	require.Equal(t, warn.Key.WindowEnd, w.Verdict.WindowEnd)
	require.Equal(t, room, w.Verdict.RoomID)
	require.True(t, w.InForce())
	require.False(t, rows[0].InForce(), "an escalation has no undo")

	now := protectT0.Add(time.Hour)
	cfg := moderation.DefaultReversalConfig()
	rev := moderation.PlanReversal(rows, "", 7, now, cfg)
	require.Len(t, rev.Actions, 2)
	before := len(h.Outbox())
	for range 2 { // a retried overturn writes nothing twice
		require.NoError(t, h.Store.WriteReversal(ctx, rev))
	}
	rows, err = h.Store.RoomActions(ctx, room, 100)
	require.NoError(t, err)
	require.Len(t, rows, 5)
	states := map[string]string{}
	for _, r := range rows {
		states[r.Key] = r.State
	}
	require.Equal(t, moderation.ActionReversed, states[warn.IdempotencyKey])
	require.Equal(t, moderation.ActionReversed, states[restrict.IdempotencyKey])
	require.Equal(t, moderation.ActionWritten, states[esc.IdempotencyKey])
	retract := pipeline.ReversalActionKey(warn.IdempotencyKey, 1)
	require.Equal(t, moderation.ActionWritten, states[retract])
	require.Equal(t, []string{retract}, h.Outbox()[before:], "only the reversal of an `on` action is sent, once")
	require.True(t, h.Cleared("acct-1", "rule_notice", now.Add(time.Hour)))
	require.True(t, h.Cleared("acct-1", "rule_heavy", now.Add(time.Hour)))
	require.False(t, h.Cleared("acct-1", "rule_notice", now.Add(cfg.ClearedFor+time.Second)), "until it expires")

	re := moderation.PlanReapply(rows, pipeline.RoleSeller, pipeline.CategoryExternalPayment, 8, now.Add(time.Minute), cfg)
	require.Len(t, re.Actions, 2)
	require.NoError(t, h.Store.WriteReversal(ctx, re))
	require.False(t, h.Cleared("acct-1", "rule_notice", now.Add(time.Hour)), "the undo lifts the cleared state")
	reapplied := pipeline.ReapplyActionKey(warn.IdempotencyKey, 1)
	require.Equal(t, []string{retract, reapplied}, h.Outbox()[before:])
	rows, err = h.Store.RoomActions(ctx, room, 100)
	require.NoError(t, err)
	require.Empty(t, moderation.PlanReapply(rows, pipeline.RoleSeller, pipeline.CategoryExternalPayment, 8, now, cfg).Actions, "re-applied once")

	again := moderation.PlanReversal(rows, "", 9, now.Add(2*time.Minute), cfg)
	require.Len(t, again.Actions, 2, "a second overturn reverses the re-applications")
	for _, a := range again.Actions {
		require.NotEqual(t, warn.IdempotencyKey, a.Reverses)
	}

	bad := again
	bad.Actions = append(bad.Actions, pipeline.ActionRecord{ProtectiveAction: pipeline.ProtectiveAction{IdempotencyKey: "bad"}})
	requirePermanent(t, h.Store.WriteReversal(ctx, bad))
	rows, err = h.Store.RoomActions(ctx, room, 100)
	require.NoError(t, err)
	require.Len(t, rows, 7, "nothing of a refused write")
}

func keysOf(rows []moderation.RoomAction) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key
	}
	return out
}
