package moderationtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// RunVerdictsConformance checks moderation.Verdicts: a saved verdict is
// found by its key (whatever its times' zone and sub-microsecond part)
// and read back by id in UTC at microsecond precision; an id is stable
// across saves of its key and distinct across keys; a done verdict is not
// replaced by a non-done one (nothing committed); an unknown id or key
// wraps pipeline.ErrVerdictNotFound; Ping answers, and fails once ctx has
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
		committed, err := s.Save(ctx, v)
		require.NoError(t, err)
		require.True(t, committed)
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
		other := Verdict("room-v-2")
		otherID := Seed(t, s, other)
		require.NotEqual(t, id, otherID)
		v.Severity = 5
		committed, err = s.Save(ctx, v)
		require.NoError(t, err)
		require.True(t, committed)
		require.Equal(t, id, Seed(t, s, v), "a save of the same key keeps its id")
		failed := v
		failed.Status, failed.Label, failed.Category, failed.Error = pipeline.StatusFailed, "", "", "boom"
		committed, err = s.Save(ctx, failed)
		require.NoError(t, err)
		require.False(t, committed, "a done verdict is not replaced by a failed one")
		got, err = s.VerdictByID(ctx, id)
		require.NoError(t, err)
		require.Equal(t, pipeline.StatusDone, got.Status)
		require.Equal(t, 5, got.Severity)
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
