package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// The console's reads and writes: a verdict by its row id (the
// queue's links carry it) and the moderators' decisions on it.

// VerdictByID returns the verdict of row id with its stage results, or an
// error wrapping pipeline.ErrVerdictNotFound.
func (s *Store) VerdictByID(ctx context.Context, id uint64) (pipeline.Verdict, error) {
	var (
		room, version string
		ws, we        time.Time
	)
	err := s.db.QueryRowContext(ctx, `SELECT room_id, window_start, window_end, pipeline_version FROM verdicts WHERE id = ?`, id).
		Scan(&room, &ws, &we, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return pipeline.Verdict{}, fmt.Errorf("mysql: verdict %d: %w", id, pipeline.ErrVerdictNotFound)
	}
	if err != nil {
		return pipeline.Verdict{}, fmt.Errorf("mysql: verdict %d: %w", id, err)
	}
	return s.Get(ctx, pipeline.ReviewKey{RoomID: room, WindowStart: ws.UTC(), WindowEnd: we.UTC(), PipelineVersion: version})
}

// VerdictID returns the row id of the verdict under key, or an error
// wrapping pipeline.ErrVerdictNotFound.
func (s *Store) VerdictID(ctx context.Context, key pipeline.ReviewKey) (uint64, error) {
	var id uint64
	err := s.db.QueryRowContext(ctx, `SELECT id FROM verdicts WHERE room_id = ? AND window_start = ? AND window_end = ? AND pipeline_version = ?`,
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
// category, no moderator, a verdict id no row has).
func (s *Store) AddDecision(ctx context.Context, d moderation.Decision) (uint64, error) {
	if err := d.Validate(); err != nil {
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

// Decisions returns the decisions on verdict id, newest first (the first
// is the one in force), at most limit.
func (s *Store) Decisions(ctx context.Context, verdictID uint64, limit int) ([]moderation.Decision, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, verdict_id, moderator, decision, label, category, COALESCE(note, ''), audit, decided_at, feedback_sent_at
		FROM moderator_decisions WHERE verdict_id = ? ORDER BY decided_at DESC, id DESC LIMIT ?`, verdictID, limit)
	if err != nil {
		return nil, fmt.Errorf("mysql: decisions: %w", err)
	}
	defer rows.Close()
	var out []moderation.Decision
	for rows.Next() {
		var (
			d          moderation.Decision
			label, cat string
			sent       sql.NullTime
		)
		if err := rows.Scan(&d.ID, &d.VerdictID, &d.Moderator, &d.Decision, &label, &cat, &d.Note, &d.Audit, &d.DecidedAt, &sent); err != nil {
			return nil, fmt.Errorf("mysql: decisions: %w", err)
		}
		d.Label, d.Category, d.DecidedAt = pipeline.Label(label), pipeline.Category(cat), d.DecidedAt.UTC()
		if sent.Valid {
			d.FeedbackSentAt = sent.Time.UTC()
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
