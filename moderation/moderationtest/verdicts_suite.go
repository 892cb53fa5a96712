package moderationtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// RunVerdictsConformance checks moderation.Verdicts: a revised verdict is
// found by its key (whatever its times' zone and sub-microsecond part)
// and read back by id in UTC at microsecond precision; a later revision of
// the key gets an id of its own and becomes the key's current one, while
// the earlier one stays readable by its id, unchanged and superseded; a
// done revision is not replaced by a non-done one (nothing committed);
// ids are distinct across keys; an unknown id or key wraps
// pipeline.ErrVerdictNotFound; Ping answers, and fails once ctx has
// ended. newStore returns a store over empty, isolated storage.
func RunVerdictsConformance(t *testing.T, newStore func(t *testing.T) moderation.Verdicts) {
	t.Helper()
	t.Run("ids and round trip", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), testCtx(t)
		seoul := time.FixedZone("KST", 9*60*60)
		v := Verdict("room-v-1")
		v.Key.WindowStart, v.Key.WindowEnd = T0.Add(1500*time.Nanosecond).In(seoul), T0.Add(time.Hour).In(seoul)
		v.FinishedAt, v.NewestMessageAt = T0.Add(time.Hour+2500*time.Nanosecond).In(seoul), T0.Add(50*time.Minute).In(seoul)
		rev, committed, err := s.Revise(ctx, v)
		require.NoError(t, err)
		require.True(t, committed)
		require.Equal(t, 1, rev, "a new key's first revision")
		id, err := s.VerdictID(ctx, v.Key)
		require.NoError(t, err)
		require.NotZero(t, id)
		got, err := s.VerdictByID(ctx, id)
		require.NoError(t, err)
		want := pipeline.ReviewKey{RoomID: "room-v-1", WindowStart: T0.Add(time.Microsecond), WindowEnd: T0.Add(time.Hour), PipelineVersion: "v1-conf"}
		require.Equal(t, want, got.Key, "UTC, microseconds")
		require.Equal(t, T0.Add(time.Hour+2*time.Microsecond), got.FinishedAt)
		require.Equal(t, T0.Add(50*time.Minute), got.NewestMessageAt)
		require.Equal(t, []any{v.RunID, v.Status, v.Label, v.Category, v.Severity, v.Action},
			[]any{got.RunID, got.Status, got.Label, got.Category, got.Severity, got.Action})
		again, err := s.VerdictID(ctx, want)
		require.NoError(t, err)
		require.Equal(t, id, again, "the stored key finds the same id")
		otherID := Seed(t, s, Verdict("room-v-2"))
		require.NotEqual(t, id, otherID)
		checkRevisions(t, s, v, id)
	})
	t.Run("not found and ping", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), testCtx(t)
		_, err := s.VerdictByID(ctx, 987654321)
		require.ErrorIs(t, err, pipeline.ErrVerdictNotFound)
		_, err = s.VerdictID(ctx, Verdict("room-v-none").Key)
		require.ErrorIs(t, err, pipeline.ErrVerdictNotFound)
		require.NoError(t, s.Ping(ctx))
		ended, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, s.Ping(ended), context.Canceled)
	})
}

// checkRevisions revises v (stored as row first) twice: a done re-review
// becomes the current revision under an id of its own, first stays as it
// was and is marked superseded; a failed one is not committed.
func checkRevisions(t *testing.T, s moderation.Verdicts, v pipeline.Verdict, first uint64) {
	t.Helper()
	ctx := testCtx(t)
	v.Severity = 5
	rev, committed, err := s.Revise(ctx, v)
	require.NoError(t, err)
	require.True(t, committed)
	require.Equal(t, 2, rev)
	second, err := s.VerdictID(ctx, v.Key)
	require.NoError(t, err)
	require.NotEqual(t, first, second, "a new revision is a row of its own")
	old, err := s.VerdictByID(ctx, first)
	require.NoError(t, err)
	require.Equal(t, 4, old.Severity, "the first revision is kept as it was")
	require.False(t, old.SupersededAt.IsZero(), "and marked superseded")
	failed := v
	failed.Status, failed.Label, failed.Category, failed.Error = pipeline.StatusFailed, "", "", "boom"
	_, committed, err = s.Revise(ctx, failed)
	require.NoError(t, err)
	require.False(t, committed, "a done revision is not replaced by a failed one")
	cur, err := s.VerdictID(ctx, v.Key)
	require.NoError(t, err)
	require.Equal(t, second, cur)
	got, err := s.VerdictByID(ctx, cur)
	require.NoError(t, err)
	require.Equal(t, pipeline.StatusDone, got.Status)
	require.Equal(t, 5, got.Severity)
}
