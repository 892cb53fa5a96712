package mysql

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// planRow is one row of EXPLAIN, whatever the server (MySQL 8 and MariaDB
// differ in columns; they are read by name).
type planRow struct {
	table, typ, key, extra string
}

func explain(t *testing.T, db *sql.DB, q string, args ...any) []planRow {
	t.Helper()
	rows, err := db.QueryContext(ctxT(t), "EXPLAIN "+strings.TrimSuffix(strings.TrimSpace(q), ";"), args...)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var out []planRow
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		var r planRow
		for i, c := range cols {
			switch strings.ToLower(c) {
			case "table":
				r.table = vals[i].String
			case "type":
				r.typ = vals[i].String
			case "key":
				r.key = vals[i].String
			case "extra":
				r.extra = vals[i].String
			}
		}
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// requirePlan checks the plan's access to table: no full scan, one of the
// keys, and (when sorted) no filesort.
func requirePlan(t *testing.T, plan []planRow, table string, keys []string, sorted bool) {
	t.Helper()
	for _, r := range plan {
		if r.table != table {
			continue
		}
		require.NotEqual(t, "ALL", r.typ, "full scan of %s: %+v", table, plan)
		require.NotEqual(t, "index", r.typ, "full index scan of %s: %+v", table, plan)
		require.Contains(t, keys, r.key, "%s uses %q: %+v", table, r.key, plan)
		if sorted {
			require.NotContains(t, r.extra, "filesort", "the index gives the order: %+v", plan)
		}
		return
	}
	t.Fatalf("no access to %s in the plan %+v", table, plan)
}

// TestPlansUseTheIndexes EXPLAINs every analyst query, every review-queue
// read and the purge's statements on generated data (30 days, the
// optimizer's statistics refreshed): none scans verdicts or its stage rows
// whole, each uses the index it was built for.
func TestPlansUseTheIndexes(t *testing.T) {
	t.Parallel()
	end := time.Now().UTC()
	db, s, st := generated(t, 20000, end)
	run := st.RunIDs[len(st.RunIDs)-48]

	t.Run("analysts: recent abusive rooms", func(t *testing.T) {
		requirePlan(t, explain(t, db, analystQueries[0].sql), "verdicts", []string{"ix_verdicts_label_window"}, false)
	})
	t.Run("analysts: stage latency", func(t *testing.T) {
		plan := explain(t, db, analystQueries[1].sql)
		requirePlan(t, plan, "v", []string{"ix_verdicts_finished"}, false)
		requirePlan(t, plan, "s", []string{"PRIMARY"}, false)
	})
	for _, qc := range queueCases(end, run) {
		t.Run(qc.name, func(t *testing.T) {
			f, err := qc.f.Normalize()
			require.NoError(t, err)
			label := f.Labels[0]
			var cur *queueCursor
			if qc.deep > 0 {
				next := ""
				for range qc.deep {
					page, err := s.ListQueue(ctxT(t), qc.f, next)
					require.NoError(t, err)
					require.NotEmpty(t, page.Next, "the queue is deep enough")
					next = page.Next
				}
				c, err := decodeCursor(next, f)
				require.NoError(t, err)
				cur, label = &c, c.Label
			}
			q, args := queueQuery(f, label, cur, f.Limit+1)
			plan := explain(t, db, q, args...)
			requirePlan(t, plan, "v", qc.keys, qc.sorted)
			if !f.IncludeDecided {
				requirePlan(t, plan, "d", []string{"ix_moderator_decisions_verdict"}, false)
			}
		})
	}
	t.Run("queue header counts", func(t *testing.T) {
		plan := explain(t, db, countQueueSQL, end, end, end, end, "done", "abusive", "suspicious")
		requirePlan(t, plan, "v", []string{"ix_verdicts_queue_counts"}, false)
		require.Contains(t, plan[0].extra, "Using index", "the count reads the covering index, no verdicts row: %+v", plan)
		requirePlan(t, plan, "d", []string{"ix_moderator_decisions_verdict"}, false)
	})
	t.Run("purge", func(t *testing.T) {
		cutoff := end.Add(-20 * 24 * time.Hour)
		requirePlan(t, explain(t, db, lastDueSQL, cutoff), "verdicts", []string{"ix_verdicts_created"}, true)
		requirePlan(t, explain(t, db, stagePurge.next, 1000, 1000), "verdict_stages", []string{"PRIMARY"}, true)
		requirePlan(t, explain(t, db, verdictPurge.next, 1000, 1000), "verdicts", []string{"PRIMARY"}, true)
		plan := explain(t, db, stagePurge.del, 1000, 2000, cutoff)
		requirePlan(t, plan, "s", []string{"PRIMARY"}, false)
		requirePlan(t, plan, "v", []string{"PRIMARY"}, false)
		requirePlan(t, plan, "d", []string{"ix_moderator_decisions_verdict"}, false)
		plan = explain(t, db, verdictPurge.del, 1000, 2000, cutoff)
		requirePlan(t, plan, "v", []string{"PRIMARY"}, false)
		requirePlan(t, plan, "d", []string{"ix_moderator_decisions_verdict"}, false)
	})
}

// TestAnalystsGuideShowsTheQueries keeps the analysts' guide's MySQL
// queries the ones the plans and the benchmark are checked on.
func TestAnalystsGuideShowsTheQueries(t *testing.T) {
	t.Parallel()
	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "analysts.md"))
	require.NoError(t, err)
	for _, q := range analystQueries {
		require.Contains(t, string(guide), q.sql, "docs/analysts.md does not show the query %q as the tests run it", q.name)
	}
}

// TestAccountAndCampaignQueriesUseTheIndexes EXPLAINs the analysts'
// account and campaign queries on generated verdicts with subjects (one
// per flagged verdict, drawn from 500 accounts) and campaign marks (every
// fifth flagged verdict): each reads the period's verdicts by
// ix_verdicts_finished and their subject, campaign and decision rows by
// primary key or verdict index, never a whole table.
func TestAccountAndCampaignQueriesUseTheIndexes(t *testing.T) {
	t.Parallel()
	end := time.Now().UTC()
	db, _, _ := generated(t, 20000, end)
	ctx := ctxT(t)
	_, err := db.ExecContext(ctx, `INSERT INTO verdict_subjects (verdict_id, sender_id, role, room_id, label, category, decided_at)
		SELECT id, CONCAT('acct-', id % 500), 'seller', room_id, label, category, finished_at
		FROM verdicts WHERE status = 'done' AND label IN ('abusive', 'suspicious')`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO verdict_campaigns (verdict_id, kind, mark, message_id, rooms, senders, room_id, label, category, decided_at)
		SELECT id, 'script', CONCAT('hmac:', LPAD(HEX(id % 40), 24, '0')), 'm1', 30, 2, room_id, label, category, finished_at
		FROM verdicts WHERE status = 'done' AND label IN ('abusive', 'suspicious') AND id % 5 = 0`)
	require.NoError(t, err)
	for _, tbl := range []string{"verdict_subjects", "verdict_campaigns"} {
		_, err := db.ExecContext(ctx, "ANALYZE TABLE "+tbl)
		require.NoError(t, err)
	}
	byName := map[string]string{}
	for _, q := range analystQueries {
		byName[q.name] = q.sql
	}
	t.Run("top accounts", func(t *testing.T) {
		plan := explain(t, db, byName["top accounts by abusive rooms (7 days)"])
		requirePlan(t, plan, "v", []string{"ix_verdicts_finished"}, false)
		requirePlan(t, plan, "s", []string{"PRIMARY"}, false)
		requirePlan(t, plan, "d", []string{"ix_moderator_decisions_verdict"}, false)
	})
	t.Run("campaigns", func(t *testing.T) {
		plan := explain(t, db, byName["campaigns by size and category (7 days)"])
		requirePlan(t, plan, "v", []string{"ix_verdicts_finished"}, false)
		requirePlan(t, plan, "c", []string{"PRIMARY"}, false)
	})
	t.Run("take a campaign", func(t *testing.T) {
		plan := explain(t, db, fmt.Sprintf(openCampaignHoldersSQL, "?"), "hmac:000000000000000000000001", "mod-a", end)
		requirePlan(t, plan, "c", []string{"ix_verdict_campaigns_mark"}, false)
		requirePlan(t, plan, "t", []string{"PRIMARY"}, false)
		requirePlan(t, plan, "d", []string{"ix_moderator_decisions_verdict"}, false)
	})
	t.Run("agreement on campaign verdicts", func(t *testing.T) {
		plan := explain(t, db, byName["moderator agreement, campaign verdicts or not (30 days)"])
		requirePlan(t, plan, "v", []string{"ix_verdicts_finished"}, false)
		requirePlan(t, plan, "c", []string{"PRIMARY"}, false)
		requirePlan(t, plan, "d", []string{"ix_moderator_decisions_verdict"}, false)
	})
}
