package moderationtest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// ControlStore is what the action-control suites run on: one action by
// its key, an overturn's reversal of a verdict's actions and the room's
// list of actions to read them back.
type ControlStore interface {
	moderation.ActionControl
	moderation.ProtectiveActions
	moderation.ActionHistory
}

// ControlHarness is a ControlStore with what the suites observe beside
// the ports: how to seed an action as a verdict's save writes it (with
// its queue message when `on`), whether an action's queue message is
// owed and unsent, and whether an account is cleared under a rule at a
// time.
type ControlHarness struct {
	Store   ControlStore
	Seed    func(pipeline.ActionRecord) error
	Pending func(key string) (bool, error)
	Cleared func(account, rule string, at time.Time) (bool, error)
}

// RetractionsHarness is what the policy-retractions suite runs on.
type RetractionsHarness struct {
	Store moderation.PolicyRetractions
	Seed  func(pipeline.ActionRecord) error
}

// RunActionControlConformance holds an implementation of
// moderation.ActionControl (with the ProtectiveActions it shares its
// rows with) to the ports' contract.
func RunActionControlConformance(t *testing.T, newHarness func(t *testing.T) ControlHarness) {
	t.Run("ReverseByKey", func(t *testing.T) { t.Parallel(); reverseByKeyCase(t, newHarness(t)) })
	t.Run("ReversePolicyAndDryRun", func(t *testing.T) { t.Parallel(); reversePolicyCase(t, newHarness(t)) })
	t.Run("NotFound", func(t *testing.T) { t.Parallel(); controlNotFoundCase(t, newHarness(t)) })
	t.Run("Confirm", func(t *testing.T) { t.Parallel(); confirmCase(t, newHarness(t)) })
	t.Run("UndoneOverturnLeavesKeyReversal", func(t *testing.T) { t.Parallel(); undoOverturnCase(t, newHarness(t)) })
}

func seedAll(t *testing.T, h func(pipeline.ActionRecord) error, rs ...pipeline.ActionRecord) {
	t.Helper()
	for _, r := range rs {
		require.NoError(t, h(r))
	}
}

// roomAction returns the room's row with key.
func roomAction(t *testing.T, s moderation.ActionHistory, room, key string) moderation.RoomAction {
	t.Helper()
	rows, err := s.RoomActions(testCtx(t), room, 100)
	require.NoError(t, err)
	for _, a := range rows {
		if a.Key == key {
			return a
		}
	}
	require.Failf(t, "no such action", "%s in %s", key, room)
	return moderation.RoomAction{}
}

func pending(t *testing.T, h ControlHarness, key string) bool {
	t.Helper()
	p, err := h.Pending(key)
	require.NoError(t, err)
	return p
}

func cleared(t *testing.T, h ControlHarness, account, rule string, at time.Time) bool {
	t.Helper()
	c, err := h.Cleared(account, rule, at)
	require.NoError(t, err)
	return c
}

// reverseByKeyCase: a moderator's reversal of an `on` notice marks it,
// writes its reversal with its message, cancels the notice's unsent
// message, clears the account for the rule; a second call is a no-op.
func reverseByKeyCase(t *testing.T, h ControlHarness) {
	ctx := testCtx(t)
	room := "room-ctl-1"
	warn := SeedAction(room, "acct-c1", "rule_notice", pipeline.ActionWarnCounterpart, pipeline.ModeOn, protectT0)
	seedAll(t, h.Seed, warn)
	require.True(t, pending(t, h, warn.IdempotencyKey), "an `on` action's message is owed")
	at := protectT0.Add(time.Hour)
	got, err := h.Store.ReverseAction(ctx, moderation.KeyReversal{RoomID: room, Key: warn.IdempotencyKey, At: at, ExpiresAt: at.Add(2 * time.Hour),
		ClearedUntil: at.Add(24 * time.Hour), Source: pipeline.ActionSourceModerator})
	require.NoError(t, err)
	require.True(t, got.Reversed)
	require.NotNil(t, got.Reversal)
	rev := *got.Reversal
	require.NoError(t, rev.Validate())
	require.Equal(t, pipeline.ReversalActionKey(warn.IdempotencyKey, 1), rev.IdempotencyKey)
	require.Equal(t, pipeline.ActionRetractNotice, rev.Action.ID)
	require.Equal(t, warn.IdempotencyKey, rev.Reverses)
	require.Equal(t, pipeline.ActionSourceModerator, rev.Source)
	require.Equal(t, pipeline.ModeOn, rev.Mode)
	require.Equal(t, at, rev.IssuedAt)
	require.Equal(t, at.Add(2*time.Hour), rev.ExpiresAt)
	require.Equal(t, "acct-c1", rev.Creator.ID)

	require.Equal(t, moderation.ActionReversed, roomAction(t, h.Store, room, warn.IdempotencyKey).State)
	row := roomAction(t, h.Store, room, rev.IdempotencyKey)
	require.Equal(t, warn.IdempotencyKey, row.Reverses)
	require.Equal(t, pipeline.ActionSourceModerator, row.Source)
	require.False(t, pending(t, h, warn.IdempotencyKey), "the unsent notice never leaves after its reversal")
	require.True(t, pending(t, h, rev.IdempotencyKey), "the reversal's message is owed")
	require.True(t, cleared(t, h, "acct-c1", "rule_notice", at.Add(time.Hour)), "cleared as asked")
	require.False(t, cleared(t, h, "acct-c1", "rule_notice", at.Add(25*time.Hour)), "until ClearedUntil")

	again, err := h.Store.ReverseAction(ctx, moderation.KeyReversal{RoomID: room, Key: warn.IdempotencyKey, At: at.Add(time.Minute),
		ExpiresAt: at.Add(3 * time.Hour), Source: pipeline.ActionSourceModerator})
	require.NoError(t, err)
	require.Equal(t, moderation.KeyReversed{}, again, "a second call is a no-op")
	rows, err := h.Store.RoomActions(ctx, room, 100)
	require.NoError(t, err)
	require.Len(t, rows, 2, "no second reversal")
}

// reversePolicyCase: a policy's retraction records no cleared state and
// names its source; a dry-run action is only marked.
func reversePolicyCase(t *testing.T, h ControlHarness) {
	ctx := testCtx(t)
	room := "room-ctl-2"
	hold := SeedAction(room, "acct-c2", "rule_hold", pipeline.ActionHoldTransaction, pipeline.ModeOn, protectT0)
	dry := SeedAction(room, "acct-c2", "rule_dry", pipeline.ActionRestrictSender, pipeline.ModeDryRun, protectT0.Add(time.Second))
	seedAll(t, h.Seed, hold, dry)
	require.False(t, pending(t, h, dry.IdempotencyKey), "a dry run owes no message")
	at := protectT0.Add(time.Hour)
	got, err := h.Store.ReverseAction(ctx, moderation.KeyReversal{RoomID: room, Key: hold.IdempotencyKey, At: at, ExpiresAt: at.Add(time.Hour),
		Source: pipeline.ActionSourcePolicy})
	require.NoError(t, err)
	require.True(t, got.Reversed)
	require.NotNil(t, got.Reversal)
	require.Equal(t, pipeline.ActionReleaseTransaction, got.Reversal.Action.ID)
	require.Equal(t, pipeline.ActionSourcePolicy, got.Reversal.Source)
	require.Equal(t, pipeline.ActionSourcePolicy, roomAction(t, h.Store, room, got.Reversal.IdempotencyKey).Source)
	require.False(t, cleared(t, h, "acct-c2", "rule_hold", at.Add(time.Minute)), "no ClearedUntil, no cleared state")

	got, err = h.Store.ReverseAction(ctx, moderation.KeyReversal{RoomID: room, Key: dry.IdempotencyKey, At: at, ExpiresAt: at.Add(time.Hour),
		Source: pipeline.ActionSourceModerator})
	require.NoError(t, err)
	require.Equal(t, moderation.KeyReversed{Reversed: true}, got, "a dry run is only marked")
	require.Equal(t, moderation.ActionReversed, roomAction(t, h.Store, room, dry.IdempotencyKey).State)
	rows, err := h.Store.RoomActions(ctx, room, 100)
	require.NoError(t, err)
	require.Len(t, rows, 3, "the hold's reversal and no other")
}

// controlNotFoundCase: a key of another room, an unknown key and a
// reversal's key are not found, by both methods, and change nothing.
func controlNotFoundCase(t *testing.T, h ControlHarness) {
	ctx := testCtx(t)
	room := "room-ctl-3"
	warn := SeedAction(room, "acct-c3", "rule_notice", pipeline.ActionWarnSender, pipeline.ModeOn, protectT0)
	seedAll(t, h.Seed, warn)
	at := protectT0.Add(time.Hour)
	rev, err := h.Store.ReverseAction(ctx, moderation.KeyReversal{RoomID: room, Key: warn.IdempotencyKey, At: at, ExpiresAt: at.Add(time.Hour),
		Source: pipeline.ActionSourceModerator})
	require.NoError(t, err)
	require.NotNil(t, rev.Reversal)
	other := SeedAction("room-ctl-3x", "acct-c3", "rule_notice", pipeline.ActionWarnSender, pipeline.ModeOn, protectT0)
	seedAll(t, h.Seed, other)
	for _, k := range []struct{ room, key string }{
		{room, other.IdempotencyKey}, {"room-ctl-3x", warn.IdempotencyKey}, {room, "no-such-key"}, {room, rev.Reversal.IdempotencyKey},
	} {
		_, err := h.Store.ReverseAction(ctx, moderation.KeyReversal{RoomID: k.room, Key: k.key, At: at, ExpiresAt: at.Add(time.Hour),
			Source: pipeline.ActionSourceModerator})
		require.ErrorIs(t, err, moderation.ErrActionNotFound, "reverse %s in %s", k.key, k.room)
		_, err = h.Store.ConfirmAction(ctx, k.room, k.key, "mod-1", at)
		require.ErrorIs(t, err, moderation.ErrActionNotFound, "confirm %s in %s", k.key, k.room)
	}
	require.Equal(t, moderation.ActionWritten, roomAction(t, h.Store, "room-ctl-3x", other.IdempotencyKey).State)
	require.True(t, pending(t, h, other.IdempotencyKey), "another room's action is left alone")
	require.Empty(t, roomAction(t, h.Store, "room-ctl-3x", other.IdempotencyKey).ConfirmedBy)
}

// confirmCase: a confirmation is recorded once; the first one stays.
func confirmCase(t *testing.T, h ControlHarness) {
	ctx := testCtx(t)
	room := "room-ctl-4"
	esc := SeedAction(room, "", "rule_notice", pipeline.ActionEscalate, pipeline.ModeOn, protectT0)
	seedAll(t, h.Seed, esc)
	require.True(t, roomAction(t, h.Store, room, esc.IdempotencyKey).Confirmable())
	at := protectT0.Add(time.Hour)
	ok, err := h.Store.ConfirmAction(ctx, room, esc.IdempotencyKey, "mod-1", at)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = h.Store.ConfirmAction(ctx, room, esc.IdempotencyKey, "mod-2", at.Add(time.Minute))
	require.NoError(t, err)
	require.False(t, ok, "confirmed already")
	row := roomAction(t, h.Store, room, esc.IdempotencyKey)
	require.Equal(t, "mod-1", row.ConfirmedBy, "the first confirmation stays")
	require.Equal(t, at, row.ConfirmedAt)
	require.False(t, row.Confirmable())
	_, err = h.Store.ConfirmAction(ctx, room, esc.IdempotencyKey, "", at)
	requirePermanent(t, err)
}

// undoOverturnCase: an action a moderator reversed by its key is not
// re-applied when a later overturn of its verdict is undone; what the
// overturn reversed is, and its cleared state is deleted.
func undoOverturnCase(t *testing.T, h ControlHarness) {
	ctx := testCtx(t)
	room := "room-ctl-5"
	hold := SeedAction(room, "acct-c5", "rule_heavy", pipeline.ActionHoldTransaction, pipeline.ModeOn, protectT0)
	restrict := SeedAction(room, "acct-c5", "rule_heavy", pipeline.ActionRestrictSender, pipeline.ModeOn, protectT0)
	require.Equal(t, hold.Key, restrict.Key, "one verdict")
	seedAll(t, h.Seed, hold, restrict)
	at := protectT0.Add(time.Hour)
	byKey, err := h.Store.ReverseAction(ctx, moderation.KeyReversal{RoomID: room, Key: hold.IdempotencyKey, At: at, ExpiresAt: at.Add(time.Hour),
		Source: pipeline.ActionSourceModerator})
	require.NoError(t, err)
	require.True(t, byKey.Reversed)

	r := moderation.Reversal{Key: hold.Key, DecisionID: 41, At: at.Add(time.Minute), ClearedUntil: at.Add(720 * time.Hour), ExpiresAt: at.Add(2 * time.Hour)}
	revs, err := h.Store.ReverseActions(ctx, r)
	require.NoError(t, err)
	require.Len(t, revs, 1, "the hold is reversed already")
	require.Equal(t, pipeline.ActionLiftRestriction, revs[0].Action.ID)
	first := revs[0].IdempotencyKey
	require.True(t, cleared(t, h, "acct-c5", "rule_heavy", r.At.Add(time.Hour)), "the overturn clears")
	none, err := h.Store.ReverseActions(ctx, r)
	require.NoError(t, err)
	require.Empty(t, none, "a second overturn call is a no-op")

	for _, other := range []uint64{0, 42} {
		nothing, err := h.Store.ReapplyActions(ctx, moderation.Reversal{Key: hold.Key, DecisionID: other, At: r.At})
		require.NoError(t, err)
		require.Empty(t, nothing, "decision %d reversed nothing", other)
	}
	require.Equal(t, moderation.ActionReversed, roomAction(t, h.Store, room, hold.IdempotencyKey).State)
	require.True(t, cleared(t, h, "acct-c5", "rule_heavy", r.At.Add(time.Hour)), "another decision's undo keeps the cleared state")

	r.At = r.At.Add(time.Minute)
	re, err := h.Store.ReapplyActions(ctx, r)
	require.NoError(t, err)
	require.Len(t, re, 1, "only what the overturn reversed")
	require.Equal(t, pipeline.ActionRestrictSender, re[0].Action.ID)
	require.Equal(t, pipeline.ReapplyActionKey(restrict.IdempotencyKey, 1), re[0].IdempotencyKey)
	require.Equal(t, restrict.IdempotencyKey, re[0].Reverses)
	require.Equal(t, r.At, re[0].IssuedAt)
	require.Equal(t, r.At.Add(time.Hour), re[0].ExpiresAt, "the original's time to live")
	require.Equal(t, r.At.Add(24*time.Hour), *re[0].Custom.Until, "the restriction's length, from the undo")
	require.True(t, pending(t, h, re[0].IdempotencyKey), "the re-application's message is owed")
	require.Equal(t, moderation.ActionReversed, roomAction(t, h.Store, room, hold.IdempotencyKey).State, "the hold stays reversed")
	require.Equal(t, moderation.ActionWritten, roomAction(t, h.Store, room, restrict.IdempotencyKey).State)
	require.False(t, cleared(t, h, "acct-c5", "rule_heavy", r.At.Add(time.Hour)), "the overturn's cleared state is gone")
	again, err := h.Store.ReapplyActions(ctx, r)
	require.NoError(t, err)
	require.Empty(t, again, "a second undo is a no-op")

	r.DecisionID, r.At = 43, r.At.Add(time.Minute)
	revs, err = h.Store.ReverseActions(ctx, r)
	require.NoError(t, err)
	require.Len(t, revs, 1, "a second overturn reverses again")
	require.Equal(t, restrict.IdempotencyKey, revs[0].Reverses)
	require.NotEqual(t, first, revs[0].IdempotencyKey, "under a key of its own")
	require.True(t, pending(t, h, revs[0].IdempotencyKey), "with its message")
}

// RunPolicyRetractionsConformance holds an implementation of
// moderation.PolicyRetractions to its contract (the ActionControl and
// ActionLog it embeds have suites of their own).
func RunPolicyRetractionsConformance(t *testing.T, newHarness func(t *testing.T) RetractionsHarness) {
	t.Run("Applied", func(t *testing.T) { t.Parallel(); policyAppliedCase(t, newHarness(t)) })
	t.Run("LiveActions", func(t *testing.T) { t.Parallel(); liveActionsCase(t, newHarness(t)) })
}

func policyAppliedCase(t *testing.T, h RetractionsHarness) {
	ctx := testCtx(t)
	applied, err := h.Store.PolicyApplied(ctx, "hash-a")
	require.NoError(t, err)
	require.False(t, applied)
	require.NoError(t, h.Store.RecordPolicyApplied(ctx, "hash-a", "v1", protectT0, 3))
	applied, err = h.Store.PolicyApplied(ctx, "hash-a")
	require.NoError(t, err)
	require.True(t, applied)
	require.NoError(t, h.Store.RecordPolicyApplied(ctx, "hash-a", "v1", protectT0.Add(time.Hour), 0), "recorded twice: the first stays")
	applied, err = h.Store.PolicyApplied(ctx, "hash-a")
	require.NoError(t, err)
	require.True(t, applied)
	applied, err = h.Store.PolicyApplied(ctx, "hash-b")
	require.NoError(t, err)
	require.False(t, applied, "another hash")
}

// liveActionsCase: forward `on` actions with an undo, not reversed,
// after since, oldest first, without the kept (rule, action) pairs, at
// most limit.
func liveActionsCase(t *testing.T, h RetractionsHarness) {
	ctx := testCtx(t)
	now := protectT0.Add(48 * time.Hour)
	old := SeedAction("room-live-1", "acct-l1", "heavy", pipeline.ActionRestrictSender, pipeline.ModeOn, now.Add(-30*time.Hour))
	first := SeedAction("room-live-2", "acct-l2", "heavy", pipeline.ActionHoldTransaction, pipeline.ModeOn, now.Add(-3*time.Hour))
	second := SeedAction("room-live-3", "acct-l3", "notice", pipeline.ActionWarnSender, pipeline.ModeOn, now.Add(-2*time.Hour))
	kept := SeedAction("room-live-4", "acct-l4", "notice", pipeline.ActionWarnCounterpart, pipeline.ModeOn, now.Add(-2*time.Hour))
	dry := SeedAction("room-live-5", "acct-l5", "heavy", pipeline.ActionRestrictSender, pipeline.ModeDryRun, now.Add(-2*time.Hour))
	esc := SeedAction("room-live-6", "", "heavy", pipeline.ActionEscalate, pipeline.ModeOn, now.Add(-2*time.Hour))
	gone := SeedAction("room-live-7", "acct-l7", "heavy", pipeline.ActionRestrictSender, pipeline.ModeOn, now.Add(-time.Hour))
	seedAll(t, h.Seed, old, first, second, kept, dry, esc, gone)
	_, err := h.Store.ReverseAction(ctx, moderation.KeyReversal{RoomID: "room-live-7", Key: gone.IdempotencyKey, At: now.Add(-time.Minute),
		ExpiresAt: now.Add(time.Hour), Source: pipeline.ActionSourceModerator})
	require.NoError(t, err)

	keep := []moderation.RuleAction{{Rule: "notice", Action: pipeline.ActionWarnCounterpart}}
	live, err := h.Store.LiveActions(ctx, now.Add(-24*time.Hour), keep, 10)
	require.NoError(t, err)
	require.Equal(t, []string{first.IdempotencyKey, second.IdempotencyKey}, keysOf(live),
		"not past since, kept, dry run, without undo, reversed or a reversal")
	a := live[1]
	require.Equal(t, "room-live-3", a.Verdict.RoomID)
	require.Equal(t, "notice", a.Rule)
	require.Equal(t, pipeline.ActionWarnSender, a.Action)
	require.Equal(t, "acct-l3", a.Account)
	require.Equal(t, pipeline.ModeOn, a.Mode)
	require.Equal(t, moderation.ActionWritten, a.State)

	live, err = h.Store.LiveActions(ctx, now.Add(-24*time.Hour), keep, 1)
	require.NoError(t, err)
	require.Equal(t, []string{first.IdempotencyKey}, keysOf(live), "at most limit, oldest first")
	live, err = h.Store.LiveActions(ctx, now.Add(-48*time.Hour), nil, 10)
	require.NoError(t, err)
	require.Equal(t, []string{old.IdempotencyKey, first.IdempotencyKey, second.IdempotencyKey, kept.IdempotencyKey}, keysOf(live),
		"nothing kept, a longer lookback")
}

// RevisedStore is what the revised-actions suite runs on: an on-demand
// review's save and the room's list of actions.
type RevisedStore interface {
	moderation.Verdicts
	moderation.ActionHistory
}

// RunRevisedActionsConformance holds Verdicts.Revise to writing a
// revision's actions (the planner's), each rebound to the revision it
// numbers, so that two revisions never share an action's key; an action
// that is not valid is a permanent error.
func RunRevisedActionsConformance(t *testing.T, newStore func(t *testing.T) RevisedStore) {
	s, ctx := newStore(t), testCtx(t)
	room := "room-revised"
	v := Verdict(room)
	a := SeedAction(room, "acct-r1", "rule_notice", pipeline.ActionWarnSender, pipeline.ModeOn, v.FinishedAt)
	a.Key = v.Key
	a.IdempotencyKey = pipeline.ForwardActionKey(v.Key, 1, "rule_notice", pipeline.ActionWarnSender, "acct-r1")
	v.Actions = []pipeline.ActionRecord{a}
	for want := 1; want <= 2; want++ {
		rev, committed, err := s.Revise(ctx, v)
		require.NoError(t, err)
		require.True(t, committed)
		require.Equal(t, want, rev)
	}
	rows, err := s.RoomActions(ctx, room, 10)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{a.IdempotencyKey, a.AtRevision(2).IdempotencyKey}, keysOf(rows), "one action per revision")
	for _, r := range rows {
		want := 2
		if r.Key == a.IdempotencyKey {
			want = 1
		}
		require.Equal(t, want, r.VerdictRevision, "%s's revision", r.Key)
		require.Equal(t, moderation.ActionWritten, r.State)
	}
	bad := v
	bad.Key.RoomID = room + "-bad"
	bad.Actions = []pipeline.ActionRecord{{ProtectiveAction: pipeline.ProtectiveAction{SchemaVersion: 1}}}
	_, _, err = s.Revise(ctx, bad)
	requirePermanent(t, err)
	_, err = s.VerdictID(ctx, bad.Key)
	require.ErrorIs(t, err, pipeline.ErrVerdictNotFound, "nothing written")
}
