package console

import (
	"context"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/moderation"
)

// maxRoomActions bounds the actions a room page lists and an overturn
// reads: a room acted on this often is a moderator's case anyway.
const maxRoomActions = 500

// protect follows a saved decision through to the room's protective
// actions: an overturn reverses every action in force in the room (and
// clears its accounts for their rules); a confirm that undoes an overturn
// (the decision in force before it was one) re-applies what the overturn
// reversed. The decision's audit row, written before the decision was
// saved, is their audit. It runs detached from the request, bounded: the
// reversals are written whether or not the moderator waits.
func (s *server) protect(ctx context.Context, v decidedVerdict, d moderation.Decision) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	now := s.clock.Now()
	undo := false
	if d.Decision == moderation.DecisionConfirm {
		ds, err := s.store.Decisions(ctx, v.ID, 2)
		if err != nil {
			return fmt.Errorf("reverse actions: %w", err)
		}
		if len(ds) < 2 || ds[1].Decision != moderation.DecisionOverturn {
			return nil
		}
		undo = true
	}
	rows, err := s.store.RoomActions(ctx, v.Key.RoomID, maxRoomActions)
	if err != nil || len(rows) == 0 {
		return err
	}
	var r moderation.Reversal
	if undo {
		full, err := s.store.VerdictByID(ctx, v.ID)
		if err != nil {
			return fmt.Errorf("reapply actions: %w", err)
		}
		r = moderation.PlanReapply(rows, full.OffenderRole, v.Category, d.ID, now, s.cfg.Reversal)
	} else {
		r = moderation.PlanReversal(rows, "", d.ID, now, s.cfg.Reversal)
	}
	if len(r.Actions) == 0 {
		return nil
	}
	if err := s.store.WriteReversal(ctx, r); err != nil {
		return fmt.Errorf("reverse actions: %w", err)
	}
	s.log.Info("console: protective actions followed the decision", "decision", d.Decision, "decision_id", d.ID,
		"verdict_id", v.ID, "room_id", v.Key.RoomID, "actions", len(r.Actions), "reapplied", undo)
	return nil
}

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
}
