package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// A room's protective actions as the console's room page lists them.

var _ moderation.ActionHistory = (*Store)(nil)

// RoomActions implements moderation.ActionHistory.
func (s *Store) RoomActions(ctx context.Context, roomID string, limit int) ([]moderation.RoomAction, error) {
	if limit < 1 {
		limit = 200
	}
	rows, err := s.db.QueryContext(ctx, `SELECT idempotency_key, action, mode, source, rule_id, account_id, COALESCE(reverses, ''),
		state, window_start, window_end, pipeline_version, verdict_revision, policy_version, policy_hash, created_at, expires_at,
		confirmed_by, confirmed_at
		FROM protective_actions WHERE room_id = ? ORDER BY created_at DESC, id DESC LIMIT ?`, roomID, limit)
	if err != nil {
		return nil, classify(fmt.Errorf("mysql: room actions: %w", err))
	}
	defer rows.Close()
	var out []moderation.RoomAction
	for rows.Next() {
		a := moderation.RoomAction{Verdict: pipeline.ReviewKey{RoomID: roomID}}
		var ws, we, confirmed sql.NullTime
		if err := rows.Scan(&a.Key, &a.Action, &a.Mode, &a.Source, &a.Rule, &a.Account, &a.Reverses, &a.State,
			&ws, &we, &a.Verdict.PipelineVersion, &a.VerdictRevision, &a.PolicyVersion, &a.PolicyHash, &a.CreatedAt, &a.ExpiresAt,
			&a.ConfirmedBy, &confirmed); err != nil {
			return nil, classify(fmt.Errorf("mysql: room actions: %w", err))
		}
		a.Verdict.WindowStart, a.Verdict.WindowEnd = ws.Time.UTC(), we.Time.UTC()
		if !ws.Valid {
			a.Verdict.WindowStart = time.Time{}
		}
		if !we.Valid {
			a.Verdict.WindowEnd = time.Time{}
		}
		a.CreatedAt, a.ExpiresAt = a.CreatedAt.UTC(), a.ExpiresAt.UTC()
		if confirmed.Valid {
			a.ConfirmedAt = confirmed.Time.UTC()
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("mysql: room actions: %w", err))
	}
	return out, nil
}
