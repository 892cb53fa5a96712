package mysql

import (
	"context"
	"fmt"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// RecordAction appends r to moderation_actions (migration 00021: the
// database refuses UPDATE and DELETE) and returns its id. An invalid r is
// a *pipeline.PermanentError; any error means no row was written.
func (s *Store) RecordAction(ctx context.Context, r moderation.AuditRecord) (uint64, error) {
	if err := r.Validate(); err != nil {
		return 0, pipeline.Permanent(fmt.Errorf("mysql: record action: %w", err))
	}
	var verdictID, decisionID any
	if r.VerdictID != 0 {
		verdictID = r.VerdictID
	}
	if r.DecisionID != 0 {
		decisionID = r.DecisionID
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO moderation_actions
		(requested_at, moderator, action, verdict_id, room_id, mark, decision, label, category, override, holder, decision_id, rooms, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		dbTime(r.At), r.Moderator, string(r.Action), verdictID, r.RoomID, r.Mark, pipeline.ClipRunes(r.Decision, 16),
		pipeline.ClipRunes(string(r.Label), 16), pipeline.ClipRunes(string(r.Category), 32), r.Override, r.Holder, decisionID, r.Rooms,
		pipeline.ClipRunes(r.Detail, moderation.MaxAuditDetailRunes))
	if err != nil {
		return 0, fmt.Errorf("mysql: record action: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("mysql: record action: %w", err)
	}
	return uint64(id), nil
}
