package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

// queueRow is what the reference implementation of the queue needs of a
// verdict.
type queueRow struct {
	id                   uint64
	status, label, cat   string
	severity             int
	window               time.Time
	run                  string
	decided              bool
	room, rationale, act string
}

func allQueueRows(t *testing.T, db *sql.DB) []queueRow {
	t.Helper()
	rows, err := db.QueryContext(ctxT(t), `SELECT v.id, v.status, v.label, v.category, v.severity, v.window_start, v.run_id,
		EXISTS (SELECT 1 FROM moderator_decisions d WHERE d.verdict_id = v.id), v.room_id, COALESCE(v.rationale, ''), v.action
		FROM verdicts v`)
	require.NoError(t, err)
	defer rows.Close()
	var out []queueRow
	for rows.Next() {
		var r queueRow
		require.NoError(t, rows.Scan(&r.id, &r.status, &r.label, &r.cat, &r.severity, &r.window, &r.run, &r.decided, &r.room, &r.rationale, &r.act))
		r.window = r.window.UTC()
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// expectedQueue is the queue computed in Go from every row: the reference
// ListQueue must agree with.
func expectedQueue(t *testing.T, rows []queueRow, f moderation.QueueFilter) []uint64 {
	t.Helper()
	f, err := f.Normalize()
	require.NoError(t, err)
	var ids []uint64
	for _, label := range f.Labels {
		var sel []queueRow
		for _, r := range rows {
			switch {
			case r.status != string(f.Status), r.label != string(label),
				f.Category != "" && r.cat != string(f.Category),
				f.RunID != "" && r.run != f.RunID,
				r.severity < f.MinSeverity,
				!f.From.IsZero() && r.window.Before(f.From),
				!f.To.IsZero() && !r.window.Before(f.To),
				!f.IncludeDecided && r.decided:
				continue
			}
			sel = append(sel, r)
		}
		slices.SortFunc(sel, func(a, b queueRow) int {
			return cmp.Or(cmp.Compare(b.severity, a.severity), b.window.Compare(a.window), cmp.Compare(b.id, a.id))
		})
		for _, r := range sel {
			ids = append(ids, r.id)
		}
	}
	return ids
}

// walkQueue reads every page of the queue under f.
func walkQueue(t *testing.T, s *Store, f moderation.QueueFilter) (ids []uint64, pages int) {
	t.Helper()
	cursor := ""
	for {
		page, err := s.ListQueue(ctxT(t), f, cursor)
		require.NoError(t, err)
		limit := cmp.Or(f.Limit, moderation.DefaultQueueLimit)
		require.LessOrEqual(t, len(page.Items), limit)
		pages++
		for _, it := range page.Items {
			ids = append(ids, it.ID)
		}
		if page.Next == "" {
			return ids, pages
		}
		require.Len(t, page.Items, limit, "only the last page is short")
		cursor = page.Next
		require.Less(t, pages, 10000, "the walk ends")
	}
}

func TestListQueueAgreesWithTheReference(t *testing.T) {
	t.Parallel()
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	db, s, st := generated(t, 6000, end)
	rows := allQueueRows(t, db)
	// A run with queue rows in it.
	var run string
	for _, r := range rows {
		if r.status == "done" && r.label == "abusive" {
			run = r.run
			break
		}
	}
	require.NotEmpty(t, run)
	require.Positive(t, st.Decisions)
	filters := map[string]moderation.QueueFilter{
		"default":            {Limit: 7},
		"category":           {Category: pipeline.CategoryExternalPayment, Limit: 5},
		"min severity":       {MinSeverity: 4, Limit: 9},
		"time":               {From: end.Add(-7 * 24 * time.Hour), To: end.Add(-2 * 24 * time.Hour), Limit: 6},
		"run":                {RunID: run, Limit: 1},
		"decided too":        {IncludeDecided: true, Limit: 11},
		"failed":             {Status: pipeline.StatusFailed, Limit: 8},
		"labels in order":    {Labels: []pipeline.Label{pipeline.LabelSuspicious, pipeline.LabelAbusive, pipeline.LabelClean}, Limit: 500},
		"everything at once": {Category: pipeline.CategoryOffPlatform, MinSeverity: 2, From: end.Add(-20 * 24 * time.Hour), IncludeDecided: true, Limit: 3},
		"nothing":            {RunID: "run-none"},
	}
	for name, f := range filters {
		t.Run(name, func(t *testing.T) {
			want := expectedQueue(t, rows, f)
			got, pages := walkQueue(t, s, f)
			require.Equal(t, want, got)
			if name != "nothing" {
				require.NotEmpty(t, got, "the filter selects something")
			}
			if len(want) > f.Limit && f.Limit > 0 {
				require.Greater(t, pages, 1)
			}
		})
	}

	t.Run("items carry the row", func(t *testing.T) {
		page, err := s.ListQueue(ctxT(t), moderation.QueueFilter{IncludeDecided: true, Limit: 500}, "")
		require.NoError(t, err)
		byID := map[uint64]queueRow{}
		for _, r := range rows {
			byID[r.id] = r
		}
		decided := 0
		for _, it := range page.Items {
			r := byID[it.ID]
			require.Equal(t, r.room, it.Key.RoomID)
			require.Equal(t, r.window, it.Key.WindowStart)
			require.Equal(t, r.rationale, it.Rationale)
			require.Equal(t, r.decided, it.Decided)
			require.Equal(t, r.label, string(it.Label))
			require.Equal(t, r.act, string(it.Action))
			require.False(t, it.FinishedAt.IsZero())
			if it.Decided {
				decided++
			}
		}
		require.Positive(t, decided)
	})
}

func TestListQueuePagesDoNotShiftWhenRowsArrive(t *testing.T) {
	t.Parallel()
	end := time.Now().UTC()
	db, s, _ := generated(t, 3000, end)
	f := moderation.QueueFilter{Limit: 5}
	before := expectedQueue(t, allQueueRows(t, db), f)
	first, err := s.ListQueue(ctxT(t), f, "")
	require.NoError(t, err)
	require.Equal(t, before[:5], ids(first.Items))

	// A new top-of-queue verdict arrives between two pages.
	v := storetest.SampleVerdict("room-new")
	v.Severity, v.Label = 5, pipeline.LabelAbusive
	v.Key.WindowStart, v.Key.WindowEnd = end.Truncate(time.Hour), end.Truncate(time.Hour).Add(time.Hour)
	storetest.MustSave(t, ctxT(t), s, v)

	second, err := s.ListQueue(ctxT(t), f, first.Next)
	require.NoError(t, err)
	require.Equal(t, before[5:10], ids(second.Items), "the second page starts right after the first")

	// A fresh walk sees the new verdict first.
	again, err := s.ListQueue(ctxT(t), f, "")
	require.NoError(t, err)
	require.Equal(t, "room-new", again.Items[0].Key.RoomID)
}

func ids(items []moderation.QueueItem) []uint64 {
	out := make([]uint64, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

func TestListQueueRefusesBadFiltersAndCursors(t *testing.T) {
	t.Parallel()
	_, s, _ := generated(t, 2000, time.Now().UTC())
	ctx := ctxT(t)
	now := time.Now()
	_, err := s.ListQueue(ctx, moderation.QueueFilter{Labels: []pipeline.Label{"spam", pipeline.LabelAbusive, pipeline.LabelAbusive}, Category: "gossip",
		MinSeverity: 9, From: now, To: now.Add(-time.Hour), Limit: 1000, Status: "pending"}, "")
	for _, want := range []string{`unknown status "pending"`, `unknown category "gossip"`, "min severity 9", "from must be before to", "limit 1000"} {
		require.ErrorContains(t, err, want)
	}
	_, err = s.ListQueue(ctx, moderation.QueueFilter{Labels: []pipeline.Label{"spam", pipeline.LabelAbusive, pipeline.LabelAbusive}}, "")
	require.ErrorContains(t, err, `unknown label "spam"`)
	require.ErrorContains(t, err, `label "abusive" given twice`)

	page, err := s.ListQueue(ctx, moderation.QueueFilter{Limit: 2}, "")
	require.NoError(t, err)
	require.NotEmpty(t, page.Next)
	_, err = s.ListQueue(ctx, moderation.QueueFilter{Limit: 2, MinSeverity: 3}, page.Next)
	require.ErrorIs(t, err, moderation.ErrBadCursor)
	require.ErrorContains(t, err, "another filter")
	_, err = s.ListQueue(ctx, moderation.QueueFilter{Limit: 2}, "not-a-cursor!")
	require.ErrorIs(t, err, moderation.ErrBadCursor)
	// The page size may change between pages.
	next, err := s.ListQueue(ctx, moderation.QueueFilter{Limit: 3}, page.Next)
	require.NoError(t, err)
	require.Len(t, next.Items, 3)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.ListQueue(cctx, moderation.QueueFilter{}, "")
	require.ErrorIs(t, err, context.Canceled)
}
