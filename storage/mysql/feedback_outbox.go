package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// The moderator_decisions row is the outbox of its moderator_feedback lake
// event (migration 00010): feedback_sent_at is set once SQS has accepted
// the event, and the console's sweeper resends the rows where it is still
// NULL after a grace period.

// UnsentFeedback is a decision whose moderator_feedback event SQS has not
// accepted yet, with what of its verdict the event carries.
type UnsentFeedback struct {
	Decision Decision
	// Key, VerdictLabel, VerdictCategory and Action are the verdict row's
	// as they are now (a re-review between the decision and the resend
	// shows in the resent event).
	Key             pipeline.ReviewKey
	VerdictLabel    pipeline.Label
	VerdictCategory pipeline.Category
	Action          pipeline.Action
}

// MarkFeedbackSent records that SQS accepted the feedback events of the
// decisions ids at time at. A row already marked keeps its first time; an
// unknown id is ignored. It honours ctx.
func (s *Store) MarkFeedbackSent(ctx context.Context, at time.Time, ids ...uint64) error {
	if len(ids) == 0 {
		return nil
	}
	if err := markFeedbackSent(ctx, s.db, at, ids); err != nil {
		return fmt.Errorf("mysql: mark feedback sent: %w", err)
	}
	return nil
}

// execer is a *sql.DB or a *sql.Tx, for statements that run alone or
// inside a larger transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func markFeedbackSent(ctx context.Context, db execer, at time.Time, ids []uint64) error {
	args := make([]any, 0, len(ids)+1)
	args = append(args, dbTime(at))
	for _, id := range ids {
		args = append(args, id)
	}
	_, err := db.ExecContext(ctx, `UPDATE moderator_decisions SET feedback_sent_at = ?
		WHERE feedback_sent_at IS NULL AND id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`, args...)
	return err
}

// SweepUnsentFeedback takes up to limit decisions decided before now-grace
// whose feedback is unsent, oldest first, and hands them to send; the ids
// send returns are marked sent at now. The rows stay locked (SELECT … FOR
// UPDATE SKIP LOCKED) in one transaction until they are marked, so a
// second console sweeping at the same time takes other rows instead of
// sending the same events again. send should be bounded by its context;
// the ids it returns are marked even when it also returns an error (a
// partial batch). A ctx that ends before the commit rolls the marks back
// (the events are then sent again later, with the same ids), so callers
// that stop pass a context that outlives one send. It returns how many rows
// were taken and how many marked, and the error of send (as is) or of the
// database (wrapped).
func (s *Store) SweepUnsentFeedback(ctx context.Context, now time.Time, grace time.Duration, limit int,
	send func(ctx context.Context, rows []UnsentFeedback) (sent []uint64, err error)) (taken, marked int, err error) {
	if limit < 1 {
		return 0, 0, pipeline.Permanent(errors.New("mysql: sweep feedback: limit must be positive"))
	}
	// READ COMMITTED: no gap locks, so a decision inserted during a sweep
	// (the request path) never waits for the sweep's send.
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, 0, fmt.Errorf("mysql: sweep feedback: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	// The index, walked in order and stopped at limit, locks only the rows
	// taken; a scan and sort would lock every unsent row and leave a
	// second console nothing to take.
	rows, err := tx.QueryContext(ctx, `SELECT id FROM moderator_decisions FORCE INDEX (ix_moderator_decisions_feedback_unsent)
		WHERE feedback_sent_at IS NULL AND decided_at < ?
		ORDER BY decided_at LIMIT ? FOR UPDATE SKIP LOCKED`, dbTime(now.Add(-grace)), limit)
	if err != nil {
		return 0, 0, fmt.Errorf("mysql: sweep feedback: %w", err)
	}
	var ids []any
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, 0, fmt.Errorf("mysql: sweep feedback: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("mysql: sweep feedback: %w", err)
	}
	if len(ids) == 0 {
		return 0, 0, nil
	}
	// The verdict rows are read, not locked: a worker saving a verdict
	// never waits on a sweep.
	rows, err = tx.QueryContext(ctx, `SELECT d.id, d.verdict_id, d.moderator, d.decision, d.label, d.category, COALESCE(d.note, ''), d.decided_at,
			v.room_id, v.window_start, v.window_end, v.pipeline_version, v.label, v.category, v.action
		FROM moderator_decisions d JOIN verdicts v ON v.id = d.verdict_id
		WHERE d.id IN (?`+strings.Repeat(", ?", len(ids)-1)+`) ORDER BY d.decided_at, d.id`, ids...)
	if err != nil {
		return 0, 0, fmt.Errorf("mysql: sweep feedback: %w", err)
	}
	var batch []UnsentFeedback
	for rows.Next() {
		var (
			u                        UnsentFeedback
			label, cat, vlabel, vcat string
			action                   string
			windowStart, windowEnd   time.Time
		)
		if err := rows.Scan(&u.Decision.ID, &u.Decision.VerdictID, &u.Decision.Moderator, &u.Decision.Decision, &label, &cat,
			&u.Decision.Note, &u.Decision.DecidedAt, &u.Key.RoomID, &windowStart, &windowEnd, &u.Key.PipelineVersion,
			&vlabel, &vcat, &action); err != nil {
			rows.Close()
			return 0, 0, fmt.Errorf("mysql: sweep feedback: %w", err)
		}
		u.Decision.Label, u.Decision.Category, u.Decision.DecidedAt = pipeline.Label(label), pipeline.Category(cat), u.Decision.DecidedAt.UTC()
		u.Key.WindowStart, u.Key.WindowEnd = windowStart.UTC(), windowEnd.UTC()
		u.VerdictLabel, u.VerdictCategory, u.Action = pipeline.Label(vlabel), pipeline.Category(vcat), pipeline.Action(action)
		batch = append(batch, u)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("mysql: sweep feedback: %w", err)
	}
	sent, sendErr := send(ctx, batch)
	if len(sent) > 0 {
		if err := markFeedbackSent(ctx, tx, now, sent); err != nil {
			return len(batch), 0, errors.Join(sendErr, fmt.Errorf("mysql: sweep feedback: mark: %w", err))
		}
		if err := tx.Commit(); err != nil {
			return len(batch), 0, errors.Join(sendErr, fmt.Errorf("mysql: sweep feedback: commit: %w", err))
		}
	}
	return len(batch), len(sent), sendErr
}

// FeedbackBacklog returns how many decisions' feedback is unsent and when
// the oldest of them was decided (zero when none). It reads only the
// unsent end of ix_moderator_decisions_feedback_unsent.
func (s *Store) FeedbackBacklog(ctx context.Context) (n int, oldest time.Time, err error) {
	var o sql.NullTime
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), MIN(decided_at) FROM moderator_decisions WHERE feedback_sent_at IS NULL`).
		Scan(&n, &o); err != nil {
		return 0, time.Time{}, fmt.Errorf("mysql: feedback backlog: %w", err)
	}
	if o.Valid {
		oldest = o.Time.UTC()
	}
	return n, oldest, nil
}
