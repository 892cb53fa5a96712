package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// The moderation side of protective actions: a room's actions as the
// console lists them, and an overturn's reversals (or their undo's
// re-applications) written with their outbox messages and cleared states
// in one transaction.

var _ moderation.ProtectiveActions = (*Store)(nil)

// RoomActions implements moderation.ProtectiveActions.
func (s *Store) RoomActions(ctx context.Context, roomID string, limit int) ([]moderation.RoomAction, error) {
	if limit < 1 {
		limit = 200
	}
	rows, err := s.db.QueryContext(ctx, `SELECT idempotency_key, action, mode, source, rule_id, account_id, COALESCE(reverses, ''),
		state, window_start, window_end, pipeline_version, verdict_revision, policy_version, policy_hash, created_at, expires_at
		FROM protective_actions WHERE room_id = ? ORDER BY created_at DESC, id DESC LIMIT ?`, roomID, limit)
	if err != nil {
		return nil, classify(fmt.Errorf("mysql: room actions: %w", err))
	}
	defer rows.Close()
	var out []moderation.RoomAction
	for rows.Next() {
		a := moderation.RoomAction{Verdict: pipeline.ReviewKey{RoomID: roomID}}
		var ws, we sql.NullTime
		if err := rows.Scan(&a.Key, &a.Action, &a.Mode, &a.Source, &a.Rule, &a.Account, &a.Reverses, &a.State,
			&ws, &we, &a.Verdict.PipelineVersion, &a.VerdictRevision, &a.PolicyVersion, &a.PolicyHash, &a.CreatedAt, &a.ExpiresAt); err != nil {
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
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("mysql: room actions: %w", err))
	}
	return out, nil
}

// WriteReversal implements moderation.ProtectiveActions.
func (s *Store) WriteReversal(ctx context.Context, r moderation.Reversal) error {
	if err := checkActions(r.Actions); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, saveTx)
	if err != nil {
		return classify(fmt.Errorf("mysql: write reversal: %w", err))
	}
	defer func() { _ = tx.Rollback() }()
	var msgs []pipeline.OutboxMessage
	for _, a := range r.Actions {
		fresh, err := insertReversal(ctx, tx, a)
		if err != nil {
			return classify(err)
		}
		if !fresh {
			continue
		}
		if a.Action.ID.Reversal() {
			if _, err := tx.ExecContext(ctx, `UPDATE protective_actions SET state = 'reversed' WHERE idempotency_key = ?`, a.Reverses); err != nil {
				return classify(fmt.Errorf("mysql: write reversal: state: %w", err))
			}
		}
		if a.Mode == pipeline.ModeOn {
			m, err := pipeline.ActionOutboxMessage(a.ProtectiveAction)
			if err != nil {
				return pipeline.Permanent(fmt.Errorf("mysql: write reversal: %w", err))
			}
			msgs = append(msgs, m)
		}
	}
	if err := insertOutbox(ctx, tx, time.Time{}, msgs); err != nil {
		return classify(fmt.Errorf("mysql: write reversal: %w", err))
	}
	if err := writeClearances(ctx, tx, r); err != nil {
		return classify(err)
	}
	if err := tx.Commit(); err != nil {
		return classify(fmt.Errorf("mysql: write reversal: commit: %w", err))
	}
	return nil
}

// insertReversal writes one action's row and reports whether it is new: a
// retried overturn's second write of a key changes nothing.
func insertReversal(ctx context.Context, tx *sql.Tx, a pipeline.ActionRecord) (bool, error) {
	var n int
	err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM protective_actions WHERE idempotency_key = ? FOR UPDATE`, a.IdempotencyKey).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("mysql: write reversal: %w", err)
	}
	if n > 0 {
		return false, nil
	}
	return true, insertAction(ctx, tx, a)
}

// writeClearances records r's cleared states (each replacing an earlier
// one of its account and rule) and removes those an undo lifts.
func writeClearances(ctx context.Context, tx *sql.Tx, r moderation.Reversal) error {
	for _, c := range r.Clear {
		_, err := tx.ExecContext(ctx, `INSERT INTO action_clearances (account_id, rule_id, until, cleared_at, decision_id) VALUES (?, ?, ?, ?, ?)
			ON DUPLICATE KEY UPDATE until = VALUES(until), cleared_at = VALUES(cleared_at), decision_id = VALUES(decision_id)`,
			c.Account, c.Rule, dbTime(c.Until), dbTime(r.At), nullID(int64(r.DecisionID)))
		if err != nil {
			return fmt.Errorf("mysql: write reversal: clearance: %w", err)
		}
	}
	for _, c := range r.Unclear {
		if _, err := tx.ExecContext(ctx, `DELETE FROM action_clearances WHERE account_id = ? AND rule_id = ?`, c.Account, c.Rule); err != nil {
			return fmt.Errorf("mysql: write reversal: clearance: %w", err)
		}
	}
	return nil
}
