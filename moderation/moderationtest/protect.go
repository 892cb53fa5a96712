package moderationtest

import (
	"context"
	"fmt"
	"slices"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// protectState is Memory's record of protective actions: the rows in
// write order.
type protectState struct {
	rows []moderation.RoomAction
}

// SeedAction adds a protective action's row as a verdict's save writes
// it (a key already held keeps its row).
func (m *Memory) SeedAction(r pipeline.ActionRecord) error {
	if err := r.Validate(); err != nil {
		return pipeline.Permanent(fmt.Errorf("moderationtest: seed action: %w", err))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writeAction(r)
}

func (m *Memory) writeAction(r pipeline.ActionRecord) error {
	a := r.ProtectiveAction
	if slices.ContainsFunc(m.prot.rows, func(x moderation.RoomAction) bool { return x.Key == a.IdempotencyKey }) {
		return nil
	}
	rule := ""
	if len(a.Rules) > 0 {
		rule = a.Rules[0].ID
	}
	key := normKey(r.Key)
	key.RoomID = a.Item.ID
	m.prot.rows = append(m.prot.rows, moderation.RoomAction{
		Key: a.IdempotencyKey, Action: a.Action.ID, Mode: a.Mode, Source: a.Source, Rule: rule, Account: a.Creator.ID,
		Reverses: a.Reverses, State: moderation.ActionWritten, Verdict: key, VerdictRevision: a.VerdictRevision,
		PolicyVersion: a.PolicyVersion, PolicyHash: a.PolicyHash, CreatedAt: us(a.IssuedAt), ExpiresAt: us(a.ExpiresAt),
	})
	return nil
}

// RoomActions implements moderation.ActionHistory.
func (m *Memory) RoomActions(ctx context.Context, roomID string, limit int) ([]moderation.RoomAction, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []moderation.RoomAction
	for i := len(m.prot.rows) - 1; i >= 0; i-- {
		if m.prot.rows[i].Verdict.RoomID == roomID {
			out = append(out, m.prot.rows[i])
		}
	}
	slices.SortStableFunc(out, func(a, b moderation.RoomAction) int { return b.CreatedAt.Compare(a.CreatedAt) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
