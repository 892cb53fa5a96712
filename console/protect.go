package console

import (
	"context"
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// reversalTTL is how long a reversal is worth applying: a late lift of a
// restriction or release of a hold still matters, so it is long.
const reversalTTL = 7 * 24 * time.Hour

// reverseActions reverses the protective actions of the verdict key that
// decision d overturned, once d is recorded (and so audited: its
// "decide" row is written before it). A failure is logged: the decision
// stands, and the reversal is asked again by the next overturn of the
// verdict (ReverseActions is a no-op for what it already reversed).
func (s *server) reverseActions(ctx context.Context, key pipeline.ReviewKey, d moderation.Decision) {
	if s.actions == nil {
		return
	}
	now := s.clock.Now().UTC()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	revs, err := s.actions.ReverseActions(rctx, moderation.Reversal{Key: key, DecisionID: d.ID, At: now,
		ClearedUntil: now.Add(s.cfg.ActionsClearedFor), ExpiresAt: now.Add(reversalTTL)})
	if err != nil {
		s.log.Error("console: overturned, but its protective actions were not reversed", "decision_id", d.ID, "room_id", key.RoomID, "err", err)
		return
	}
	if len(revs) > 0 {
		s.log.Info("console: protective actions reversed", "decision_id", d.ID, "room_id", key.RoomID, "reversals", len(revs))
	}
}

// maxRoomActions bounds the actions a room page lists: a room acted on
// this often is a moderator's case anyway.
const maxRoomActions = 500

// roomActions puts the room's protective actions (or why they could not
// be read) into a page's data.
func (s *server) roomActions(ctx context.Context, roomID string, data map[string]any) {
	rows, err := s.store.RoomActions(ctx, roomID, maxRoomActions)
	if err != nil {
		s.log.Warn("console: room actions", "room_id", roomID, "err", err)
		data["ActionsError"] = "the room's protective actions could not be read"
		return
	}
	data["Actions"] = rows
	data["CanControl"] = s.control != nil
}

// reapplyActions re-applies what the overturn overturnID reversed, once
// its undo is recorded (and audited before). A failure is logged: the
// undo stands.
func (s *server) reapplyActions(ctx context.Context, key pipeline.ReviewKey, overturnID uint64) {
	if s.actions == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	re, err := s.actions.ReapplyActions(rctx, moderation.Reversal{Key: key, DecisionID: overturnID, At: s.clock.Now().UTC()})
	if err != nil {
		s.log.Error("console: overturn undone, but its reversed protective actions were not re-applied", "decision_id", overturnID, "room_id", key.RoomID, "err", err)
		return
	}
	if len(re) > 0 {
		s.log.Info("console: protective actions re-applied", "decision_id", overturnID, "room_id", key.RoomID, "actions", len(re))
	}
}
