package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// ActionOutboxStore is an action store with the outbox its saves write
// to: what the worker's planner, save and relay need of one database.
type ActionOutboxStore interface {
	pipeline.ActionStore
	pipeline.OutboxStore
}

// actionsT0 is the action suite's "now": issue times, and so the counts'
// days, come from it, never from the store's clock.
var actionsT0 = time.Date(2026, 11, 3, 5, 0, 0, 0, time.UTC)

// RunActionStoreConformance checks that a pipeline.ActionStore keeps
// protective actions as the planner, the relay and the lake rely on: a
// committed save writes each action once per key with its written lake
// event and, when `on`, its queue message; a notice whose slot another
// notice holds writes nothing; a save the done-guard refuses, or with an
// action the strict writer refuses, writes no action; ActionState counts
// the rules' actions of the UTC day, the heavy actions of the last 24
// hours, the live suppressions and the clearances; a clearance is
// replaced by a later one. newStore must return a store over empty,
// isolated storage.
func RunActionStoreConformance(t *testing.T, newStore func(t *testing.T) ActionOutboxStore) {
	t.Helper()
	t.Run("a save writes its actions and their messages once", func(t *testing.T) { t.Parallel(); actionsSaved(t, newStore(t)) })
	t.Run("a held notice slot writes nothing", func(t *testing.T) { t.Parallel(); actionsSuppressed(t, newStore(t)) })
	t.Run("a refused save writes no action", func(t *testing.T) { t.Parallel(); actionsRefused(t, newStore(t)) })
	t.Run("counts by day and by 24 hours", func(t *testing.T) { t.Parallel(); actionsCounts(t, newStore(t)) })
	t.Run("clearances until they end", func(t *testing.T) { t.Parallel(); actionsCleared(t, newStore(t)) })
}

// verdictWith is room's sample verdict, finished at at, carrying recs.
func verdictWith(room string, at time.Time, recs ...pipeline.ActionRecord) pipeline.Verdict {
	v := SampleVerdict(room)
	v.Key.WindowStart, v.Key.WindowEnd = at.Add(-time.Hour), at.Add(-time.Minute)
	v.StartedAt, v.FinishedAt = at.Add(-time.Second), at
	v.Actions = recs
	return v
}

// pendingBy counts the outbox's pending messages per destination.
func pendingBy(t *testing.T, s pipeline.OutboxStore) map[pipeline.OutboxDestination]int {
	t.Helper()
	b, err := s.Backlog(outboxCtx(t))
	require.NoError(t, err)
	out := map[pipeline.OutboxDestination]int{}
	for d, bl := range b {
		out[d] = bl.Pending
	}
	return out
}

// allDue claims every pending message of both destinations (a store may
// date its own rows by its wall clock: the claim is long after any).
func allDue(t *testing.T, s pipeline.OutboxStore) []pipeline.OutboxRow {
	t.Helper()
	later := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	rows, err := s.Claim(outboxCtx(t), []pipeline.OutboxDestination{pipeline.OutboxActions, pipeline.OutboxFeedback}, later, time.Minute, 100)
	require.NoError(t, err)
	return rows
}

func actionState(t *testing.T, s pipeline.ActionLedger, room string, accts []string, now time.Time) pipeline.ActionState {
	t.Helper()
	st, err := s.ActionState(outboxCtx(t), pipeline.ActionStateQuery{RoomID: room, Accounts: accts, Rules: []string{"notice", "heavy"}, Now: now})
	require.NoError(t, err)
	return st
}

func actionsSaved(t *testing.T, s ActionOutboxStore) {
	ctx := outboxCtx(t)
	warn := SampleAction("room-a", "acct-1", "notice", pipeline.ActionWarnCounterpart, pipeline.ModeOn, actionsT0)
	warn.Offender = "hmac2:0123456789abcdef01234567"
	esc := SampleAction("room-a", "", "notice", pipeline.ActionEscalate, pipeline.ModeDryRun, actionsT0)
	heavy := SampleAction("room-a", "acct-1", "heavy", pipeline.ActionRestrictSender, pipeline.ModeOn, actionsT0)
	v := verdictWith("room-a", actionsT0, warn, esc, heavy)
	require.True(t, MustSave(t, ctx, s, v))
	require.Equal(t, map[pipeline.OutboxDestination]int{pipeline.OutboxActions: 2, pipeline.OutboxFeedback: 3}, pendingBy(t, s),
		"the `on` actions to the queue, every action's lake event")

	require.True(t, MustSave(t, ctx, s, v), "a redelivered review saves again")
	require.Equal(t, map[pipeline.OutboxDestination]int{pipeline.OutboxActions: 2, pipeline.OutboxFeedback: 3}, pendingBy(t, s), "nothing twice")
	st := actionState(t, s, "room-a", []string{"acct-1"}, actionsT0.Add(time.Minute))
	require.Equal(t, map[string]int{"notice": 2, "heavy": 1}, st.RuleToday)

	keys := map[string]bool{}
	for _, row := range allDue(t, s) {
		switch row.Destination {
		case pipeline.OutboxActions:
			a, err := pipeline.DecodeProtectiveAction(row.Body)
			require.NoError(t, err)
			require.Equal(t, row.EventID, a.IdempotencyKey)
			require.Contains(t, []string{warn.IdempotencyKey, heavy.IdempotencyKey}, a.IdempotencyKey)
		case pipeline.OutboxFeedback:
			ev, err := pipeline.DecodeLakeEvent(row.Body, actionsT0)
			require.NoError(t, err)
			require.Equal(t, pipeline.EventProtectiveAction, ev.EventType)
			p := ev.Payload.(pipeline.ActionEvent)
			require.Equal(t, pipeline.ActionPhaseWritten, p.Phase)
			require.Equal(t, actionsT0, ev.OccurredAt)
			keys[p.IdempotencyKey] = true
			if p.IdempotencyKey == warn.IdempotencyKey {
				require.Equal(t, warn.Offender, p.Offender, "the offender as its pseudonym")
			} else {
				require.Empty(t, p.Offender)
			}
			require.NotContains(t, string(row.Body), "acct-1", "no raw account id in a lake event")
		}
	}
	require.Equal(t, map[string]bool{warn.IdempotencyKey: true, esc.IdempotencyKey: true, heavy.IdempotencyKey: true}, keys)
}

func actionsSuppressed(t *testing.T, s ActionOutboxStore) {
	ctx := outboxCtx(t)
	first := SampleAction("room-s", "acct-1", "notice", pipeline.ActionWarnCounterpart, pipeline.ModeOn, actionsT0)
	require.True(t, MustSave(t, ctx, s, verdictWith("room-s", actionsT0, first)))
	// The room's next window, ten minutes on: the slot is held.
	at := actionsT0.Add(10 * time.Minute)
	again := SampleAction("room-s", "acct-1", "notice", pipeline.ActionWarnCounterpart, pipeline.ModeOn, at)
	other := SampleAction("room-s", "acct-2", "notice", pipeline.ActionWarnCounterpart, pipeline.ModeOn, at)
	require.True(t, MustSave(t, ctx, s, verdictWith("room-s", at, again, other)))
	require.Equal(t, map[pipeline.OutboxDestination]int{pipeline.OutboxActions: 2, pipeline.OutboxFeedback: 2}, pendingBy(t, s),
		"the held slot's notice has no row, no message, no event; another account's has")
	st := actionState(t, s, "room-s", []string{"acct-1", "acct-2"}, at)
	require.Equal(t, 2, st.RuleToday["notice"])
	require.True(t, st.Suppressed[pipeline.ActionSuppressKey("room-s", "acct-1", "notice")])
	require.True(t, st.Suppressed[pipeline.ActionSuppressKey("room-s", "acct-2", "notice")])
	require.False(t, actionState(t, s, "room-s", []string{"acct-1"}, actionsT0.Add(time.Hour)).Suppressed[pipeline.ActionSuppressKey("room-s", "acct-1", "notice")],
		"the slot ends at its until")
	require.Empty(t, actionState(t, s, "room-other", []string{"acct-1"}, at).Suppressed, "slots are per room")

	// After the slot, a notice is written again.
	later := actionsT0.Add(2 * time.Hour)
	require.True(t, MustSave(t, ctx, s, verdictWith("room-s", later, SampleAction("room-s", "acct-1", "notice", pipeline.ActionWarnCounterpart, pipeline.ModeOn, later))))
	require.Equal(t, 3, pendingBy(t, s)[pipeline.OutboxActions])
}

func actionsRefused(t *testing.T, s ActionOutboxStore) {
	ctx := outboxCtx(t)
	v := verdictWith("room-r", actionsT0)
	require.True(t, MustSave(t, ctx, s, v))
	failed := v
	failed.Status, failed.Label, failed.Error = pipeline.StatusFailed, "", "late failure"
	failed.Actions = []pipeline.ActionRecord{SampleAction("room-r", "acct-1", "heavy", pipeline.ActionRestrictSender, pipeline.ModeOn, actionsT0)}
	require.False(t, MustSave(t, ctx, s, failed), "the done-guard keeps the done verdict")
	require.Empty(t, pendingBy(t, s)[pipeline.OutboxActions], "and writes none of the refused save's actions")

	bad := SampleAction("room-r2", "acct-1", "heavy", pipeline.ActionRestrictSender, pipeline.ModeOn, actionsT0)
	bad.Custom.Until = nil
	_, err := s.Save(ctx, verdictWith("room-r2", actionsT0, bad))
	var perm *pipeline.PermanentError
	require.True(t, errors.As(err, &perm), "an action the writer refuses is permanent: %v", err)
	_, err = s.Get(ctx, verdictWith("room-r2", actionsT0).Key)
	require.ErrorIs(t, err, pipeline.ErrVerdictNotFound, "nothing of that save is written")
	require.Empty(t, pendingBy(t, s))
	require.Empty(t, actionState(t, s, "room-r2", []string{"acct-1"}, actionsT0).RuleToday)
}

func actionsCounts(t *testing.T, s ActionOutboxStore) {
	ctx := outboxCtx(t)
	// 23:00 the day before actionsT0's day, and 05:00 on it.
	evening := actionsT0.Truncate(24 * time.Hour).Add(-time.Hour)
	for i, at := range []time.Time{evening, actionsT0} {
		room := []string{"room-c1", "room-c2"}[i]
		heavy := SampleAction(room, "acct-1", "heavy", pipeline.ActionHoldTransaction, pipeline.ModeDryRun, at)
		require.True(t, MustSave(t, ctx, s, verdictWith(room, at, heavy)))
	}
	st := actionState(t, s, "room-c2", []string{"acct-1", "acct-2"}, actionsT0.Add(time.Minute))
	require.Equal(t, map[string]int{"heavy": 1}, st.RuleToday, "the rule's count starts at the UTC day")
	require.Equal(t, map[string]int{"acct-1": 2}, st.HeavyToday, "heavy actions of the last 24 hours, dry run included")
	st = actionState(t, s, "room-c2", []string{"acct-1"}, evening.Add(24*time.Hour+time.Minute))
	require.Equal(t, map[string]int{"acct-1": 1}, st.HeavyToday, "the evening's is over 24 hours old")
	st, err := s.ActionState(ctx, pipeline.ActionStateQuery{RoomID: "room-c2", Now: actionsT0.Add(time.Minute)})
	require.NoError(t, err)
	require.Empty(t, st.RuleToday, "no rules asked, none counted")
	require.Empty(t, st.HeavyToday)
}

func actionsCleared(t *testing.T, s ActionOutboxStore) {
	ctx := outboxCtx(t)
	require.NoError(t, s.RecordClearances(ctx, actionsT0, 0, []pipeline.ActionClearance{{Account: "acct-1", Rule: "notice", Until: actionsT0.Add(time.Hour)}}))
	st := actionState(t, s, "room-x", []string{"acct-1", "acct-2"}, actionsT0.Add(time.Minute))
	require.Equal(t, map[string]bool{pipeline.ActionClearedKey("acct-1", "notice"): true}, st.Cleared)
	require.Empty(t, actionState(t, s, "room-x", []string{"acct-1"}, actionsT0.Add(time.Hour)).Cleared, "a clearance ends at its until")
	require.NoError(t, s.RecordClearances(ctx, actionsT0.Add(time.Minute), 7, []pipeline.ActionClearance{{Account: "acct-1", Rule: "notice", Until: actionsT0.Add(3 * time.Hour)}}))
	require.True(t, actionState(t, s, "room-x", []string{"acct-1"}, actionsT0.Add(2*time.Hour)).Cleared[pipeline.ActionClearedKey("acct-1", "notice")],
		"a later clearance replaces the earlier")
}
