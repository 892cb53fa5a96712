package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

var _ pipeline.StopAudit = (*Store)(nil)

// RecordStop appends e to the stop_signals table (migration 00008, which
// refuses UPDATE and DELETE). Free-text fields are clipped to their column
// sizes so a long reason is stored cut rather than refused.
func (s *Store) RecordStop(ctx context.Context, e pipeline.StopAuditEntry) error {
	nullTime := func(t time.Time) sql.NullTime {
		return sql.NullTime{Time: t.UTC(), Valid: !t.IsZero()}
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO stop_signals
		(requested_at, identity, remote_addr, outcome, http_status, scope, room_id, run_id, window_start, window_end, ttl_seconds, reason, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.RequestedAt.UTC(), pipeline.ClipRunes(e.Identity, 128), pipeline.ClipRunes(e.RemoteAddr, 64), string(e.Outcome), e.HTTPStatus,
		string(e.Scope), pipeline.ClipRunes(e.RoomID, 128), pipeline.ClipRunes(e.RunID, 128), nullTime(e.WindowStart), nullTime(e.WindowEnd),
		int64(e.TTL/time.Second), pipeline.ClipRunes(e.Reason, 1000), pipeline.ClipRunes(e.Detail, 1000))
	if err != nil {
		return fmt.Errorf("mysql: record stop: %w", err)
	}
	return nil
}
