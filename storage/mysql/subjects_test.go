package mysql_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/storetest"
)

// TestSubjectsAreSavedWithTheVerdict: subjects are written in the save's
// transaction, replaced by a re-save, read back by Get, kept when the
// done-guard keeps the stored verdict, and erased by sender.
func TestSubjectsAreSavedWithTheVerdict(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	v := storetest.SampleVerdict("room-subjects")
	v.OffenderRole, v.Subjects = pipeline.RoleSeller, []string{"seller-1", "seller-2"}
	ok, err := s.Save(ctx, v)
	require.NoError(t, err)
	require.True(t, ok)
	got, err := s.Get(ctx, v.Key)
	require.NoError(t, err)
	require.Equal(t, []string{"seller-1", "seller-2"}, got.Subjects)
	require.Equal(t, pipeline.RoleSeller, got.OffenderRole)

	// The rows carry what the history query reads without the verdict.
	var room, label, category, role string
	require.NoError(t, s.DB().QueryRowContext(ctx,
		"SELECT room_id, label, category, role FROM verdict_subjects WHERE sender_id = ?", "seller-2").Scan(&room, &label, &category, &role))
	require.Equal(t, []string{"room-subjects", "abusive", "external_payment", "seller"}, []string{room, label, category, role})

	// A re-save replaces the subjects.
	v.Subjects = []string{"seller-2"}
	_, err = s.Save(ctx, v)
	require.NoError(t, err)
	got, err = s.Get(ctx, v.Key)
	require.NoError(t, err)
	require.Equal(t, []string{"seller-2"}, got.Subjects)

	// A failed redelivery does not replace the done verdict or its subjects.
	failed := v
	failed.Status, failed.Subjects, failed.OffenderRole = pipeline.StatusFailed, nil, ""
	ok, err = s.Save(ctx, failed)
	require.NoError(t, err)
	require.False(t, ok)
	got, err = s.Get(ctx, v.Key)
	require.NoError(t, err)
	require.Equal(t, []string{"seller-2"}, got.Subjects)

	// Erasure removes the sender's rows and nothing else: its subject row
	// and its participant row (a subject always took part).
	n, err := s.EraseSender(ctx, "seller-2")
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	got, err = s.Get(ctx, v.Key)
	require.NoError(t, err)
	require.Empty(t, got.Subjects)
	require.Equal(t, pipeline.LabelAbusive, got.Label, "the verdict stays")
	_, err = s.EraseSender(ctx, "")
	require.Error(t, err)
}

func TestSubjectsAreBounded(t *testing.T) {
	t.Parallel()
	s := setup(t)
	for name, mut := range map[string]func(*pipeline.Verdict){
		"no role":       func(v *pipeline.Verdict) { v.OffenderRole = "" },
		"clean":         func(v *pipeline.Verdict) { v.Label, v.Category = pipeline.LabelClean, pipeline.CategoryClean },
		"repeated":      func(v *pipeline.Verdict) { v.Subjects = []string{"a", "a"} },
		"long id":       func(v *pipeline.Verdict) { v.Subjects = []string{strings.Repeat("x", 129)} },
		"too many":      func(v *pipeline.Verdict) { v.Subjects = strings.Split("a,b,c,d,e,f,g,h,i", ",") },
		"system sender": func(v *pipeline.Verdict) { v.OffenderRole = pipeline.RoleSystem },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			v := storetest.SampleVerdict("room-bad-subjects")
			v.OffenderRole, v.Subjects = pipeline.RoleSeller, []string{"seller-1"}
			mut(&v)
			_, err := s.Save(context.Background(), v)
			require.Error(t, err)
			d, _ := pipeline.Classify(err)
			require.Equal(t, pipeline.GiveUp, d)
		})
	}
}

// TestSubjectHistoryQueryUsesTheSenderIndex: "rooms by sender in 30 days"
// reads the sender index alone.
func TestSubjectHistoryQueryUsesTheSenderIndex(t *testing.T) {
	t.Parallel()
	s := setup(t)
	plan := explain(t, s, "SELECT label, category, COUNT(DISTINCT room_id) FROM verdict_subjects "+
		"WHERE sender_id IN (?, ?) AND decided_at >= ? GROUP BY label, category", "a", "b", "2026-11-01")[0]
	require.Equal(t, "ix_verdict_subjects_sender", plan["key"], "plan: %v", plan)
	require.Contains(t, plan["Extra"], "Using index", "covering: the verdicts table is not read; plan: %v", plan)
}

// explain returns the rows of EXPLAIN q as column-to-value maps.
func explain(t *testing.T, s *mysql.Store, q string, args ...any) []map[string]string {
	t.Helper()
	rows, err := s.DB().QueryContext(context.Background(), "EXPLAIN "+q, args...)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var out []map[string]string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		plan := map[string]string{}
		for i, c := range cols {
			if b, ok := vals[i].([]byte); ok {
				plan[c] = string(b)
			}
		}
		out = append(out, plan)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, out)
	return out
}

// TestAccountHistoryConforms: the history query counts as the reviewer
// relies on (storetest.RunAccountHistoryConformance), over verdicts saved
// with their subjects and moderators' decisions on them.
func TestAccountHistoryConforms(t *testing.T) {
	t.Parallel()
	storetest.RunAccountHistoryConformance(t, func(t *testing.T) (pipeline.AccountHistory, func(storetest.HistoryRecord)) {
		s := setup(t)
		ctx := context.Background()
		return s, func(r storetest.HistoryRecord) {
			t.Helper()
			v := storetest.SampleVerdict(r.Room)
			v.Key.WindowEnd = r.DecidedAt.Add(-time.Minute)
			v.Key.WindowStart = v.Key.WindowEnd.Add(-time.Hour)
			v.StartedAt, v.FinishedAt = v.Key.WindowEnd, r.DecidedAt
			v.Label, v.Category, v.OffenderRole, v.Subjects = r.Label, r.Category, pipeline.RoleSeller, []string{r.Sender}
			_, err := s.Save(ctx, v)
			require.NoError(t, err)
			var id int64
			require.NoError(t, s.DB().QueryRowContext(ctx, "SELECT verdict_id FROM verdict_subjects WHERE room_id = ? AND sender_id = ? AND decided_at = ?",
				r.Room, r.Sender, r.DecidedAt).Scan(&id))
			for i, d := range r.Decisions {
				_, err := s.DB().ExecContext(ctx, "INSERT INTO moderator_decisions (verdict_id, moderator, decision, label, decided_at) VALUES (?, 'mod', ?, 'clean', ?)",
					id, d, r.DecidedAt.Add(time.Duration(i+1)*time.Minute))
				require.NoError(t, err)
			}
		}
	})
}

// TestAccountHistoryReadsIndexesOnly: the history query reads the sender
// index for subjects, the verdicts row by primary key (is it current?) and
// the verdict index for decisions, never a scan.
func TestAccountHistoryReadsIndexesOnly(t *testing.T) {
	t.Parallel()
	s := setup(t)
	keys := map[string]string{}
	for _, plan := range explain(t, s, fmt.Sprintf(mysql.HistorySQLForTest, "WHEN ? THEN ? WHEN ? THEN ?", "?, ?"), "a", "seller", "b", "buyer", "a", "b", "2026-11-01", "room-1") {
		keys[plan["table"]] = plan["key"]
		require.NotEqual(t, "ALL", plan["type"], "no full scan: %v", plan)
	}
	require.Equal(t, "ix_verdict_subjects_sender", keys["s"], "%v", keys)
	require.Equal(t, "ix_moderator_decisions_verdict", keys["d"], "%v", keys)
	require.Equal(t, "PRIMARY", keys["v"], "current revisions: a primary-key probe per subject row; %v", keys)
}
