package console

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

func TestFreshnessReadsAtAGlance(t *testing.T) {
	t.Parallel()
	done := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		sent, done time.Time
		want       string
	}{
		{time.Time{}, done, "unknown"},
		{done, time.Time{}, "unknown"},
		{done.Add(time.Minute), done, "0 s"}, // a producer clock ahead reads as fresh, never negative
		{done.Add(-42*time.Second - 900*time.Millisecond), done, "42 s"},
		{done.Add(-2*time.Minute - 5*time.Second), done, "2 min 5 s"},
		{done.Add(-3*time.Hour - 12*time.Minute), done, "3 h 12 min"},
	} {
		require.Equal(t, tc.want, freshness(tc.sent, tc.done), "sent %v", tc.sent)
	}
}

// The room page and the queue show each verdict's freshness from the
// stored span (real MariaDB); a verdict saved without one says unknown.
func TestRoomPageAndQueueShowFreshness(t *testing.T) {
	e := newTakeEnv(t)
	ctx := testCtx(t)
	ws := window.Add(2 * time.Hour)
	v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: "room-rt", WindowStart: ws, WindowEnd: ws.Add(4 * time.Minute), PipelineVersion: "v1"},
		RunID: pipeline.RealtimeRunID(ws.Add(4 * time.Minute)), Status: pipeline.StatusDone, Label: pipeline.LabelAbusive,
		Category: pipeline.CategoryExternalPayment, Severity: 5, Action: pipeline.ActionWarn, Attempts: 1,
		PublishedAt: ws.Add(4 * time.Minute), StartedAt: ws.Add(4 * time.Minute), FinishedAt: ws.Add(5*time.Minute + 10*time.Second),
		OldestMessageAt: ws.Add(15 * time.Second), NewestMessageAt: ws.Add(3*time.Minute + 5*time.Second)}
	storetest.MustSave(t, ctx, e.db, v)
	id, err := e.db.VerdictID(ctx, v.Key)
	require.NoError(t, err)

	m := e.signIn(t, "alice@example.com")
	page := m.get(t, "/verdicts/"+strconv.FormatUint(id, 10))
	require.Contains(t, page, `fresh 2 min 5 s</span>`)
	require.Contains(t, page, `(oldest message waited 4 min 55 s)`)
	old := m.get(t, "/verdicts/"+strconv.FormatUint(e.ids[0], 10))
	require.Contains(t, old, `fresh unknown</span>`)
	require.NotContains(t, old, "oldest message waited")

	queue := m.get(t, "/queue")
	require.Contains(t, queue, `<td class="fresh">2 min 5 s</td>`)
	require.Contains(t, queue, `<td class="fresh">unknown</td>`)
}
