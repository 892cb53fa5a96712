package moderationtest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// HistoryHarness is what the action-history suite runs on: the port, and
// how to seed a verdict's action as its save writes it.
type HistoryHarness struct {
	Store moderation.ActionHistory
	Seed  func(pipeline.ActionRecord) error
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

// RunActionHistoryConformance holds an implementation of
// moderation.ActionHistory to the port's contract: a room's actions only,
// newest first, every field kept, at most limit.
func RunActionHistoryConformance(t *testing.T, newHarness func(t *testing.T) HistoryHarness) {
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
	require.Equal(t, pipeline.ActionSourceRealtime, w.Source)
	require.Equal(t, "rule_notice", w.Rule)
	require.Equal(t, "acct-1", w.Account)
	require.Equal(t, moderation.ActionWritten, w.State)
	require.Equal(t, warn.Key.WindowEnd, w.Verdict.WindowEnd)
	require.Equal(t, warn.Key.PipelineVersion, w.Verdict.PipelineVersion)
	require.Equal(t, room, w.Verdict.RoomID)
	require.Equal(t, protectT0, w.CreatedAt)
	require.Equal(t, protectT0.Add(time.Hour), w.ExpiresAt)
	require.True(t, w.InForce())
	require.False(t, rows[0].InForce(), "an escalation has no undo")
	require.Equal(t, pipeline.ModeDryRun, rows[1].Mode)

	rows, err = h.Store.RoomActions(ctx, room, 2)
	require.NoError(t, err)
	require.Len(t, rows, 2, "at most limit")
	rows, err = h.Store.RoomActions(ctx, "room-none", 10)
	require.NoError(t, err)
	require.Empty(t, rows)
}

func keysOf(rows []moderation.RoomAction) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key
	}
	return out
}
