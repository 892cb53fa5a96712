package moderationtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// QueueStore is what the queue suite runs on: the port, and verdicts,
// decisions and takes to list.
type QueueStore interface {
	moderation.Verdicts
	moderation.Queue
	moderation.Decisions
	moderation.Takes
}

// queued is a done verdict of room with label, severity and category,
// its window starting at T0 plus at, finished at T0 plus finished.
func queued(room string, label pipeline.Label, severity int, cat pipeline.Category, at, finished time.Duration) pipeline.Verdict {
	v := Verdict(room)
	v.Label, v.Severity, v.Category = label, severity, cat
	if label == pipeline.LabelClean {
		v.Category, v.Action = "", pipeline.ActionNone
	}
	v.Key.WindowStart, v.Key.WindowEnd = T0.Add(at), T0.Add(at+time.Hour)
	v.FinishedAt = T0.Add(finished)
	return v
}

// decide confirms verdict id (as it is labelled) as mod-x at T0 and
// returns the decision's id.
func decide(t *testing.T, s interface {
	moderation.Verdicts
	moderation.Decisions
}, id uint64) uint64 {
	t.Helper()
	v, err := s.VerdictByID(testCtx(t), id)
	require.NoError(t, err)
	did, err := s.AddDecision(testCtx(t), moderation.Decision{VerdictID: id, Moderator: "mod-x", Decision: moderation.DecisionConfirm,
		Label: v.Label, Category: v.Category, DecidedAt: T0})
	require.NoError(t, err)
	return did
}

func ids(items []moderation.QueueItem) []uint64 {
	out := make([]uint64, 0, len(items))
	for _, it := range items {
		out = append(out, it.ID)
	}
	return out
}

// RunQueueConformance checks moderation.Queue: the queue's order (label
// in the filter's order, severity descending, newest window, id
// descending), keyset pages that rows saved meanwhile neither repeat nor
// shift, every filter, decided verdicts left out unless asked for (and
// then marked), takes shown, bad filters and cursors refused, the open
// queue's counts, and the audit sample (undecided done clean verdicts
// under the share, in bucket order). newStore returns a store over empty,
// isolated storage.
func RunQueueConformance(t *testing.T, newStore func(t *testing.T) QueueStore) {
	t.Helper()
	t.Run("order and pages", func(t *testing.T) { t.Parallel(); runQueuePages(t, newStore(t)) })
	t.Run("filters", func(t *testing.T) { t.Parallel(); runQueueFilters(t, newStore(t)) })
	t.Run("decided and taken", func(t *testing.T) { t.Parallel(); runQueueDecided(t, newStore(t)) })
	t.Run("bad filter and cursor", func(t *testing.T) { t.Parallel(); runQueueBad(t, newStore(t)) })
	t.Run("counts", func(t *testing.T) { t.Parallel(); runQueueCounts(t, newStore(t)) })
	t.Run("audit sample", func(t *testing.T) { t.Parallel(); runQueueAudit(t, newStore(t)) })
	t.Run("current revisions only", func(t *testing.T) { t.Parallel(); runQueueRevisions(t, newStore(t)) })
}

// runQueueRevisions: a re-reviewed window is listed and counted once, as
// its current revision.
func runQueueRevisions(t *testing.T, s QueueStore) {
	ctx := testCtx(t)
	v := queued("room-q-rev", pipeline.LabelAbusive, 3, pipeline.CategoryExternalPayment, 0, time.Hour)
	first := Seed(t, s, v)
	v.Severity = 5
	second := Seed(t, s, v)
	require.NotEqual(t, first, second)
	page, err := s.ListQueue(ctx, moderation.QueueFilter{IncludeDecided: true}, "")
	require.NoError(t, err)
	require.Equal(t, []uint64{second}, ids(page.Items), "the superseded revision is not listed")
	require.Equal(t, 5, page.Items[0].Severity)
	counts, err := s.CountQueue(ctx, T0.Add(2*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, counts.Total(), "nor counted")
}

func runQueuePages(t *testing.T, s QueueStore) {
	ctx, cat := testCtx(t), pipeline.CategoryExternalPayment
	susp := Seed(t, s, queued("room-q-susp", pipeline.LabelSuspicious, 5, cat, 0, time.Hour))
	low := Seed(t, s, queued("room-q-low", pipeline.LabelAbusive, 2, cat, 3*time.Hour, time.Hour))
	oldHigh := Seed(t, s, queued("room-q-old", pipeline.LabelAbusive, 4, cat, 0, time.Hour))
	newHigh := Seed(t, s, queued("room-q-new", pipeline.LabelAbusive, 4, cat, time.Hour, time.Hour))
	sameA := Seed(t, s, queued("room-q-same-a", pipeline.LabelAbusive, 3, cat, 0, time.Hour))
	sameB := Seed(t, s, queued("room-q-same-b", pipeline.LabelAbusive, 3, cat, 0, time.Hour))
	Seed(t, s, queued("room-q-clean", pipeline.LabelClean, 0, "", 0, time.Hour))
	want := []uint64{newHigh, oldHigh, sameB, sameA, low, susp}
	var lateLow uint64
	all, err := s.ListQueue(ctx, moderation.QueueFilter{}, "")
	require.NoError(t, err)
	require.Equal(t, want, ids(all.Items), "label, severity desc, newest window, id desc; clean is not in the default queue")
	require.Empty(t, all.Next, "the last page has no next")
	require.Equal(t, "room-q-new", all.Items[0].Key.RoomID)
	require.Equal(t, pipeline.LabelAbusive, all.Items[0].Label)
	require.Equal(t, T0.Add(time.Hour), all.Items[0].FinishedAt)
	var got []uint64
	cursor := ""
	for range len(want) {
		page, err := s.ListQueue(ctx, moderation.QueueFilter{Limit: 2}, cursor)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Items), 2)
		got = append(got, ids(page.Items)...)
		if cursor == "" {
			// Saved between pages: one before the cursor, one after it.
			Seed(t, s, queued("room-q-late-top", pipeline.LabelAbusive, 5, cat, 0, time.Hour))
			lateLow = Seed(t, s, queued("room-q-late-low", pipeline.LabelAbusive, 1, cat, 0, time.Hour))
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	require.Equal(t, []uint64{newHigh, oldHigh, sameB, sameA, low, lateLow, susp}, got,
		"a row saved before the cursor neither repeats nor shifts a page; one after it shows in its place")
	swapped, err := s.ListQueue(ctx, moderation.QueueFilter{Labels: []pipeline.Label{pipeline.LabelSuspicious, pipeline.LabelClean}}, "")
	require.NoError(t, err)
	require.Len(t, swapped.Items, 2)
	require.Equal(t, susp, swapped.Items[0].ID, "labels in the filter's order")
	require.Equal(t, pipeline.LabelClean, swapped.Items[1].Label)
}

func runQueueFilters(t *testing.T, s QueueStore) {
	ctx := testCtx(t)
	pay, harass := pipeline.CategoryExternalPayment, pipeline.CategoryHarassment
	a := Seed(t, s, queued("room-f-a", pipeline.LabelAbusive, 5, pay, 0, time.Hour))
	b := Seed(t, s, queued("room-f-b", pipeline.LabelAbusive, 2, harass, 2*time.Hour, time.Hour))
	other := queued("room-f-c", pipeline.LabelSuspicious, 3, pay, 4*time.Hour, time.Hour)
	other.RunID = "run-other"
	c := Seed(t, s, other)
	failed := Verdict("room-f-failed")
	failed.Status, failed.Label, failed.Category, failed.Severity, failed.Action, failed.Error = pipeline.StatusFailed, "", "", 0, "", "boom"
	f := Seed(t, s, failed)
	for _, tc := range []struct {
		name string
		f    moderation.QueueFilter
		want []uint64
	}{
		{"category", moderation.QueueFilter{Category: harass}, []uint64{b}},
		{"min severity", moderation.QueueFilter{MinSeverity: 3}, []uint64{a, c}},
		{"from", moderation.QueueFilter{From: T0.Add(time.Hour)}, []uint64{b, c}},
		{"to", moderation.QueueFilter{To: T0.Add(2 * time.Hour)}, []uint64{a}},
		{"from and to", moderation.QueueFilter{From: T0.Add(2 * time.Hour), To: T0.Add(4 * time.Hour)}, []uint64{b}},
		{"run", moderation.QueueFilter{RunID: "run-other"}, []uint64{c}},
		{"status", moderation.QueueFilter{Status: pipeline.StatusFailed}, []uint64{f}},
		{"one label", moderation.QueueFilter{Labels: []pipeline.Label{pipeline.LabelSuspicious}}, []uint64{c}},
	} {
		page, err := s.ListQueue(ctx, tc.f, "")
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, ids(page.Items), tc.name)
	}
}

func runQueueDecided(t *testing.T, s QueueStore) {
	ctx, cat := testCtx(t), pipeline.CategoryExternalPayment
	ov := queued("room-d-open", pipeline.LabelAbusive, 4, cat, 0, time.Hour)
	ov.Stages = []pipeline.StageResult{{Stage: pipeline.StageExtract, Pool: pipeline.PoolPrimary, Model: "m", Attempts: 1,
		Output: []byte(`{"evidence":[{"message_id":"m1","category":"external_payment","quote":"선입금 [전화번호]"},{"message_id":"m2","category":"external_payment","quote":"b"}]}`)}}
	open := Seed(t, s, ov)
	done := Seed(t, s, queued("room-d-done", pipeline.LabelAbusive, 5, cat, 0, time.Hour))
	decide(t, s, done)
	_, err := s.TakeItem(ctx, open, "mod-a", T0.Add(time.Minute), T0, false)
	require.NoError(t, err)
	page, err := s.ListQueue(ctx, moderation.QueueFilter{}, "")
	require.NoError(t, err)
	require.Equal(t, []uint64{open}, ids(page.Items), "a decided verdict leaves the queue")
	require.False(t, page.Items[0].Decided)
	require.Equal(t, "mod-a", page.Items[0].TakenBy)
	require.Equal(t, T0.Add(time.Minute), page.Items[0].TakenActiveAt)
	require.Equal(t, "선입금 [전화번호]", page.Items[0].Snippet, "the first evidence quote, as stored")
	mine, err := s.ListQueue(ctx, moderation.QueueFilter{TakenBy: "mod-a"}, "")
	require.NoError(t, err)
	require.Equal(t, []uint64{open}, ids(mine.Items), "my items")
	mine, err = s.ListQueue(ctx, moderation.QueueFilter{TakenBy: "mod-b", IncludeDecided: true}, "")
	require.NoError(t, err)
	require.Empty(t, mine.Items, "another moderator's items are not mine")
	page, err = s.ListQueue(ctx, moderation.QueueFilter{IncludeDecided: true}, "")
	require.NoError(t, err)
	require.Equal(t, []uint64{done, open}, ids(page.Items))
	require.True(t, page.Items[0].Decided)
	require.False(t, page.Items[1].Decided)
	require.Empty(t, page.Items[0].TakenBy)
	require.True(t, page.Items[0].TakenActiveAt.IsZero())
	// An undone decision returns its item to the queue (and the counts).
	did := decide(t, s, open)
	_, err = s.AddDecision(ctx, moderation.Decision{VerdictID: open, Moderator: "mod-x", Decision: moderation.DecisionUndo, Reverses: did, DecidedAt: T0.Add(time.Second)})
	require.NoError(t, err)
	page, err = s.ListQueue(ctx, moderation.QueueFilter{}, "")
	require.NoError(t, err)
	require.Equal(t, []uint64{open}, ids(page.Items), "an undone decision returns its item")
	counts, err := s.CountQueue(ctx, T0.Add(2*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, counts.Total())
}

func runQueueBad(t *testing.T, s QueueStore) {
	ctx, cat := testCtx(t), pipeline.CategoryExternalPayment
	for i := range 3 {
		Seed(t, s, queued(fmt.Sprintf("room-b-%d", i), pipeline.LabelAbusive, 4, cat, time.Duration(i)*time.Hour, time.Hour))
	}
	for _, bad := range []moderation.QueueFilter{
		{Status: "pending-ish"}, {Labels: []pipeline.Label{"awful"}}, {Labels: []pipeline.Label{pipeline.LabelAbusive, pipeline.LabelAbusive}},
		{Category: "nonsense"}, {MinSeverity: 6}, {From: T0, To: T0}, {Limit: moderation.MaxQueueLimit + 1}, {Limit: -1},
	} {
		_, err := s.ListQueue(ctx, bad, "")
		require.Error(t, err, "%+v", bad)
	}
	_, err := s.ListQueue(ctx, moderation.QueueFilter{Category: "nonsense", MinSeverity: 9}, "")
	require.ErrorContains(t, err, "nonsense")
	require.ErrorContains(t, err, "min severity", "every problem is named")
	page, err := s.ListQueue(ctx, moderation.QueueFilter{Limit: 1}, "")
	require.NoError(t, err)
	require.NotEmpty(t, page.Next)
	next, err := s.ListQueue(ctx, moderation.QueueFilter{Limit: 2}, page.Next)
	require.NoError(t, err, "the page size may change between pages")
	require.Len(t, next.Items, 2)
	for _, c := range []string{"not base64 !", "bm90IGpzb24", page.Next + "x"} {
		_, err = s.ListQueue(ctx, moderation.QueueFilter{Limit: 1}, c)
		require.ErrorIs(t, err, moderation.ErrBadCursor, c)
	}
	_, err = s.ListQueue(ctx, moderation.QueueFilter{Limit: 1, MinSeverity: 2}, page.Next)
	require.ErrorIs(t, err, moderation.ErrBadCursor, "a cursor read with another filter")
}

func runQueueCounts(t *testing.T, s QueueStore) {
	ctx, now := testCtx(t), T0.Add(48*time.Hour)
	pay, harass := pipeline.CategoryExternalPayment, pipeline.CategoryHarassment
	Seed(t, s, queued("room-c-fresh", pipeline.LabelAbusive, 4, pay, 0, 48*time.Hour-time.Minute))
	Seed(t, s, queued("room-c-edge", pipeline.LabelSuspicious, 2, pay, 0, 47*time.Hour+time.Second))
	Seed(t, s, queued("room-c-today", pipeline.LabelAbusive, 4, harass, 0, 30*time.Hour))
	Seed(t, s, queued("room-c-old", pipeline.LabelAbusive, 4, harass, 0, 24*time.Hour-time.Second))
	Seed(t, s, queued("room-c-clean", pipeline.LabelClean, 0, "", 0, 48*time.Hour-time.Minute))
	decide(t, s, Seed(t, s, queued("room-c-decided", pipeline.LabelAbusive, 4, pay, 0, 48*time.Hour-time.Minute)))
	got, err := s.CountQueue(ctx, now)
	require.NoError(t, err)
	require.Equal(t, map[pipeline.Category]int{pay: 2, harass: 2}, got.ByCategory, "decided and clean verdicts are not open")
	require.Equal(t, 2, got.Under1h)
	require.Equal(t, 1, got.Under24h)
	require.Equal(t, 1, got.Older)
	require.Equal(t, 4, got.Total())
}

func runQueueAudit(t *testing.T, s QueueStore) {
	ctx := testCtx(t)
	var clean []pipeline.Verdict
	for i := range 12 {
		clean = append(clean, queued(fmt.Sprintf("room-a-%d", i), pipeline.LabelClean, 0, "", time.Duration(i)*time.Minute, time.Hour))
	}
	var want []uint64
	byBucket := map[uint64]int{}
	for i, v := range clean {
		id := Seed(t, s, v)
		byBucket[id] = moderation.AuditBucket(v.Key)
		if i == 0 {
			decide(t, s, id)
			continue
		}
		want = append(want, id)
	}
	Seed(t, s, queued("room-a-flagged", pipeline.LabelAbusive, 4, pipeline.CategoryExternalPayment, 0, time.Hour))
	got, err := s.ListAudit(ctx, 1, 100)
	require.NoError(t, err)
	require.ElementsMatch(t, want, ids(got), "every undecided done clean verdict at share 1")
	for i, it := range got {
		require.True(t, it.Audit)
		require.Equal(t, pipeline.LabelClean, it.Label)
		if i > 0 {
			require.LessOrEqual(t, byBucket[got[i-1].ID], byBucket[it.ID], "bucket order")
		}
	}
	again, err := s.ListAudit(ctx, 1, 3)
	require.NoError(t, err)
	require.Equal(t, ids(got[:3]), ids(again), "stable between reads; limit holds")
	share := 0.5
	half, err := s.ListAudit(ctx, share, 100)
	require.NoError(t, err)
	for _, it := range half {
		require.True(t, moderation.IsAuditItem(it.Key, it.Status, it.Label, share))
	}
	for _, id := range want {
		if byBucket[id] < moderation.AuditThreshold(share) {
			require.Contains(t, ids(half), id, "every verdict under the share is sampled")
		}
	}
	for _, read := range [][2]float64{{0, 10}, {1, 0}} {
		none, err := s.ListAudit(ctx, read[0], int(read[1]))
		require.NoError(t, err)
		require.Empty(t, none)
	}
}
