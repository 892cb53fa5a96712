package mysql

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

// A verdict keeps its window's message span, which the room page (Get) and
// the queue read back; a verdict from before the columns existed (NULL)
// reads as unknown, never as the zero hour.
func TestMessageSpanRoundTripsAndOldVerdictsAreUnknown(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	ctx := ctxT(t)
	fresh := storetest.SampleVerdict("room-fresh")
	old := storetest.SampleVerdict("room-old")
	for _, v := range []pipeline.Verdict{fresh, old} {
		storetest.MustSave(t, ctx, s, v)
	}
	// What migration 00016 leaves on the rows it found.
	_, err := db.ExecContext(ctx, "UPDATE verdicts SET oldest_message_at = NULL, newest_message_at = NULL WHERE room_id = ?", "room-old")
	require.NoError(t, err)

	got, err := s.Get(ctx, fresh.Key)
	require.NoError(t, err)
	require.Equal(t, fresh.NewestMessageAt.UTC(), got.NewestMessageAt)
	require.Equal(t, fresh.OldestMessageAt.UTC().Truncate(time.Microsecond), got.OldestMessageAt)
	d, ok := got.Freshness()
	require.True(t, ok)
	require.Equal(t, 8*time.Minute-5*time.Second, d) // finished 05:06:02, newest 04:58:07

	got, err = s.Get(ctx, old.Key)
	require.NoError(t, err)
	require.True(t, got.NewestMessageAt.IsZero() && got.OldestMessageAt.IsZero())
	_, ok = got.Freshness()
	require.False(t, ok)

	page, err := s.ListQueue(ctx, moderation.QueueFilter{}, "")
	require.NoError(t, err)
	byRoom := map[string]moderation.QueueItem{}
	for _, it := range page.Items {
		byRoom[it.Key.RoomID] = it
	}
	require.Len(t, byRoom, 2)
	require.Equal(t, fresh.NewestMessageAt.UTC(), byRoom["room-fresh"].NewestMessageAt)
	require.True(t, byRoom["room-old"].NewestMessageAt.IsZero())
}
