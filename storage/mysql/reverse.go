package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

var _ moderation.ProtectiveActions = (*Store)(nil)

// actionRow is a protective_actions row as a reversal reads it.
type actionRow struct {
	key, room, account, rule, action, mode, source, policyVersion, policyHash string
	revision                                                                  int
}

// ReverseActions implements moderation.ProtectiveActions.
func (s *Store) ReverseActions(ctx context.Context, r moderation.Reversal) ([]pipeline.ProtectiveAction, error) {
	tx, err := s.db.BeginTx(ctx, saveTx)
	if err != nil {
		return nil, classify(fmt.Errorf("mysql: reverse actions: begin: %w", err))
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := lockWrittenActions(ctx, tx, r.Key)
	if err != nil {
		return nil, err
	}
	var out []pipeline.ProtectiveAction
	var clear []pipeline.ActionClearance
	for _, a := range rows {
		if a.account != "" {
			clear = append(clear, pipeline.ActionClearance{Account: a.account, Rule: a.rule, Until: r.ClearedUntil})
		}
		if _, err := tx.ExecContext(ctx, "UPDATE protective_actions SET state = 'reversed' WHERE idempotency_key = ?", a.key); err != nil {
			return nil, classify(fmt.Errorf("mysql: reverse actions: mark: %w", err))
		}
		undo := pipeline.ActionKind(a.action).ReversedBy()
		if a.mode != string(pipeline.ModeOn) || undo == "" {
			continue
		}
		// The action's own message, if it has not left, never will.
		if _, err := tx.ExecContext(ctx, "DELETE FROM outbox WHERE destination = ? AND event_id = ? AND sent_at IS NULL",
			string(pipeline.OutboxActions), a.key); err != nil {
			return nil, classify(fmt.Errorf("mysql: reverse actions: cancel: %w", err))
		}
		rev, err := reversalOf(ctx, tx, a, undo, r)
		if err != nil {
			return nil, err
		}
		if err := writeActions(ctx, tx, []pipeline.ActionRecord{{ProtectiveAction: rev, Key: r.Key}}); err != nil {
			return nil, classify(err)
		}
		out = append(out, rev)
	}
	if err := insertClearances(ctx, tx, r.At, r.DecisionID, clear); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, classify(fmt.Errorf("mysql: reverse actions: commit: %w", err))
	}
	return out, nil
}

// lockWrittenActions reads and locks the forward actions about key that
// no reversal has marked yet.
func lockWrittenActions(ctx context.Context, tx *sql.Tx, key pipeline.ReviewKey) ([]actionRow, error) {
	rows, err := tx.QueryContext(ctx, `SELECT idempotency_key, room_id, account_id, rule_id, action, mode, source, policy_version, policy_hash, verdict_revision
		FROM protective_actions WHERE room_id = ? AND window_start = ? AND window_end = ? AND pipeline_version = ?
		  AND reverses IS NULL AND state = 'written' ORDER BY id FOR UPDATE`,
		key.RoomID, dbTime(key.WindowStart), dbTime(key.WindowEnd), key.PipelineVersion)
	if err != nil {
		return nil, classify(fmt.Errorf("mysql: reverse actions: read: %w", err))
	}
	defer rows.Close()
	var out []actionRow
	for rows.Next() {
		var a actionRow
		if err := rows.Scan(&a.key, &a.room, &a.account, &a.rule, &a.action, &a.mode, &a.source, &a.policyVersion, &a.policyHash, &a.revision); err != nil {
			return nil, classify(fmt.Errorf("mysql: reverse actions: read: %w", err))
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("mysql: reverse actions: read: %w", err))
	}
	return out, nil
}

// reversalOf is the body that undoes a: its generation is one more than
// the reversals of a's key so far (an undone overturn re-applies, and a
// second overturn reverses again under a key of its own).
func reversalOf(ctx context.Context, tx *sql.Tx, a actionRow, undo pipeline.ActionKind, r moderation.Reversal) (pipeline.ProtectiveAction, error) {
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM protective_actions WHERE reverses = ?", a.key).Scan(&n); err != nil {
		return pipeline.ProtectiveAction{}, classify(fmt.Errorf("mysql: reverse actions: generation: %w", err))
	}
	rev := pipeline.ProtectiveAction{
		SchemaVersion: pipeline.ActionSchemaVersion, IdempotencyKey: pipeline.ReversalActionKey(a.key, n+1),
		PolicyVersion: a.policyVersion, PolicyHash: a.policyHash, VerdictRevision: a.revision,
		Source: pipeline.ActionSourceModerator, Mode: pipeline.ModeOn,
		IssuedAt: r.At.UTC(), ExpiresAt: r.ExpiresAt.UTC(), Reverses: a.key,
		Item:   pipeline.ActionEntity{ID: a.room, TypeID: pipeline.EntityRoom},
		Action: pipeline.ActionRef{ID: undo}, Rules: []pipeline.ActionRule{{ID: a.rule, Name: a.rule}},
	}
	if a.account != "" {
		rev.Creator = pipeline.ActionEntity{ID: a.account, TypeID: pipeline.EntityAccount}
	}
	if err := rev.Validate(); err != nil {
		return pipeline.ProtectiveAction{}, pipeline.Permanent(fmt.Errorf("mysql: reverse actions: %w", err))
	}
	return rev, nil
}

// insertClearances writes cleared states in tx, each replacing an
// earlier one of its account and rule.
func insertClearances(ctx context.Context, db execer, now time.Time, decisionID uint64, cs []pipeline.ActionClearance) error {
	for _, c := range cs {
		_, err := db.ExecContext(ctx, `INSERT INTO action_clearances (account_id, rule_id, until, cleared_at, decision_id) VALUES (?, ?, ?, ?, ?)
			ON DUPLICATE KEY UPDATE until = VALUES(until), cleared_at = VALUES(cleared_at), decision_id = VALUES(decision_id)`,
			c.Account, c.Rule, dbTime(c.Until), dbTime(now), nullID(int64(decisionID)))
		if err != nil {
			return classify(fmt.Errorf("mysql: record clearances: %w", err))
		}
	}
	return nil
}
