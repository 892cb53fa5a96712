package mysql

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

// TestAuditSampleIsTheHashOfTheKey saves clean and flagged verdicts (some
// windows with fractions of a second) and checks that the generated column
// and the Go function agree on every row, that ListAudit returns exactly
// the undecided done clean verdicts below the share, in bucket order, and
// that a decision recorded as an audit decision reads back as one.
func TestAuditSampleIsTheHashOfTheKey(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	ctx := ctxT(t)
	ws := time.Date(2026, 11, 2, 19, 0, 0, 0, time.UTC)
	keys := map[uint64]pipeline.Verdict{}
	for i := range 160 {
		start := ws.Add(time.Duration(i) * 7 * time.Minute).Add(time.Duration(i%3) * 250 * time.Millisecond)
		v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: fmt.Sprintf("room-%03d", i), WindowStart: start, WindowEnd: start.Add(time.Hour), PipelineVersion: "v1"},
			RunID: "run", Status: pipeline.StatusDone, Label: pipeline.LabelClean, Category: pipeline.CategoryClean, Action: pipeline.ActionNone,
			Attempts: 1, PublishedAt: start, StartedAt: start, FinishedAt: start}
		switch {
		case i%5 == 0:
			v.Label, v.Category, v.Severity, v.Action = pipeline.LabelAbusive, pipeline.CategorySpam, 3, pipeline.ActionWarn
		case i%7 == 0:
			v.Status, v.Label, v.Category, v.Action = pipeline.StatusFailed, "", "", ""
		}
		storetest.MustSave(t, ctx, s, v)
		id, err := s.VerdictID(ctx, v.Key)
		require.NoError(t, err)
		keys[id] = v
	}
	rows, err := db.QueryContext(ctx, `SELECT id, audit_bucket FROM verdicts`)
	require.NoError(t, err)
	for rows.Next() {
		var id uint64
		var bucket int
		require.NoError(t, rows.Scan(&id, &bucket))
		require.Equal(t, moderation.AuditBucket(keys[id].Key), bucket, "row %d", id)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())

	const share = 0.25
	var want []uint64
	for id, v := range keys {
		if moderation.IsAuditItem(v.Key, v.Status, v.Label, share) {
			want = append(want, id)
		}
	}
	require.NotEmpty(t, want)
	require.Less(t, len(want), 80, "a quarter of the clean verdicts, give or take")
	items, err := s.ListAudit(ctx, share, moderation.MaxQueueLimit)
	require.NoError(t, err)
	var got []uint64
	for i, it := range items {
		require.True(t, it.Audit)
		require.Equal(t, pipeline.LabelClean, it.Label)
		if i > 0 {
			require.LessOrEqual(t, moderation.AuditBucket(items[i-1].Key), moderation.AuditBucket(it.Key), "bucket order")
		}
		got = append(got, it.ID)
	}
	slices.Sort(want)
	slices.Sort(got)
	require.Equal(t, want, got)

	none, err := s.ListAudit(ctx, 0, 10)
	require.NoError(t, err)
	require.Empty(t, none, "a share of 0 samples nothing")
	all, err := s.ListAudit(ctx, 1, moderation.MaxQueueLimit)
	require.NoError(t, err)
	require.Greater(t, len(all), len(items), "a larger share keeps the smaller one's items and adds")

	first := items[0]
	_, err = s.AddDecision(ctx, moderation.Decision{VerdictID: first.ID, Moderator: "mod-1", Decision: moderation.DecisionConfirm, Label: pipeline.LabelClean, Audit: true, DecidedAt: ws})
	require.NoError(t, err)
	ds, err := s.Decisions(ctx, first.ID, 1)
	require.NoError(t, err)
	require.True(t, ds[0].Audit, "the decision records that it was an audit item")
	after, err := s.ListAudit(ctx, share, moderation.MaxQueueLimit)
	require.NoError(t, err)
	require.Len(t, after, len(items)-1, "a decided audit item leaves the audit queue")
	require.NotEqual(t, first.ID, after[0].ID)
}

// TestAuditReadUsesItsIndex EXPLAINs the audit read on generated data: a
// range of ix_verdicts_audit in index order, no full scan, no sort.
func TestAuditReadUsesItsIndex(t *testing.T) {
	t.Parallel()
	db, _, _ := generated(t, 20000, time.Now().UTC())
	plan := explain(t, db, auditSQL, string(pipeline.StatusDone), string(pipeline.LabelClean), moderation.AuditThreshold(0.02), 51)
	requirePlan(t, plan, "v", []string{"ix_verdicts_audit"}, true)
	requirePlan(t, plan, "d", []string{"ix_moderator_decisions_verdict"}, false)
}
