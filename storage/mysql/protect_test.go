package mysql_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/policy"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/storetest"
)

func setupDB(t *testing.T) (*sql.DB, *mysql.Store) {
	t.Helper()
	db, _ := stacktest.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	return db, mysql.New(db)
}

// withActions returns v carrying the actions the policy decides for it
// against the store's state at now, as the worker's planner attaches them.
func withActions(t *testing.T, s *mysql.Store, p *policy.Policy, v pipeline.Verdict, now time.Time) pipeline.Verdict {
	t.Helper()
	ev := policy.EvidenceOf(v, pipeline.ActionSourceRealtime)
	ev.Revision = 1
	st, err := s.ActionState(context.Background(), pipeline.ActionStateQuery{RoomID: v.Key.RoomID, Accounts: v.Subjects, Rules: []string{"notice", "heavy"}, Now: now})
	require.NoError(t, err)
	v.Actions = nil
	for _, d := range p.Evaluate(ev, st, now) {
		if d.Outcome != policy.OutcomeWritten {
			continue
		}
		r := pipeline.ActionRecord{ProtectiveAction: p.Action(d, ev, now), Key: v.Key}
		if d.Kind.Notice() {
			r.SuppressUntil = now.Add(time.Hour)
		}
		v.Actions = append(v.Actions, r)
	}
	return v
}

const ledgerPolicy = `{"version":"t","defaults":{"locale":"ko","suppress_notices":"1h","action_ttl":"1h","restrict_for":"24h","cleared_for":"720h",
  "heavy_per_account_daily":1,"heavy_min_campaign_rooms":3,"heavy_min_history_rooms":1},
  "rules":[{"id":"notice","name":"Notice","daily_cap":100,"match":{"labels":["abusive"]},
     "actions":[{"action":"warn_counterpart","mode":"on"},{"action":"escalate","mode":"dry_run"}]},
   {"id":"heavy","name":"Heavy","daily_cap":100,"single_room_heavy":true,"match":{"labels":["abusive"]},
     "actions":[{"action":"restrict_sender","mode":"on"}]}]}`

func TestActionsAreWrittenWithTheVerdictAndLimitTheNext(t *testing.T) {
	t.Parallel()
	db, s := setupDB(t)
	ctx := context.Background()
	p, err := policy.Parse([]byte(ledgerPolicy))
	require.NoError(t, err)
	v := storetest.SampleVerdict("room-act")
	v.Subjects = []string{"seller-1"}
	v.OffenderRole = pipeline.RoleSeller
	now := v.FinishedAt
	v = withActions(t, s, p, v, now)
	require.Len(t, v.Actions, 3)
	committed, err := s.Save(ctx, v)
	require.NoError(t, err)
	require.True(t, committed)
	// Only the `on` actions are owed to the actions queue.
	var queued, rows int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM outbox WHERE destination = 'actions'").Scan(&queued))
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM protective_actions").Scan(&rows))
	require.Equal(t, 2, queued)
	require.Equal(t, 3, rows)

	// A redelivered review writes the same keys: nothing doubles.
	_, err = s.Save(ctx, v)
	require.NoError(t, err)
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM outbox WHERE destination = 'actions'").Scan(&queued))
	require.Equal(t, 2, queued)

	// The next window of the room: the notice is suppressed, the account
	// has had its heavy action, the rule counts are read back.
	st, err := s.ActionState(ctx, pipeline.ActionStateQuery{RoomID: "room-act", Accounts: []string{"seller-1"}, Rules: []string{"notice", "heavy"}, Now: now.Add(time.Minute)})
	require.NoError(t, err)
	require.True(t, st.Suppressed[pipeline.ActionSuppressKey("room-act", "seller-1", "notice")])
	require.Equal(t, 1, st.HeavyToday["seller-1"])
	require.Equal(t, map[string]int{"notice": 2, "heavy": 1}, st.RuleToday)
	require.Empty(t, st.Cleared)

	// An overturn's clearance is read back until it ends.
	require.NoError(t, s.RecordClearances(ctx, now, 0, []pipeline.ActionClearance{{Account: "seller-1", Rule: "notice", Until: now.Add(time.Hour)}}))
	st, err = s.ActionState(ctx, pipeline.ActionStateQuery{RoomID: "room-act", Accounts: []string{"seller-1"}, Now: now.Add(time.Minute)})
	require.NoError(t, err)
	require.True(t, st.Cleared[pipeline.ActionClearedKey("seller-1", "notice")])
	st, err = s.ActionState(ctx, pipeline.ActionStateQuery{RoomID: "room-act", Accounts: []string{"seller-1"}, Now: now.Add(2 * time.Hour)})
	require.NoError(t, err)
	require.Empty(t, st.Cleared)
	require.Empty(t, st.Suppressed)
}

func TestTwoWindowsSavedAtOnceGiveOneNotice(t *testing.T) {
	t.Parallel()
	db, s := setupDB(t)
	ctx := context.Background()
	p, err := policy.Parse([]byte(ledgerPolicy))
	require.NoError(t, err)
	// Both windows were evaluated before either saved: both decided a
	// notice; the suppression slot lets one through.
	a := storetest.SampleVerdict("room-two")
	a.Subjects, a.OffenderRole = []string{"seller-2"}, pipeline.RoleSeller
	b := a
	b.Key.WindowStart = a.Key.WindowStart.Add(10 * time.Minute)
	b.Key.WindowEnd = a.Key.WindowEnd.Add(10 * time.Minute)
	a = withActions(t, s, p, a, a.FinishedAt)
	b = withActions(t, s, p, b, a.FinishedAt.Add(time.Second))
	_, err = s.Save(ctx, a)
	require.NoError(t, err)
	_, err = s.Save(ctx, b)
	require.NoError(t, err)
	var notices int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM protective_actions WHERE action = 'warn_counterpart'").Scan(&notices))
	require.Equal(t, 1, notices)
}

func TestAKeptVerdictWritesNoAction(t *testing.T) {
	t.Parallel()
	db, s := setupDB(t)
	ctx := context.Background()
	p, err := policy.Parse([]byte(ledgerPolicy))
	require.NoError(t, err)
	v := storetest.SampleVerdict("room-kept")
	v.Subjects, v.OffenderRole = []string{"seller-3"}, pipeline.RoleSeller
	_, err = s.Save(ctx, v)
	require.NoError(t, err)
	failed := withActions(t, s, p, v, v.FinishedAt)
	failed.Status = pipeline.StatusFailed
	failed.Subjects, failed.Label, failed.Category = nil, "", pipeline.CategoryClean
	committed, err := s.Save(ctx, failed)
	require.NoError(t, err)
	require.False(t, committed)
	var rows int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM protective_actions").Scan(&rows))
	require.Zero(t, rows)

	bad := v
	bad.Actions = []pipeline.ActionRecord{{ProtectiveAction: pipeline.ProtectiveAction{SchemaVersion: 1}}}
	_, err = s.Save(ctx, bad)
	var perm *pipeline.PermanentError
	require.ErrorAs(t, err, &perm)
}

func TestBacktestCasesListFlaggedVerdictsWithTheirLastDecision(t *testing.T) {
	t.Parallel()
	db, s := setupDB(t)
	ctx := context.Background()
	base := storetest.SampleVerdict("room-bt-1")
	var ids []uint64
	for i, room := range []string{"room-bt-1", "room-bt-2", "room-bt-3"} {
		v := base
		v.Key.RoomID = room
		v.FinishedAt = base.FinishedAt.Add(time.Duration(i) * time.Minute)
		if i == 0 {
			v.RunID = "rt-20261103T040000Z"
		}
		if i == 2 {
			v.Label, v.Category, v.Severity, v.Confidence = pipeline.LabelClean, pipeline.CategoryClean, 0, 0.9
		}
		storetest.MustSave(t, ctx, s, v)
		id, err := s.VerdictID(ctx, v.Key)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	for _, d := range []struct {
		id       uint64
		decision string
		at       time.Duration
	}{{ids[0], "confirm", 0}, {ids[0], "overturn", time.Minute}, {ids[1], "confirm", 0}} {
		_, err := db.ExecContext(ctx, `INSERT INTO moderator_decisions (verdict_id, moderator, decision, label, category, decided_at) VALUES (?, 'mod-1', ?, 'abusive', '', ?)`,
			d.id, d.decision, base.FinishedAt.Add(time.Hour+d.at))
		require.NoError(t, err)
	}
	cases, more, err := s.BacktestCases(ctx, base.FinishedAt.Add(-time.Minute), base.FinishedAt.Add(time.Hour), 10)
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, cases, 2, "the clean verdict is not a case")
	require.Equal(t, "room-bt-1", cases[0].Verdict.Key.RoomID)
	require.Equal(t, "overturn", cases[0].Decision, "the last decision")
	require.Equal(t, pipeline.ActionSourceRealtime, cases[0].Source)
	require.Equal(t, "confirm", cases[1].Decision)
	require.Equal(t, pipeline.ActionSourceBatch, cases[1].Source)
	cases, more, err = s.BacktestCases(ctx, base.FinishedAt.Add(-time.Minute), base.FinishedAt.Add(time.Hour), 1)
	require.NoError(t, err)
	require.True(t, more)
	require.Len(t, cases, 1)
}

const heavyPolicy = `{"version":"t","defaults":{"locale":"ko","suppress_notices":"1h","action_ttl":"1h","restrict_for":"24h","cleared_for":"720h",
  "heavy_per_account_daily":5,"heavy_min_campaign_rooms":3,"heavy_min_history_rooms":1},
  "rules":[{"id":"heavy","name":"Heavy","daily_cap":100,"single_room_heavy":true,"match":{"labels":["abusive"]},
     "actions":[{"action":"hold_transaction","mode":"on"},{"action":"restrict_sender","mode":"on"},{"action":"warn_sender","mode":"dry_run"},
       {"action":"escalate","mode":"on"}]}]}`

func TestAnOverturnReversesTheVerdictsActions(t *testing.T) {
	t.Parallel()
	db, s := setupDB(t)
	ctx := context.Background()
	p, err := policy.Parse([]byte(heavyPolicy))
	require.NoError(t, err)
	v := storetest.SampleVerdict("room-rev")
	v.Subjects, v.OffenderRole = []string{"seller-9"}, pipeline.RoleSeller
	now := v.FinishedAt
	ev := policy.EvidenceOf(v, pipeline.ActionSourceRealtime)
	ev.Revision = 1
	for _, d := range p.Evaluate(ev, pipeline.ActionState{}, now) {
		require.Equal(t, policy.OutcomeWritten, d.Outcome, "%s", d.Kind)
		v.Actions = append(v.Actions, pipeline.ActionRecord{ProtectiveAction: p.Action(d, ev, now), Key: v.Key})
	}
	storetest.MustSave(t, ctx, s, v)
	// The hold left already; the restriction has not.
	var holdKey string
	for _, a := range v.Actions {
		if a.Action.ID == pipeline.ActionHoldTransaction {
			holdKey = a.IdempotencyKey
		}
	}
	_, err = db.ExecContext(ctx, "UPDATE outbox SET sent_at = ? WHERE event_id = ?", now, holdKey)
	require.NoError(t, err)

	at := now.Add(time.Hour)
	r := moderation.Reversal{Key: v.Key, DecisionID: 7, At: at, ClearedUntil: at.Add(720 * time.Hour), ExpiresAt: at.Add(7 * 24 * time.Hour)}
	revs, err := s.ReverseActions(ctx, r)
	require.NoError(t, err)
	got := map[pipeline.ActionKind]string{}
	for _, rv := range revs {
		require.NoError(t, rv.Validate())
		require.Equal(t, pipeline.ActionSourceModerator, rv.Source)
		got[rv.Action.ID] = rv.Reverses
	}
	// Escalate has no undo, the dry-run notice was never shown.
	require.Len(t, got, 2)
	require.Equal(t, holdKey, got[pipeline.ActionReleaseTransaction])
	require.Contains(t, got, pipeline.ActionLiftRestriction)

	var pendingForward, queuedReversals, reversed int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM outbox o JOIN protective_actions a ON a.idempotency_key = o.event_id
		WHERE a.reverses IS NULL AND o.sent_at IS NULL AND a.action <> 'escalate'`).Scan(&pendingForward))
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM outbox o JOIN protective_actions a ON a.idempotency_key = o.event_id
		WHERE a.reverses IS NOT NULL`).Scan(&queuedReversals))
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM protective_actions WHERE state = 'reversed'`).Scan(&reversed))
	require.Zero(t, pendingForward, "the unsent restriction is cancelled: no stale action after its reversal")
	require.Equal(t, 2, queuedReversals)
	require.Equal(t, 4, reversed)

	st, err := s.ActionState(ctx, pipeline.ActionStateQuery{RoomID: "room-rev", Accounts: []string{"seller-9"}, Now: at.Add(time.Hour)})
	require.NoError(t, err)
	require.True(t, st.Cleared[pipeline.ActionClearedKey("seller-9", "heavy")], "the next window cannot act again")

	again, err := s.ReverseActions(ctx, r)
	require.NoError(t, err)
	require.Empty(t, again, "a second overturn call is a no-op")

	// The overturn undone: the reversed `on` actions that can be undone
	// are applied again under keys of their own, the clearance is gone.
	undoAt := at.Add(time.Minute)
	r.At = undoAt
	re, err := s.ReapplyActions(ctx, r)
	require.NoError(t, err)
	kinds := map[pipeline.ActionKind]pipeline.ProtectiveAction{}
	for _, a := range re {
		require.NoError(t, a.Validate())
		require.NotEmpty(t, a.Reverses)
		kinds[a.Action.ID] = a
	}
	require.Len(t, kinds, 2)
	require.Equal(t, holdKey, kinds[pipeline.ActionHoldTransaction].Reverses)
	require.Equal(t, undoAt.Add(24*time.Hour), *kinds[pipeline.ActionRestrictSender].Custom.Until, "the restriction's length, from the undo")
	st, err = s.ActionState(ctx, pipeline.ActionStateQuery{RoomID: "room-rev", Accounts: []string{"seller-9"}, Now: undoAt.Add(time.Hour)})
	require.NoError(t, err)
	require.Empty(t, st.Cleared)
	var written int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM protective_actions WHERE reverses IS NULL AND state = 'written'`).Scan(&written))
	require.Equal(t, 4, written)
	none, err := s.ReapplyActions(ctx, r)
	require.NoError(t, err)
	require.Empty(t, none, "a second undo is a no-op")

	// A second overturn reverses again, under new keys.
	r.At = undoAt.Add(time.Minute)
	revs2, err := s.ReverseActions(ctx, r)
	require.NoError(t, err)
	require.Len(t, revs2, 2)
	for _, rv := range revs2 {
		require.NotContains(t, []string{revs[0].IdempotencyKey, revs[1].IdempotencyKey}, rv.IdempotencyKey)
	}
}

func TestActionStoreConformance(t *testing.T) {
	t.Parallel()
	storetest.RunActionStoreConformance(t, func(t *testing.T) storetest.ActionOutboxStore { _, s := setupDB(t); return s })
}

// TestUndoingAnOverturnLeavesWhatWasReversedByKey: a moderator reverses
// the hold by its key, then overturns the verdict (the restriction is
// reversed) and undoes the overturn: only the restriction comes back.
func TestUndoingAnOverturnLeavesWhatWasReversedByKey(t *testing.T) {
	t.Parallel()
	_, s := setupDB(t)
	ctx := context.Background()
	p, err := policy.Parse([]byte(heavyPolicy))
	require.NoError(t, err)
	v := storetest.SampleVerdict("room-rev-key")
	v.Subjects, v.OffenderRole = []string{"seller-10"}, pipeline.RoleSeller
	now := v.FinishedAt
	ev := policy.EvidenceOf(v, pipeline.ActionSourceRealtime)
	ev.Revision = 1
	var holdKey string
	for _, d := range p.Evaluate(ev, pipeline.ActionState{}, now) {
		a := pipeline.ActionRecord{ProtectiveAction: p.Action(d, ev, now), Key: v.Key}
		if a.Action.ID == pipeline.ActionHoldTransaction {
			holdKey = a.IdempotencyKey
		}
		v.Actions = append(v.Actions, a)
	}
	storetest.MustSave(t, ctx, s, v)

	byKey, err := s.ReverseAction(ctx, moderation.KeyReversal{RoomID: "room-rev-key", Key: holdKey, At: now.Add(time.Minute),
		ExpiresAt: now.Add(time.Hour), Source: pipeline.ActionSourceModerator})
	require.NoError(t, err)
	require.True(t, byKey.Reversed)
	r := moderation.Reversal{Key: v.Key, DecisionID: 8, At: now.Add(time.Hour), ClearedUntil: now.Add(720 * time.Hour), ExpiresAt: now.Add(2 * time.Hour)}
	revs, err := s.ReverseActions(ctx, r)
	require.NoError(t, err)
	require.Len(t, revs, 1, "the overturn reverses the restriction; the hold is reversed already")
	require.Equal(t, pipeline.ActionLiftRestriction, revs[0].Action.ID)

	r.At = r.At.Add(time.Minute)
	re, err := s.ReapplyActions(ctx, r)
	require.NoError(t, err)
	require.Len(t, re, 1, "the undo re-applies what the overturn reversed, not the hold reversed by its key")
	require.Equal(t, pipeline.ActionRestrictSender, re[0].Action.ID)
	rows, err := s.RoomActions(ctx, "room-rev-key", 0)
	require.NoError(t, err)
	for _, a := range rows {
		if a.Key == holdKey {
			require.Equal(t, moderation.ActionReversed, a.State, "the hold stays reversed")
		}
	}
}
