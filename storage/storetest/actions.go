package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

var _ pipeline.ActionStore = (*Memory)(nil)

// actionsState is Memory's record of protective actions, with the MySQL
// tables' semantics: protective_actions (rows, once per key),
// notice_suppressions and action_clearances.
type actionsState struct {
	rows []pipeline.ActionRecord
	// suppressed and cleared hold each slot's end, by
	// ActionSuppressKey and ActionClearedKey.
	suppressed map[string]time.Time
	cleared    map[string]time.Time
}

// checkActions refuses, before any write, an action the strict writer
// refuses, as the MySQL store does.
func checkActions(recs []pipeline.ActionRecord) error {
	for _, r := range recs {
		if err := r.Validate(); err != nil {
			return pipeline.Permanent(fmt.Errorf("memory: save: actions: %w", err))
		}
	}
	return nil
}

// writeActions writes a committed save's actions; m.mu is held.
func (m *Memory) writeActions(recs []pipeline.ActionRecord) {
	if m.acts.suppressed == nil {
		m.acts.suppressed, m.acts.cleared = map[string]time.Time{}, map[string]time.Time{}
	}
	for _, r := range recs {
		r.IssuedAt, r.ExpiresAt = usUTC(r.IssuedAt), usUTC(r.ExpiresAt)
		if !r.SuppressUntil.IsZero() && !m.claimSuppression(r) {
			continue
		}
		if !slices.ContainsFunc(m.acts.rows, func(x pipeline.ActionRecord) bool { return x.IdempotencyKey == r.IdempotencyKey }) {
			m.acts.rows = append(m.acts.rows, r)
		}
		msgs, err := pipeline.ActionLakeMessages(r)
		if err != nil {
			panic(err) // a validated action always encodes
		}
		if r.Mode == pipeline.ModeOn {
			q, err := pipeline.ActionOutboxMessage(r.ProtectiveAction)
			if err != nil {
				panic(err)
			}
			msgs = append(msgs, q)
		}
		m.out.insert(r.IssuedAt, msgs)
	}
}

// claimSuppression takes the notice's slot unless it is held past the
// notice's issue (the same key written again finds its own slot held).
func (m *Memory) claimSuppression(r pipeline.ActionRecord) bool {
	k := pipeline.ActionSuppressKey(r.Item.ID, r.Creator.ID, ruleOf(r.ProtectiveAction))
	if until, held := m.acts.suppressed[k]; held && until.After(r.IssuedAt) {
		return false
	}
	m.acts.suppressed[k] = usUTC(r.SuppressUntil)
	return true
}

func ruleOf(a pipeline.ProtectiveAction) string {
	if len(a.Rules) == 0 {
		return ""
	}
	return a.Rules[0].ID
}

// ActionState implements pipeline.ActionLedger.
func (m *Memory) ActionState(ctx context.Context, q pipeline.ActionStateQuery) (pipeline.ActionState, error) {
	if err := ctx.Err(); err != nil {
		return pipeline.ActionState{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := pipeline.ActionState{RuleToday: map[string]int{}, HeavyToday: map[string]int{}, Suppressed: map[string]bool{}, Cleared: map[string]bool{}}
	now := usUTC(q.Now)
	day := now.Truncate(24 * time.Hour)
	for _, r := range m.acts.rows {
		if r.Reverses != "" {
			continue
		}
		if rule := ruleOf(r.ProtectiveAction); slices.Contains(q.Rules, rule) && !r.IssuedAt.Before(day) {
			st.RuleToday[rule]++
		}
		if r.Action.ID.Heavy() && slices.Contains(q.Accounts, r.Creator.ID) && !r.IssuedAt.Before(now.Add(-24*time.Hour)) && !m.reversed(r.IdempotencyKey) {
			st.HeavyToday[r.Creator.ID]++
		}
	}
	for _, a := range q.Accounts {
		for k, until := range m.acts.suppressed {
			if strings.HasPrefix(k, pipeline.ActionSuppressKey(q.RoomID, a, "")) && until.After(now) {
				st.Suppressed[k] = true
			}
		}
		for k, until := range m.acts.cleared {
			if strings.HasPrefix(k, pipeline.ActionClearedKey(a, "")) && until.After(now) {
				st.Cleared[k] = true
			}
		}
	}
	return st, nil
}

// reversed reports whether a reversal of key is recorded (MySQL marks the
// reversed row's state); m.mu is held.
func (m *Memory) reversed(key string) bool {
	return slices.ContainsFunc(m.acts.rows, func(x pipeline.ActionRecord) bool { return x.Reverses == key && x.Action.ID.Reversal() })
}

// RecordClearances implements pipeline.ActionStore.
func (m *Memory) RecordClearances(ctx context.Context, now time.Time, decisionID int64, cs []pipeline.ActionClearance) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.acts.cleared == nil {
		m.acts.suppressed, m.acts.cleared = map[string]time.Time{}, map[string]time.Time{}
	}
	for _, c := range cs {
		m.acts.cleared[pipeline.ActionClearedKey(c.Account, c.Rule)] = usUTC(c.Until)
	}
	return nil
}

// Actions returns the protective actions the store holds, in write order.
func (m *Memory) Actions() []pipeline.ActionRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.acts.rows)
}

// SampleAction returns a valid action record of kind by rule about room's
// account acct, issued at, for tests; a notice claims its suppression slot
// for an hour.
func SampleAction(room, acct, rule string, kind pipeline.ActionKind, mode pipeline.ActionMode, at time.Time) pipeline.ActionRecord {
	key := pipeline.ReviewKey{RoomID: room, WindowStart: at.Add(-10 * time.Minute), WindowEnd: at.Add(-time.Minute), PipelineVersion: "pv-test"}
	msgAt := at.Add(-30 * time.Second)
	a := pipeline.ProtectiveAction{
		SchemaVersion: pipeline.ActionSchemaVersion, IdempotencyKey: pipeline.ForwardActionKey(key, 1, rule, kind, acct),
		PolicyVersion: "test", PolicyHash: strings.Repeat("ab", 32), VerdictRevision: 1, Source: pipeline.ActionSourceRealtime,
		Mode: mode, IssuedAt: at, MessageAt: &msgAt, ExpiresAt: at.Add(time.Hour),
		Item: pipeline.ActionEntity{ID: room, TypeID: pipeline.EntityRoom}, Action: pipeline.ActionRef{ID: kind},
		Policies: []pipeline.ActionPolicy{{ID: pipeline.CategoryExternalPayment, Name: "External payment", Penalty: pipeline.PenaltyHigh}},
		Rules:    []pipeline.ActionRule{{ID: rule, Name: rule}},
	}
	if kind != pipeline.ActionEscalate {
		a.Creator = pipeline.ActionEntity{ID: acct, TypeID: pipeline.EntityAccount}
	}
	r := pipeline.ActionRecord{ProtectiveAction: a, Key: key}
	switch kind {
	case pipeline.ActionWarnCounterpart, pipeline.ActionWarnSender:
		r.Custom.Template, r.Custom.Locale = pipeline.NoticeTemplate(kind, pipeline.CategoryExternalPayment), "ko"
		if kind == pipeline.ActionWarnCounterpart {
			r.Custom.Counterpart = pipeline.RoleBuyer
		}
		r.SuppressUntil = at.Add(time.Hour)
	case pipeline.ActionRestrictSender:
		until := at.Add(24 * time.Hour)
		r.Custom.Until = &until
	}
	return r
}
