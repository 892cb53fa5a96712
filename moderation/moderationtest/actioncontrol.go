package moderationtest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// Memory's side of an overturn, of one action by its key and of a policy
// change's retraction, with storage/mysql's semantics (reverse.go,
// actioncontrol.go there).

var (
	_ moderation.ProtectiveActions = (*Memory)(nil)
	_ moderation.ActionControl     = (*Memory)(nil)
	_ moderation.PolicyRetractions = (*Memory)(nil)
)

// PendingAction reports whether the queue message of the action key is
// owed and not sent (an `on` action's, until a reversal cancels it).
func (m *Memory) PendingAction(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.prot.pending[key]
}

// Cleared reports whether account is cleared under rule at at.
func (m *Memory) Cleared(account, rule string, at time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.prot.cleared[pipeline.ActionClearedKey(account, rule)]
	return ok && c.until.After(at)
}

// forward returns the index of the forward action key of room, -1 when
// there is none.
func (m *Memory) forward(room, key string) int {
	return slices.IndexFunc(m.prot.rows, func(a moderation.RoomAction) bool {
		return a.Key == key && a.Verdict.RoomID == room && a.Reverses == ""
	})
}

// ReverseActions implements moderation.ProtectiveActions.
func (m *Memory) ReverseActions(ctx context.Context, r moderation.Reversal) ([]pipeline.ProtectiveAction, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := normKey(r.Key)
	var out []pipeline.ProtectiveAction
	for i, a := range m.prot.rows {
		if a.Verdict != key || a.Reverses != "" || a.State != moderation.ActionWritten {
			continue
		}
		if a.Account != "" {
			m.clear(a.Account, a.Rule, r.ClearedUntil, r.DecisionID)
		}
		if rev := m.reverseRow(i, r, pipeline.ActionSourceModerator); rev != nil {
			out = append(out, *rev)
		}
	}
	return out, nil
}

// clear records a cleared state, replacing an earlier one of its account
// and rule.
func (m *Memory) clear(account, rule string, until time.Time, decision uint64) {
	if m.prot.cleared == nil {
		m.prot.cleared = map[string]clearance{}
	}
	m.prot.cleared[pipeline.ActionClearedKey(account, rule)] = clearance{until: us(until), decision: decision}
}

// reverseRow marks row i reversed (by the overturn r.DecisionID, when
// not 0) and, when it is `on` and can be undone, cancels its unsent
// message and writes its reversal of source src; it returns the
// reversal, nil when there is none.
func (m *Memory) reverseRow(i int, r moderation.Reversal, src pipeline.ActionSource) *pipeline.ProtectiveAction {
	a := &m.prot.rows[i]
	a.State = moderation.ActionReversed
	m.prot.reversedBy[a.Key] = r.DecisionID
	undo := a.Action.ReversedBy()
	if a.Mode != pipeline.ModeOn || undo == "" {
		return nil
	}
	delete(m.prot.pending, a.Key)
	rev := pipeline.ProtectiveAction{
		SchemaVersion: pipeline.ActionSchemaVersion, IdempotencyKey: pipeline.ReversalActionKey(a.Key, m.generations(a.Key, "")+1),
		PolicyVersion: a.PolicyVersion, PolicyHash: a.PolicyHash, VerdictRevision: a.VerdictRevision,
		Source: src, Mode: pipeline.ModeOn, IssuedAt: us(r.At), ExpiresAt: us(r.ExpiresAt), Reverses: a.Key,
		Item:   pipeline.ActionEntity{ID: a.Verdict.RoomID, TypeID: pipeline.EntityRoom},
		Action: pipeline.ActionRef{ID: undo}, Rules: []pipeline.ActionRule{{ID: a.Rule, Name: a.Rule}},
	}
	if a.Account != "" {
		rev.Creator = pipeline.ActionEntity{ID: a.Account, TypeID: pipeline.EntityAccount}
	}
	_ = m.writeAction(pipeline.ActionRecord{ProtectiveAction: rev, Key: a.Verdict})
	return &rev
}

// generations counts the actions that reverse key (of kind, when set).
func (m *Memory) generations(key string, kind pipeline.ActionKind) int {
	n := 0
	for _, x := range m.prot.rows {
		if x.Reverses == key && (kind == "" || x.Action == kind) {
			n++
		}
	}
	return n
}

// ReapplyActions implements moderation.ProtectiveActions.
func (m *Memory) ReapplyActions(ctx context.Context, r moderation.Reversal) ([]pipeline.ProtectiveAction, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key, at := normKey(r.Key), us(r.At)
	var out []pipeline.ProtectiveAction
	found := false
	for i := range m.prot.rows {
		a := &m.prot.rows[i]
		if a.Verdict != key || a.Reverses != "" || a.State != moderation.ActionReversed || m.prot.reversedBy[a.Key] != r.DecisionID || r.DecisionID == 0 {
			continue
		}
		found = true
		a.State = moderation.ActionWritten
		delete(m.prot.reversedBy, a.Key)
		b := m.prot.bodies[a.Key]
		if b.Mode != pipeline.ModeOn || b.Action.ID.ReversedBy() == "" {
			continue
		}
		again := b
		again.IdempotencyKey, again.Reverses = pipeline.ReapplyActionKey(b.IdempotencyKey, m.generations(b.IdempotencyKey, b.Action.ID)+1), b.IdempotencyKey
		again.IssuedAt, again.ExpiresAt = at, at.Add(b.ExpiresAt.Sub(b.IssuedAt))
		if b.Custom.Until != nil {
			until := at.Add(b.Custom.Until.Sub(b.IssuedAt))
			again.Custom.Until = &until
		}
		_ = m.writeAction(pipeline.ActionRecord{ProtectiveAction: again, Key: key})
		out = append(out, again)
	}
	if found {
		for k, c := range m.prot.cleared {
			if c.decision == r.DecisionID {
				delete(m.prot.cleared, k)
			}
		}
	}
	return out, nil
}

// ReverseAction implements moderation.ActionControl.
func (m *Memory) ReverseAction(ctx context.Context, r moderation.KeyReversal) (moderation.KeyReversed, error) {
	if err := ctx.Err(); err != nil {
		return moderation.KeyReversed{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	i := m.forward(r.RoomID, r.Key)
	if i < 0 {
		return moderation.KeyReversed{}, fmt.Errorf("memory: action %s: %w", r.Key, moderation.ErrActionNotFound)
	}
	if m.prot.rows[i].State != moderation.ActionWritten {
		return moderation.KeyReversed{}, nil
	}
	rev := m.reverseRow(i, moderation.Reversal{Key: m.prot.rows[i].Verdict, At: r.At, ExpiresAt: r.ExpiresAt}, r.Source)
	if a := m.prot.rows[i]; a.Account != "" && !r.ClearedUntil.IsZero() {
		m.clear(a.Account, a.Rule, r.ClearedUntil, 0)
	}
	return moderation.KeyReversed{Reversed: true, Reversal: rev}, nil
}

// ConfirmAction implements moderation.ActionControl.
func (m *Memory) ConfirmAction(ctx context.Context, roomID, key, moderator string, at time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if moderator == "" || len(moderator) > 128 {
		return false, pipeline.Permanent(fmt.Errorf("memory: confirm action: moderator must be 1..128 bytes"))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	i := m.forward(roomID, key)
	if i < 0 {
		return false, fmt.Errorf("memory: confirm action %s: %w", key, moderation.ErrActionNotFound)
	}
	if m.prot.rows[i].ConfirmedBy != "" {
		return false, nil
	}
	m.prot.rows[i].ConfirmedBy, m.prot.rows[i].ConfirmedAt = moderator, us(at)
	return true, nil
}

// PolicyApplied implements moderation.PolicyRetractions.
func (m *Memory) PolicyApplied(ctx context.Context, hash string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.prot.policyRuns[hash], nil
}

// RecordPolicyApplied implements moderation.PolicyRetractions.
func (m *Memory) RecordPolicyApplied(ctx context.Context, hash, _ string, _ time.Time, _ int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.prot.policyRuns == nil {
		m.prot.policyRuns = map[string]bool{}
	}
	m.prot.policyRuns[hash] = true
	return nil
}

// LiveActions implements moderation.PolicyRetractions.
func (m *Memory) LiveActions(ctx context.Context, since time.Time, keep []moderation.RuleAction, limit int) ([]moderation.RoomAction, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []moderation.RoomAction
	for _, a := range m.prot.rows {
		if a.State != moderation.ActionWritten || !a.CreatedAt.After(since) || a.Reverses != "" || a.Mode != pipeline.ModeOn ||
			a.Action.ReversedBy() == "" || slices.Contains(keep, moderation.RuleAction{Rule: a.Rule, Action: a.Action}) {
			continue
		}
		out = append(out, moderation.RoomAction{Key: a.Key, Action: a.Action, Mode: pipeline.ModeOn, Rule: a.Rule, Account: a.Account,
			State: moderation.ActionWritten, Verdict: pipeline.ReviewKey{RoomID: a.Verdict.RoomID}})
	}
	slices.SortStableFunc(out, func(a, b moderation.RoomAction) int { return m.createdAt(a.Key).Compare(m.createdAt(b.Key)) })
	return out[:min(len(out), max(limit, 1))], nil
}

// createdAt is when the action key was issued.
func (m *Memory) createdAt(key string) time.Time { return us(m.prot.bodies[key].IssuedAt) }
