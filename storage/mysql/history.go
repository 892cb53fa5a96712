package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// The take history (migration 00025): one row per take started or
// released, written by the console after the take changed, so that pick-up
// and handle time can be read back with the decisions.

var _ moderation.TakeHistory = (*Store)(nil)

// RecordTake appends r to take_history.
func (s *Store) RecordTake(ctx context.Context, r moderation.TakeRecord) error {
	if err := r.Validate(); err != nil {
		return pipeline.Permanent(fmt.Errorf("mysql: take history: %w", err))
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO take_history (at, verdict_id, moderator, event) VALUES (?, ?, ?, ?)`,
		dbTime(r.At), r.VerdictID, r.Moderator, string(r.Event)); err != nil {
		return fmt.Errorf("mysql: take history: %w", err)
	}
	return nil
}

// handledSQL lists the decisions of a window with the first take of their
// item and the decider's latest take before each; both subqueries read
// ix_take_history_verdict.
const handledSQL = `SELECT d.verdict_id, d.moderator, d.decision, v.finished_at, d.decided_at,
    (SELECT MIN(h.at) FROM take_history h WHERE h.verdict_id = d.verdict_id AND h.event = 'take' AND h.at <= d.decided_at),
    (SELECT MAX(h.at) FROM take_history h WHERE h.verdict_id = d.verdict_id AND h.event = 'take' AND h.at <= d.decided_at
        AND h.moderator = d.moderator)
FROM moderator_decisions d JOIN verdicts v ON v.id = d.verdict_id
WHERE d.decided_at >= ? AND d.decided_at < ?
ORDER BY d.decided_at, d.id`

// HandledItems returns the decisions made in [from, to), oldest first,
// with their take times.
func (s *Store) HandledItems(ctx context.Context, from, to time.Time) ([]moderation.HandledItem, error) {
	rows, err := s.db.QueryContext(ctx, handledSQL, dbTime(from), dbTime(to))
	if err != nil {
		return nil, fmt.Errorf("mysql: handled items: %w", err)
	}
	defer rows.Close()
	var out []moderation.HandledItem
	for rows.Next() {
		var (
			it                    moderation.HandledItem
			queued, picked, taken sql.NullTime
		)
		if err := rows.Scan(&it.VerdictID, &it.Moderator, &it.Decision, &queued, &it.DecidedAt, &picked, &taken); err != nil {
			return nil, fmt.Errorf("mysql: handled items: %w", err)
		}
		it.DecidedAt = it.DecidedAt.UTC()
		for _, p := range []struct {
			src sql.NullTime
			dst *time.Time
		}{{queued, &it.QueuedAt}, {picked, &it.PickedAt}, {taken, &it.TakenAt}} {
			if p.src.Valid {
				*p.dst = p.src.Time.UTC()
			}
		}
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: handled items: %w", err)
	}
	return out, nil
}

// PurgeTakeHistory deletes up to limit rows recorded before cutoff, oldest
// first.
func (s *Store) PurgeTakeHistory(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM take_history WHERE at < ? ORDER BY at LIMIT ?`, dbTime(cutoff), limit)
	if err != nil {
		return 0, fmt.Errorf("mysql: purge take history: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("mysql: purge take history: %w", err)
	}
	return int(n), nil
}
