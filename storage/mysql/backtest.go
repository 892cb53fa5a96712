package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/protect"
)

var _ protect.CaseSource = (*Store)(nil)

// backtestSQL lists the current, done, flagged verdicts finished in a
// period, oldest first (ix_verdicts_status_finished), with the last
// moderator decision on each.
const backtestSQL = `SELECT v.id, v.run_id, v.revision,
	(SELECT d.decision FROM moderator_decisions d WHERE d.verdict_id = v.id ORDER BY d.decided_at DESC, d.id DESC LIMIT 1)
	FROM verdicts v
	WHERE v.status = 'done' AND v.finished_at >= ? AND v.finished_at < ?
	  AND v.label IN ('abusive', 'suspicious') AND v.superseded_at IS NULL
	ORDER BY v.finished_at, v.id LIMIT ?`

// BacktestCases implements protect.CaseSource. A verdict's source is read
// from what the row keeps: a real-time run id (rt-…) is realtime, a
// revision above 1 (a moderator's re-review) on_demand, anything else
// batch (sweeps are not told apart from batch runs).
func (s *Store) BacktestCases(ctx context.Context, from, to time.Time, limit int) ([]protect.Case, bool, error) {
	rows, err := s.db.QueryContext(ctx, backtestSQL, dbTime(from), dbTime(to), limit+1)
	if err != nil {
		return nil, false, classify(fmt.Errorf("mysql: backtest cases: %w", err))
	}
	type head struct {
		id       uint64
		run      string
		revision int
		decision sql.NullString
	}
	var heads []head
	for rows.Next() {
		var h head
		if err := rows.Scan(&h.id, &h.run, &h.revision, &h.decision); err != nil {
			rows.Close()
			return nil, false, classify(fmt.Errorf("mysql: backtest cases: %w", err))
		}
		heads = append(heads, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, classify(fmt.Errorf("mysql: backtest cases: %w", err))
	}
	more := len(heads) > limit
	if more {
		heads = heads[:limit]
	}
	out := make([]protect.Case, 0, len(heads))
	for _, h := range heads {
		v, err := s.readRevision(ctx, h.id)
		if err != nil {
			return nil, false, classify(fmt.Errorf("mysql: backtest cases: %w", err))
		}
		src := pipeline.ActionSourceBatch
		switch {
		case h.revision > 1:
			src = pipeline.ActionSourceOnDemand
		case strings.HasPrefix(h.run, "rt-"):
			src = pipeline.ActionSourceRealtime
		}
		out = append(out, protect.Case{Verdict: v, Source: src, Decision: h.decision.String})
	}
	return out, more, nil
}
