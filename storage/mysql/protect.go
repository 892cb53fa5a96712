package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// Protective actions (migrations 00028, 00029): the actions a verdict's
// save writes (protective_actions, with the outbox rows of the `on` ones),
// the notices' suppression slots (notice_suppressions) and the cleared
// states an overturn records (action_clearances).

var _ pipeline.ActionStore = (*Store)(nil)

// writeActions writes the actions of a committed save in its transaction:
// a notice whose suppression slot another notice holds is left out whole
// (no row, no message); every other action gets its row, its lake event
// (pipeline.ActionWrittenEvent) and, when `on`, its queue message, under
// its key (a redelivered review's second write of a key keeps the first).
func writeActions(ctx context.Context, tx *sql.Tx, recs []pipeline.ActionRecord) error {
	var msgs []pipeline.OutboxMessage
	for _, r := range recs {
		if !r.SuppressUntil.IsZero() {
			won, err := claimSuppression(ctx, tx, r)
			if err != nil {
				return err
			}
			if !won {
				continue
			}
		}
		if err := insertAction(ctx, tx, r); err != nil {
			return err
		}
		m, err := actionMessages(r)
		if err != nil {
			return err
		}
		msgs = append(msgs, m...)
	}
	if err := insertOutbox(ctx, tx, time.Time{}, msgs); err != nil {
		return fmt.Errorf("mysql: save actions: %w", err)
	}
	return nil
}

// actionMessages are the outbox messages of a written action: its lake
// event, and its queue message when it is `on`.
func actionMessages(r pipeline.ActionRecord) ([]pipeline.OutboxMessage, error) {
	msgs, err := pipeline.ActionLakeMessages(r)
	if err != nil {
		return nil, pipeline.Permanent(fmt.Errorf("mysql: save actions: %w", err))
	}
	if r.Mode != pipeline.ModeOn {
		return msgs, nil
	}
	m, err := pipeline.ActionOutboxMessage(r.ProtectiveAction)
	if err != nil {
		return nil, pipeline.Permanent(fmt.Errorf("mysql: save actions: %w", err))
	}
	return append(msgs, m), nil
}

// claimSuppression takes the notice's slot unless another notice holds it
// past the notice's issue: the upsert changes the row (2 rows affected, or
// 1 for a new row) only when the slot was free, and a held slot is left
// unchanged (0). The same key written again (a redelivery) finds its own
// slot held and is left out, which is what its first write already did.
func claimSuppression(ctx context.Context, tx *sql.Tx, r pipeline.ActionRecord) (bool, error) {
	res, err := tx.ExecContext(ctx, `INSERT INTO notice_suppressions (room_id, account_id, rule_id, until) VALUES (?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE until = IF(until > ?, until, VALUES(until))`,
		r.Item.ID, r.Creator.ID, ruleOf(r.ProtectiveAction), dbTime(r.SuppressUntil), dbTime(r.IssuedAt))
	if err != nil {
		return false, fmt.Errorf("mysql: save actions: suppression: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("mysql: save actions: suppression: %w", err)
	}
	return n > 0, nil
}

func ruleOf(a pipeline.ProtectiveAction) string {
	if len(a.Rules) == 0 {
		return ""
	}
	return a.Rules[0].ID
}

// insertAction writes one action's row; a key already written keeps its
// row.
func insertAction(ctx context.Context, db execer, r pipeline.ActionRecord) error {
	a := r.ProtectiveAction
	var msgAt any
	if a.MessageAt != nil {
		msgAt = dbTime(*a.MessageAt)
	}
	body, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("mysql: save actions: encode: %w", err)
	}
	_, err = db.ExecContext(ctx, `INSERT INTO protective_actions (idempotency_key, room_id, account_id, rule_id, action, mode, source,
		reverses, window_start, window_end, pipeline_version, verdict_revision, policy_version, policy_hash, message_at, created_at, expires_at, body)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE id = id`,
		a.IdempotencyKey, a.Item.ID, a.Creator.ID, ruleOf(a), string(a.Action.ID), string(a.Mode), string(a.Source),
		nullString(a.Reverses), nullTime(r.Key.WindowStart), nullTime(r.Key.WindowEnd), r.Key.PipelineVersion, a.VerdictRevision,
		a.PolicyVersion, a.PolicyHash, msgAt, dbTime(a.IssuedAt), dbTime(a.ExpiresAt), body)
	if err != nil {
		return fmt.Errorf("mysql: save actions: insert: %w", err)
	}
	return nil
}

// ActionState implements pipeline.ActionLedger.
func (s *Store) ActionState(ctx context.Context, q pipeline.ActionStateQuery) (pipeline.ActionState, error) {
	st := pipeline.ActionState{RuleToday: map[string]int{}, HeavyToday: map[string]int{}, Suppressed: map[string]bool{}, Cleared: map[string]bool{}}
	now := dbTime(q.Now)
	if len(q.Rules) > 0 {
		err := s.scanCounts(ctx, st.RuleToday, `SELECT rule_id, COUNT(*) FROM protective_actions
			WHERE rule_id IN (`+marks(len(q.Rules))+`) AND created_at >= ? AND reverses IS NULL GROUP BY rule_id`,
			append(strArgs(q.Rules), now.Truncate(24*time.Hour))...)
		if err != nil {
			return st, err
		}
	}
	if len(q.Accounts) == 0 {
		return st, nil
	}
	accts := strArgs(q.Accounts)
	err := s.scanCounts(ctx, st.HeavyToday, `SELECT account_id, COUNT(*) FROM protective_actions
		WHERE account_id IN (`+marks(len(q.Accounts))+`) AND created_at >= ? AND reverses IS NULL
		  AND action IN ('hold_transaction', 'restrict_sender') AND state = 'written' GROUP BY account_id`,
		append(accts, now.Add(-24*time.Hour))...)
	if err != nil {
		return st, err
	}
	err = s.scanPairs(ctx, func(a, r string) { st.Suppressed[pipeline.ActionSuppressKey(q.RoomID, a, r)] = true },
		`SELECT account_id, rule_id FROM notice_suppressions WHERE room_id = ? AND account_id IN (`+marks(len(q.Accounts))+`) AND until > ?`,
		append(append([]any{q.RoomID}, accts...), now)...)
	if err != nil {
		return st, err
	}
	err = s.scanPairs(ctx, func(a, r string) { st.Cleared[pipeline.ActionClearedKey(a, r)] = true },
		`SELECT account_id, rule_id FROM action_clearances WHERE account_id IN (`+marks(len(q.Accounts))+`) AND until > ?`,
		append(accts, now)...)
	return st, err
}

// RecordClearances implements pipeline.ActionStore.
func (s *Store) RecordClearances(ctx context.Context, now time.Time, decisionID int64, cs []pipeline.ActionClearance) error {
	return insertClearances(ctx, s.db, now, uint64(max(decisionID, 0)), cs)
}

func nullID(id int64) any {
	if id <= 0 {
		return nil
	}
	return id
}

func (s *Store) scanCounts(ctx context.Context, into map[string]int, query string, args ...any) error {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return classify(fmt.Errorf("mysql: action state: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return classify(fmt.Errorf("mysql: action state: %w", err))
		}
		into[k] = n
	}
	if err := rows.Err(); err != nil {
		return classify(fmt.Errorf("mysql: action state: %w", err))
	}
	return nil
}

func (s *Store) scanPairs(ctx context.Context, each func(a, b string), query string, args ...any) error {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return classify(fmt.Errorf("mysql: action state: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var a, b string
		if err := rows.Scan(&a, &b); err != nil {
			return classify(fmt.Errorf("mysql: action state: %w", err))
		}
		each(a, b)
	}
	if err := rows.Err(); err != nil {
		return classify(fmt.Errorf("mysql: action state: %w", err))
	}
	return nil
}

func marks(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

func strArgs(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// checkActions refuses, before any write, an action the strict writer
// refuses, as a *pipeline.PermanentError.
func checkActions(recs []pipeline.ActionRecord) error {
	for _, r := range recs {
		if err := r.Validate(); err != nil {
			return pipeline.Permanent(fmt.Errorf("actions: %w", err))
		}
	}
	return nil
}
