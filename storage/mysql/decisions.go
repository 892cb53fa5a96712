package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// The console's reads and writes: a verdict by its row id (the
// queue's links carry it) and the moderators' decisions on it.

// VerdictByID returns the revision of row id with its stage results,
// whether it is its key's current revision or a superseded one
// (Verdict.SupersededAt says), or an error wrapping
// pipeline.ErrVerdictNotFound.
func (s *Store) VerdictByID(ctx context.Context, id uint64) (pipeline.Verdict, error) {
	v, err := s.readRevision(ctx, id)
	if err != nil {
		return pipeline.Verdict{}, fmt.Errorf("mysql: verdict %d: %w", id, err)
	}
	return v, nil
}

// VerdictID returns the row id of the current revision of the verdict
// under key, or an error wrapping pipeline.ErrVerdictNotFound.
func (s *Store) VerdictID(ctx context.Context, key pipeline.ReviewKey) (uint64, error) {
	var id uint64
	err := s.db.QueryRowContext(ctx, currentIDSQL,
		key.RoomID, dbTime(key.WindowStart), dbTime(key.WindowEnd), key.PipelineVersion).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("mysql: verdict id %s: %w", key, pipeline.ErrVerdictNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("mysql: verdict id: %w", err)
	}
	return id, nil
}

// AddDecision records d and returns its row id. It returns a
// *pipeline.PermanentError when d is invalid (unknown decision, label or
// category, no moderator, a verdict id no row has), when a confirm or
// overturn does not mean what it says about its verdict
// (moderation.Decision.CheckAgainst), and when an undo names a decision it
// may not reverse (moderation.ErrCannotUndo).
func (s *Store) AddDecision(ctx context.Context, d moderation.Decision) (uint64, error) {
	if err := d.Validate(); err != nil {
		return 0, pipeline.Permanent(fmt.Errorf("mysql: add decision: %w", err))
	}
	if d.Decision == moderation.DecisionUndo {
		return s.addUndo(ctx, d)
	}
	// A verdict row's label and category never change (a re-review is a
	// revision of its own), so the check needs no lock.
	var label, cat string
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(label, ''), COALESCE(category, '') FROM verdicts WHERE id = ?`, d.VerdictID).Scan(&label, &cat)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, pipeline.Permanent(fmt.Errorf("mysql: add decision: verdict %d: %w", d.VerdictID, pipeline.ErrVerdictNotFound))
	}
	if err != nil {
		return 0, fmt.Errorf("mysql: add decision: %w", err)
	}
	if err := d.CheckAgainst(pipeline.Label(label), pipeline.Category(cat)); err != nil {
		return 0, pipeline.Permanent(fmt.Errorf("mysql: add decision: %w", err))
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO moderator_decisions (verdict_id, moderator, decision, label, category, note, audit, decided_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, d.VerdictID, d.Moderator, d.Decision, string(d.Label), string(d.Category),
		nullString(pipeline.ClipRunes(d.Note, moderation.MaxNoteRunes)), d.Audit, dbTime(d.DecidedAt))
	if err != nil {
		if isForeignKey(err) {
			return 0, pipeline.Permanent(fmt.Errorf("mysql: add decision: verdict %d: %w", d.VerdictID, pipeline.ErrVerdictNotFound))
		}
		return 0, fmt.Errorf("mysql: add decision: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("mysql: add decision: %w", err)
	}
	return uint64(id), nil
}

// addUndo records undo d: in one transaction, with the verdict's decisions
// locked (so that two undos, or an undo and a decision, of one verdict
// take turns), it checks that d.Reverses is the decision in force and
// d.Moderator's, inserts the undo with that decision's label and category
// (unsent: the outbox owes its feedback event), and marks the
// decision reversed. The unique key on reverses_id is the last word on
// two undos of one decision.
func (s *Store) addUndo(ctx context.Context, d moderation.Decision) (uint64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("mysql: undo: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var (
		in        moderation.Decision
		label, ct string
	)
	err = tx.QueryRowContext(ctx, `SELECT id, moderator, label, category FROM moderator_decisions
		WHERE verdict_id = ? AND decision <> 'undo' AND reversed_at IS NULL ORDER BY decided_at DESC, id DESC LIMIT 1 FOR UPDATE`,
		d.VerdictID).Scan(&in.ID, &in.Moderator, &label, &ct)
	if errors.Is(err, sql.ErrNoRows) {
		err = tx.QueryRowContext(ctx, `SELECT id FROM verdicts WHERE id = ?`, d.VerdictID).Scan(new(uint64))
		if errors.Is(err, sql.ErrNoRows) {
			return 0, pipeline.Permanent(fmt.Errorf("mysql: undo: verdict %d: %w", d.VerdictID, pipeline.ErrVerdictNotFound))
		}
		if err == nil {
			return 0, pipeline.Permanent(fmt.Errorf("mysql: undo of decision %d: nothing in force: %w", d.Reverses, moderation.ErrCannotUndo))
		}
	}
	if err != nil {
		return 0, fmt.Errorf("mysql: undo: %w", err)
	}
	if in.ID != d.Reverses || in.Moderator != d.Moderator {
		return 0, pipeline.Permanent(fmt.Errorf("mysql: undo of decision %d: %w", d.Reverses, moderation.ErrCannotUndo))
	}
	at := dbTime(d.DecidedAt)
	res, err := tx.ExecContext(ctx, `INSERT INTO moderator_decisions (verdict_id, moderator, decision, reverses_id, label, category, note, audit, decided_at)
		VALUES (?, ?, 'undo', ?, ?, ?, ?, ?, ?)`, d.VerdictID, d.Moderator, d.Reverses, label, ct,
		nullString(pipeline.ClipRunes(d.Note, moderation.MaxNoteRunes)), d.Audit, at)
	if isDuplicate(err) {
		return 0, pipeline.Permanent(fmt.Errorf("mysql: undo of decision %d: undone already: %w", d.Reverses, moderation.ErrCannotUndo))
	}
	if err != nil {
		return 0, fmt.Errorf("mysql: undo: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("mysql: undo: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE moderator_decisions SET reversed_at = ? WHERE id = ?`, at, d.Reverses); err != nil {
		return 0, fmt.Errorf("mysql: undo: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("mysql: undo: %w", err)
	}
	return uint64(id), nil
}

// Decisions returns the decisions on verdict id, newest first (the first
// is the one in force), at most limit.
func (s *Store) Decisions(ctx context.Context, verdictID uint64, limit int) ([]moderation.Decision, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, verdict_id, moderator, decision, COALESCE(reverses_id, 0), reversed_at, label, category,
		COALESCE(note, ''), audit, decided_at, feedback_sent_at FROM moderator_decisions WHERE verdict_id = ? ORDER BY decided_at DESC, id DESC LIMIT ?`, verdictID, limit)
	if err != nil {
		return nil, fmt.Errorf("mysql: decisions: %w", err)
	}
	defer rows.Close()
	var out []moderation.Decision
	for rows.Next() {
		var (
			d          moderation.Decision
			label, cat string
			sent, rev  sql.NullTime
		)
		if err := rows.Scan(&d.ID, &d.VerdictID, &d.Moderator, &d.Decision, &d.Reverses, &rev, &label, &cat, &d.Note, &d.Audit, &d.DecidedAt, &sent); err != nil {
			return nil, fmt.Errorf("mysql: decisions: %w", err)
		}
		d.Label, d.Category, d.DecidedAt = pipeline.Label(label), pipeline.Category(cat), d.DecidedAt.UTC()
		if sent.Valid {
			d.FeedbackSentAt = sent.Time.UTC()
		}
		if rev.Valid {
			d.ReversedAt = rev.Time.UTC()
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: decisions: %w", err)
	}
	return out, nil
}

// isForeignKey reports a row that refers to a missing parent (1452).
func isForeignKey(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1452
}
