package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// One protective action by its key (migration 00030): a moderator's
// reversal or confirmation from the room page, and the policy's
// retraction of a rule's live actions.

var _ moderation.ActionControl = (*Store)(nil)

// ReverseAction implements moderation.ActionControl.
func (s *Store) ReverseAction(ctx context.Context, r moderation.KeyReversal) (moderation.KeyReversed, error) {
	tx, err := s.db.BeginTx(ctx, saveTx)
	if err != nil {
		return moderation.KeyReversed{}, classify(fmt.Errorf("mysql: reverse action: begin: %w", err))
	}
	defer func() { _ = tx.Rollback() }()
	a, key, state, err := lockAction(ctx, tx, r.RoomID, r.Key)
	if err != nil {
		return moderation.KeyReversed{}, err
	}
	if state != moderation.ActionWritten {
		return moderation.KeyReversed{}, nil
	}
	rev, err := reverseRow(ctx, tx, a, moderation.Reversal{Key: key, At: r.At, ExpiresAt: r.ExpiresAt}, r.Source)
	if err != nil {
		return moderation.KeyReversed{}, err
	}
	if a.account != "" && !r.ClearedUntil.IsZero() {
		err := insertClearances(ctx, tx, r.At, 0, []pipeline.ActionClearance{{Account: a.account, Rule: a.rule, Until: r.ClearedUntil}})
		if err != nil {
			return moderation.KeyReversed{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return moderation.KeyReversed{}, classify(fmt.Errorf("mysql: reverse action: commit: %w", err))
	}
	return moderation.KeyReversed{Reversed: true, Reversal: rev}, nil
}

// lockAction reads and locks the forward action key of room, with the
// key of the verdict that decided it and its state.
func lockAction(ctx context.Context, tx *sql.Tx, room, key string) (actionRow, pipeline.ReviewKey, string, error) {
	var (
		a      actionRow
		state  string
		ws, we sql.NullTime
		vk     = pipeline.ReviewKey{RoomID: room}
	)
	err := tx.QueryRowContext(ctx, `SELECT idempotency_key, room_id, account_id, rule_id, action, mode, source, policy_version, policy_hash,
		verdict_revision, state, window_start, window_end, pipeline_version
		FROM protective_actions WHERE idempotency_key = ? AND room_id = ? AND reverses IS NULL FOR UPDATE`, key, room).
		Scan(&a.key, &a.room, &a.account, &a.rule, &a.action, &a.mode, &a.source, &a.policyVersion, &a.policyHash,
			&a.revision, &state, &ws, &we, &vk.PipelineVersion)
	if errors.Is(err, sql.ErrNoRows) {
		return a, vk, "", fmt.Errorf("mysql: action %s: %w", key, moderation.ErrActionNotFound)
	}
	if err != nil {
		return a, vk, "", classify(fmt.Errorf("mysql: action %s: %w", key, err))
	}
	if ws.Valid {
		vk.WindowStart = ws.Time.UTC()
	}
	if we.Valid {
		vk.WindowEnd = we.Time.UTC()
	}
	return a, vk, state, nil
}

// ConfirmAction implements moderation.ActionControl.
func (s *Store) ConfirmAction(ctx context.Context, roomID, key, moderator string, at time.Time) (bool, error) {
	if moderator == "" || len(moderator) > 128 {
		return false, pipeline.Permanent(errors.New("mysql: confirm action: moderator must be 1..128 bytes"))
	}
	res, err := s.db.ExecContext(ctx, `UPDATE protective_actions SET confirmed_by = ?, confirmed_at = ?
		WHERE idempotency_key = ? AND room_id = ? AND reverses IS NULL AND confirmed_by = ''`, moderator, dbTime(at), key, roomID)
	if err != nil {
		return false, classify(fmt.Errorf("mysql: confirm action: %w", err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, classify(fmt.Errorf("mysql: confirm action: %w", err))
	}
	if n > 0 {
		return true, nil
	}
	var one int
	err = s.db.QueryRowContext(ctx, "SELECT 1 FROM protective_actions WHERE idempotency_key = ? AND room_id = ? AND reverses IS NULL", key, roomID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("mysql: confirm action %s: %w", key, moderation.ErrActionNotFound)
	}
	if err != nil {
		return false, classify(fmt.Errorf("mysql: confirm action: %w", err))
	}
	return false, nil
}

var _ moderation.PolicyRetractions = (*Store)(nil)

// PolicyApplied implements moderation.PolicyRetractions.
func (s *Store) PolicyApplied(ctx context.Context, hash string) (bool, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM action_policy_runs WHERE policy_hash = ?", hash).Scan(&n); err != nil {
		return false, classify(fmt.Errorf("mysql: policy applied: %w", err))
	}
	return n > 0, nil
}

// RecordPolicyApplied implements moderation.PolicyRetractions; a hash
// recorded already keeps its first row.
func (s *Store) RecordPolicyApplied(ctx context.Context, hash, version string, at time.Time, retracted int) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO action_policy_runs (policy_hash, policy_version, applied_at, retracted) VALUES (?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE policy_hash = policy_hash`, hash, pipeline.ClipRunes(version, 64), dbTime(at), retracted)
	if err != nil {
		return classify(fmt.Errorf("mysql: record policy applied: %w", err))
	}
	return nil
}

// LiveActions implements moderation.PolicyRetractions.
func (s *Store) LiveActions(ctx context.Context, since time.Time, keep []moderation.RuleAction, limit int) ([]moderation.RoomAction, error) {
	q := `SELECT idempotency_key, room_id, rule_id, action, account_id FROM protective_actions
		WHERE state = 'written' AND created_at > ? AND reverses IS NULL AND mode = 'on'
		  AND action IN ('warn_counterpart', 'warn_sender', 'hold_transaction', 'restrict_sender')`
	args := []any{dbTime(since)}
	if len(keep) > 0 {
		q += " AND (rule_id, action) NOT IN (" + marks2(len(keep)) + ")"
		for _, k := range keep {
			args = append(args, k.Rule, string(k.Action))
		}
	}
	rows, err := s.db.QueryContext(ctx, q+" ORDER BY created_at, id LIMIT ?", append(args, max(limit, 1))...)
	if err != nil {
		return nil, classify(fmt.Errorf("mysql: live actions: %w", err))
	}
	defer rows.Close()
	var out []moderation.RoomAction
	for rows.Next() {
		a := moderation.RoomAction{State: moderation.ActionWritten, Mode: pipeline.ModeOn}
		if err := rows.Scan(&a.Key, &a.Verdict.RoomID, &a.Rule, &a.Action, &a.Account); err != nil {
			return nil, classify(fmt.Errorf("mysql: live actions: %w", err))
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("mysql: live actions: %w", err))
	}
	return out, nil
}

func marks2(n int) string { return strings.TrimSuffix(strings.Repeat("(?, ?), ", n), ", ") }
