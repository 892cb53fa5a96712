package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
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
		rev, err := reverseRow(ctx, tx, a, r, pipeline.ActionSourceModerator)
		if err != nil {
			return nil, err
		}
		if rev != nil {
			out = append(out, *rev)
		}
	}
	if err := insertClearances(ctx, tx, r.At, r.DecisionID, clear); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, classify(fmt.Errorf("mysql: reverse actions: commit: %w", err))
	}
	return out, nil
}

// reverseRow marks the forward action a (about r.Key) reversed (by the
// overturn r.DecisionID, when not 0) and, when
// it is `on` and can be undone, cancels its own message if it has not
// left and writes its reversal (of source src, issued at r.At) with its
// outbox message; it returns the reversal, nil when there is none.
func reverseRow(ctx context.Context, tx *sql.Tx, a actionRow, r moderation.Reversal, src pipeline.ActionSource) (*pipeline.ProtectiveAction, error) {
	// An overturn's reversal names its decision: undoing that overturn
	// re-applies what it reversed, and nothing a moderator reversed by key
	// or a policy change retracted (DecisionID 0, NULL).
	if _, err := tx.ExecContext(ctx, "UPDATE protective_actions SET state = 'reversed', reversed_by_decision = ? WHERE idempotency_key = ?",
		nullID(int64(r.DecisionID)), a.key); err != nil {
		return nil, classify(fmt.Errorf("mysql: reverse actions: mark: %w", err))
	}
	undo := pipeline.ActionKind(a.action).ReversedBy()
	if a.mode != string(pipeline.ModeOn) || undo == "" {
		return nil, nil
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
	rev.Source = src
	if err := writeActions(ctx, tx, []pipeline.ActionRecord{{ProtectiveAction: rev, Key: r.Key}}); err != nil {
		return nil, classify(err)
	}
	return &rev, nil
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

// ReapplyActions implements moderation.ProtectiveActions.
func (s *Store) ReapplyActions(ctx context.Context, r moderation.Reversal) ([]pipeline.ProtectiveAction, error) {
	tx, err := s.db.BeginTx(ctx, saveTx)
	if err != nil {
		return nil, classify(fmt.Errorf("mysql: reapply actions: begin: %w", err))
	}
	defer func() { _ = tx.Rollback() }()
	bodies, err := lockReversedActions(ctx, tx, r.Key, r.DecisionID)
	if err != nil {
		return nil, err
	}
	var out []pipeline.ProtectiveAction
	for _, a := range bodies {
		if _, err := tx.ExecContext(ctx, "UPDATE protective_actions SET state = 'written', reversed_by_decision = NULL WHERE idempotency_key = ?", a.IdempotencyKey); err != nil {
			return nil, classify(fmt.Errorf("mysql: reapply actions: mark: %w", err))
		}
		if a.Mode != pipeline.ModeOn || a.Action.ID.ReversedBy() == "" {
			continue
		}
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM protective_actions WHERE reverses = ? AND action = ?",
			a.IdempotencyKey, string(a.Action.ID)).Scan(&n); err != nil {
			return nil, classify(fmt.Errorf("mysql: reapply actions: generation: %w", err))
		}
		again := a
		again.IdempotencyKey, again.Reverses = pipeline.ReapplyActionKey(a.IdempotencyKey, n+1), a.IdempotencyKey
		again.IssuedAt, again.ExpiresAt = r.At.UTC(), r.At.UTC().Add(a.ExpiresAt.Sub(a.IssuedAt))
		if a.Custom.Until != nil {
			until := r.At.UTC().Add(a.Custom.Until.Sub(a.IssuedAt))
			again.Custom.Until = &until
		}
		if err := writeActions(ctx, tx, []pipeline.ActionRecord{{ProtectiveAction: again, Key: r.Key}}); err != nil {
			return nil, classify(err)
		}
		out = append(out, again)
	}
	if len(bodies) > 0 {
		if _, err := tx.ExecContext(ctx, "DELETE FROM action_clearances WHERE decision_id = ?", r.DecisionID); err != nil {
			return nil, classify(fmt.Errorf("mysql: reapply actions: clearances: %w", err))
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, classify(fmt.Errorf("mysql: reapply actions: commit: %w", err))
	}
	return out, nil
}

// lockReversedActions reads and locks the bodies of the forward actions
// about key that the overturn decision reversed.
func lockReversedActions(ctx context.Context, tx *sql.Tx, key pipeline.ReviewKey, decision uint64) ([]pipeline.ProtectiveAction, error) {
	rows, err := tx.QueryContext(ctx, `SELECT body FROM protective_actions WHERE room_id = ? AND window_start = ? AND window_end = ?
		  AND pipeline_version = ? AND reverses IS NULL AND state = 'reversed' AND reversed_by_decision = ? AND body IS NOT NULL
		  ORDER BY id FOR UPDATE`,
		key.RoomID, dbTime(key.WindowStart), dbTime(key.WindowEnd), key.PipelineVersion, decision)
	if err != nil {
		return nil, classify(fmt.Errorf("mysql: reapply actions: read: %w", err))
	}
	defer rows.Close()
	var out []pipeline.ProtectiveAction
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, classify(fmt.Errorf("mysql: reapply actions: read: %w", err))
		}
		var a pipeline.ProtectiveAction
		if err := json.Unmarshal(b, &a); err != nil {
			return nil, pipeline.Permanent(fmt.Errorf("mysql: reapply actions: stored body: %w", err))
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("mysql: reapply actions: read: %w", err))
	}
	return out, nil
}
