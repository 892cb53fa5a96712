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
// write order, the outbox messages of the `on` ones, and the cleared
// states by pipeline.ActionClearedKey.
type protectState struct {
	rows    []moderation.RoomAction
	outbox  []pipeline.OutboxMessage
	cleared map[string]time.Time
}

// SeedAction adds a protective action's row as a verdict's save writes
// it (a key already held keeps its row); an `on` action also gets its
// outbox message.
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
	if a.Mode == pipeline.ModeOn {
		msg, err := pipeline.ActionOutboxMessage(a)
		if err != nil {
			return pipeline.Permanent(err)
		}
		m.prot.outbox = append(m.prot.outbox, msg)
	}
	return nil
}

// RoomActions implements moderation.ProtectiveActions.
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

// WriteReversal implements moderation.ProtectiveActions.
func (m *Memory) WriteReversal(ctx context.Context, r moderation.Reversal) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, a := range r.Actions {
		if err := a.Validate(); err != nil {
			return pipeline.Permanent(fmt.Errorf("moderationtest: reversal: %w", err))
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range r.Actions {
		fresh := !slices.ContainsFunc(m.prot.rows, func(x moderation.RoomAction) bool { return x.Key == a.IdempotencyKey })
		if err := m.writeAction(a); err != nil {
			return err
		}
		if fresh && a.Action.ID.Reversal() {
			for i := range m.prot.rows {
				if m.prot.rows[i].Key == a.Reverses {
					m.prot.rows[i].State = moderation.ActionReversed
				}
			}
		}
	}
	if m.prot.cleared == nil {
		m.prot.cleared = map[string]time.Time{}
	}
	for _, c := range r.Clear {
		m.prot.cleared[pipeline.ActionClearedKey(c.Account, c.Rule)] = us(c.Until)
	}
	for _, c := range r.Unclear {
		delete(m.prot.cleared, pipeline.ActionClearedKey(c.Account, c.Rule))
	}
	return nil
}

// ActionOutbox returns the outbox messages of the `on` actions written,
// in write order.
func (m *Memory) ActionOutbox() []pipeline.OutboxMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.prot.outbox)
}

// Cleared returns the cleared states: the end of each, by
// pipeline.ActionClearedKey.
func (m *Memory) Cleared() map[string]time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]time.Time, len(m.prot.cleared))
	for k, v := range m.prot.cleared {
		out[k] = v
	}
	return out
}
