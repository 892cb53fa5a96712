package moderationtest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// protectState is Memory's record of protective actions: the rows in
// write order, each forward action's body (for its re-application), the
// overturn that reversed it, the actions' unsent queue messages, the
// cleared states and the policy runs (actioncontrol.go).
type protectState struct {
	rows       []moderation.RoomAction
	bodies     map[string]pipeline.ProtectiveAction
	reversedBy map[string]uint64
	pending    map[string]bool
	cleared    map[string]clearance
	policyRuns map[string]bool
}

// clearance is a cleared state with the decision that recorded it.
type clearance struct {
	until    time.Time
	decision uint64
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
	if m.prot.bodies == nil {
		m.prot.bodies, m.prot.reversedBy, m.prot.pending = map[string]pipeline.ProtectiveAction{}, map[string]uint64{}, map[string]bool{}
	}
	m.prot.bodies[a.IdempotencyKey] = a
	if a.Mode == pipeline.ModeOn {
		m.prot.pending[a.IdempotencyKey] = true
	}
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
