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

// The moderator_decisions row is the outbox of its moderator_feedback lake
// event (migration 00010): feedback_sent_at is set once SQS has accepted
// the event, and the console's sweeper resends the rows where it is still
// NULL after a grace period.

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
// whose feedback is unsent, not rejected and not deferred past now, oldest
// first, and hands them to send, which returns one moderation.FeedbackSend per row
// (in order). Sent rows are marked sent at now, rejected rows rejected at
// now with their reason, and the others get one more failed attempt and
// their RetryAt. The rows stay locked (SELECT … FOR UPDATE SKIP LOCKED) in
// one transaction until they are marked, so a second console sweeping at
// the same time takes other rows instead of sending the same events again.
// send should be bounded by its context; its results are applied even when
// it also returns an error (a partial batch). A result list of the wrong
// length marks nothing. A ctx that ends before the commit rolls the marks
// back (the events are then sent again later, with the same ids), so
// callers that stop pass a context that outlives one send. It returns what
// it did and the error of send (as is) or of the database (wrapped).
func (s *Store) SweepUnsentFeedback(ctx context.Context, now time.Time, grace time.Duration, limit int,
	send func(ctx context.Context, rows []moderation.UnsentFeedback) ([]moderation.FeedbackSend, error)) (moderation.FeedbackSweep, error) {
	var out moderation.FeedbackSweep
	if limit < 1 {
		return out, pipeline.Permanent(errors.New("mysql: sweep feedback: limit must be positive"))
	}
	// READ COMMITTED: no gap locks, so a decision inserted during a sweep
	// (the request path) never waits for the sweep's send.
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return out, fmt.Errorf("mysql: sweep feedback: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	// The index, walked in order and stopped at limit, locks only the rows
	// taken; a scan and sort would lock every unsent row and leave a
	// second console nothing to take. Rejected rows are outside the range
	// walked; deferred ones are read and passed over.
	rows, err := tx.QueryContext(ctx, `SELECT id FROM moderator_decisions FORCE INDEX (ix_moderator_decisions_feedback_unsent)
		WHERE feedback_sent_at IS NULL AND feedback_rejected_at IS NULL AND decided_at < ?
		  AND (feedback_next_attempt_at IS NULL OR feedback_next_attempt_at <= ?)
		ORDER BY decided_at LIMIT ? FOR UPDATE SKIP LOCKED`, dbTime(now.Add(-grace)), dbTime(now), limit)
	if err != nil {
		return out, fmt.Errorf("mysql: sweep feedback: %w", err)
	}
	var ids []any
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return out, fmt.Errorf("mysql: sweep feedback: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("mysql: sweep feedback: %w", err)
	}
	if len(ids) == 0 {
		return out, nil
	}
	batch, err := unsentRows(ctx, tx, ids)
	if err != nil {
		return out, err
	}
	out.Taken = len(batch)
	results, sendErr := send(ctx, batch)
	if len(results) != len(batch) {
		return out, errors.Join(sendErr, fmt.Errorf("mysql: sweep feedback: %d results for %d rows: nothing marked", len(results), len(batch)))
	}
	var sent []uint64
	for i, r := range results {
		id := batch[i].Decision.ID
		switch {
		case r.Sent:
			sent = append(sent, id)
		case r.Rejected != "":
			if _, err := tx.ExecContext(ctx, `UPDATE moderator_decisions SET feedback_rejected_at = ?, feedback_reject_reason = ?
				WHERE id = ? AND feedback_sent_at IS NULL`, dbTime(now), pipeline.ClipRunes(r.Rejected, moderation.MaxRejectReason), id); err != nil {
				return out, errors.Join(sendErr, fmt.Errorf("mysql: sweep feedback: mark rejected: %w", err))
			}
			out.Rejected++
		default:
			if _, err := tx.ExecContext(ctx, `UPDATE moderator_decisions SET feedback_attempts = feedback_attempts + 1, feedback_next_attempt_at = ?
				WHERE id = ? AND feedback_sent_at IS NULL`, nullTime(r.RetryAt), id); err != nil {
				return out, errors.Join(sendErr, fmt.Errorf("mysql: sweep feedback: defer: %w", err))
			}
			out.Deferred++
		}
	}
	if len(sent) > 0 {
		if err := markFeedbackSent(ctx, tx, now, sent); err != nil {
			return moderation.FeedbackSweep{Taken: out.Taken}, errors.Join(sendErr, fmt.Errorf("mysql: sweep feedback: mark: %w", err))
		}
	}
	if err := tx.Commit(); err != nil {
		return moderation.FeedbackSweep{Taken: out.Taken}, errors.Join(sendErr, fmt.Errorf("mysql: sweep feedback: commit: %w", err))
	}
	out.Sent = len(sent)
	return out, sendErr
}

// unsentRows reads the taken rows with their verdicts. The verdict rows
// are read, not locked: a worker saving a verdict never waits on a sweep.
func unsentRows(ctx context.Context, tx *sql.Tx, ids []any) ([]moderation.UnsentFeedback, error) {
	rows, err := tx.QueryContext(ctx, `SELECT d.id, d.verdict_id, d.moderator, d.decision, COALESCE(d.reverses_id, 0), d.label, d.category, COALESCE(d.note, ''), d.audit, d.decided_at,
			d.feedback_attempts, v.room_id, v.window_start, v.window_end, v.pipeline_version, v.label, v.category, v.action
		FROM moderator_decisions d JOIN verdicts v ON v.id = d.verdict_id
		WHERE d.id IN (?`+strings.Repeat(", ?", len(ids)-1)+`) ORDER BY d.decided_at, d.id`, ids...)
	if err != nil {
		return nil, fmt.Errorf("mysql: sweep feedback: %w", err)
	}
	defer rows.Close()
	var batch []moderation.UnsentFeedback
	for rows.Next() {
		var (
			u                        moderation.UnsentFeedback
			label, cat, vlabel, vcat string
			action                   string
			windowStart, windowEnd   time.Time
		)
		if err := rows.Scan(&u.Decision.ID, &u.Decision.VerdictID, &u.Decision.Moderator, &u.Decision.Decision, &u.Decision.Reverses, &label, &cat,
			&u.Decision.Note, &u.Decision.Audit, &u.Decision.DecidedAt, &u.Attempts, &u.Key.RoomID, &windowStart, &windowEnd, &u.Key.PipelineVersion,
			&vlabel, &vcat, &action); err != nil {
			return nil, fmt.Errorf("mysql: sweep feedback: %w", err)
		}
		u.Decision.Label, u.Decision.Category, u.Decision.DecidedAt = pipeline.Label(label), pipeline.Category(cat), u.Decision.DecidedAt.UTC()
		u.Key.WindowStart, u.Key.WindowEnd = windowStart.UTC(), windowEnd.UTC()
		u.VerdictLabel, u.VerdictCategory, u.Action = pipeline.Label(vlabel), pipeline.Category(vcat), pipeline.Action(action)
		batch = append(batch, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: sweep feedback: %w", err)
	}
	return batch, nil
}

// FeedbackBacklog reads the outbox's state. It reads only the unsent end
// of ix_moderator_decisions_feedback_unsent.
func (s *Store) FeedbackBacklog(ctx context.Context) (moderation.FeedbackBacklog, error) {
	var (
		b        moderation.FeedbackBacklog
		unsent   sql.NullInt64
		rejected sql.NullInt64
		oldest   sql.NullTime
	)
	if err := s.db.QueryRowContext(ctx, `SELECT SUM(feedback_rejected_at IS NULL), MIN(CASE WHEN feedback_rejected_at IS NULL THEN decided_at END),
			SUM(feedback_rejected_at IS NOT NULL)
		FROM moderator_decisions WHERE feedback_sent_at IS NULL`).Scan(&unsent, &oldest, &rejected); err != nil {
		return b, fmt.Errorf("mysql: feedback backlog: %w", err)
	}
	b.Unsent, b.Rejected = int(unsent.Int64), int(rejected.Int64)
	if oldest.Valid {
		b.Oldest = oldest.Time.UTC()
	}
	return b, nil
}
