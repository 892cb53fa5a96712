package mysql

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

var _ pipeline.StopAudit = (*Store)(nil)

// ErrStopNotPending is returned (wrapped) by FinishStop when the entry
// does not exist or already has its outcome.
var ErrStopNotPending = errors.New("no pending stop entry with that id")

// RecordStop appends e, finished, to the stop_signals table (migrations
// 00008 and 00011: the database refuses DELETE, and any UPDATE but a
// pending row's outcome). Free-text fields are clipped to their column
// sizes so a long reason is stored cut rather than refused.
func (s *Store) RecordStop(ctx context.Context, e pipeline.StopAuditEntry) error {
	if e.FinishedAt.IsZero() {
		e.FinishedAt = e.RequestedAt
	}
	if _, err := s.insertStop(ctx, e); err != nil {
		return fmt.Errorf("mysql: record stop: %w", err)
	}
	return nil
}

// BeginStop appends e as pending (its Outcome, HTTPStatus and FinishedAt
// are ignored) and returns the row's id for FinishStop.
func (s *Store) BeginStop(ctx context.Context, e pipeline.StopAuditEntry) (int64, error) {
	e.Outcome, e.HTTPStatus, e.FinishedAt = pipeline.StopPending, 0, time.Time{}
	id, err := s.insertStop(ctx, e)
	if err != nil {
		return 0, fmt.Errorf("mysql: begin stop: %w", err)
	}
	return id, nil
}

// FinishStop records e's outcome, HTTP status, detail and finish time
// (the database's clock when zero) on the pending row id. A row that is
// not pending is not changed: ErrStopNotPending.
func (s *Store) FinishStop(ctx context.Context, id int64, e pipeline.StopAuditEntry) error {
	res, err := s.db.ExecContext(ctx, `UPDATE stop_signals SET outcome = ?, http_status = ?, detail = ?, finished_at = COALESCE(?, UTC_TIMESTAMP(6))
		WHERE id = ? AND outcome = 'pending'`,
		string(e.Outcome), e.HTTPStatus, pipeline.ClipRunes(e.Detail, 1000), nullTime(e.FinishedAt), id)
	if err != nil {
		return fmt.Errorf("mysql: finish stop %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("mysql: finish stop %d: %w", id, err)
	}
	if n != 1 {
		return fmt.Errorf("mysql: finish stop %d: %w", id, ErrStopNotPending)
	}
	return nil
}

func (s *Store) insertStop(ctx context.Context, e pipeline.StopAuditEntry) (int64, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO stop_signals
		(requested_at, finished_at, identity, moderator, remote_addr, outcome, http_status, scope, room_id, run_id, window_start, window_end, ttl_seconds, reason, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.RequestedAt.UTC(), nullTime(e.FinishedAt), pipeline.ClipRunes(e.Identity, 128), pipeline.ClipRunes(e.Moderator, 128), pipeline.ClipRunes(e.RemoteAddr, 64), string(e.Outcome), e.HTTPStatus,
		string(e.Scope), pipeline.ClipRunes(e.RoomID, 128), pipeline.ClipRunes(e.RunID, 128), nullTime(e.WindowStart), nullTime(e.WindowEnd),
		int64(e.TTL/time.Second), pipeline.ClipRunes(e.Reason, 1000), pipeline.ClipRunes(e.Detail, 1000))
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}
