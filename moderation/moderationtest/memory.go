// Package moderationtest holds test support for the moderation side's
// ports: one conformance suite per port (takes, decisions, the feedback
// outbox, the audit record) that every implementation must pass, run
// against storage/mysql on MariaDB and against Memory, an in-memory store
// with the same semantics for unit tests of the console.
package moderationtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

var (
	_ moderation.Verdicts       = (*Memory)(nil)
	_ moderation.Takes          = (*Memory)(nil)
	_ moderation.Decisions      = (*Memory)(nil)
	_ moderation.FeedbackOutbox = (*Memory)(nil)
	_ moderation.ActionLog      = (*Memory)(nil)
)

// Memory is an in-memory store of verdicts, takes, decisions with their
// feedback outbox, and audit records, with storage/mysql's semantics
// (times in UTC at microsecond precision, a done verdict never replaced by
// a non-done one, one holder per item). It is safe for concurrent use: one
// mutex makes every method atomic. ActionErr, when set, is returned by
// RecordAction instead of recording, to inject an audit store that fails.
type Memory struct {
	mu        sync.Mutex
	verdicts  map[uint64]pipeline.Verdict
	ids       map[pipeline.ReviewKey]uint64
	takes     map[uint64]moderation.Take
	decisions []decisionRow
	actions   []moderation.AuditRecord
	ActionErr func(moderation.AuditRecord) error
}

// decisionRow is a decision with its outbox state.
type decisionRow struct {
	moderation.Decision
	rejectedAt time.Time
	reason     string
	attempts   int
	nextAt     time.Time
}

// NewMemory returns an empty store.
func NewMemory() *Memory {
	return &Memory{verdicts: map[uint64]pipeline.Verdict{}, ids: map[pipeline.ReviewKey]uint64{}, takes: map[uint64]moderation.Take{}}
}

// us is t as the store keeps it.
func us(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

func normKey(k pipeline.ReviewKey) pipeline.ReviewKey {
	k.WindowStart, k.WindowEnd = us(k.WindowStart), us(k.WindowEnd)
	return k
}

// Save upserts v under its key, keeping its id; a stored done verdict is
// kept when v is not done (nothing committed).
func (m *Memory) Save(ctx context.Context, v pipeline.Verdict) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v.Key = normKey(v.Key)
	v.FinishedAt = us(v.FinishedAt)
	v.Campaigns = slices.Clone(v.Campaigns)
	id, ok := m.ids[v.Key]
	if ok && m.verdicts[id].Status == pipeline.StatusDone && v.Status != pipeline.StatusDone {
		return false, nil
	}
	if !ok {
		id = uint64(len(m.ids) + 1)
		m.ids[v.Key] = id
	}
	m.verdicts[id] = v
	return true, nil
}

// VerdictByID returns the verdict with id or an error wrapping
// pipeline.ErrVerdictNotFound.
func (m *Memory) VerdictByID(ctx context.Context, id uint64) (pipeline.Verdict, error) {
	if err := ctx.Err(); err != nil {
		return pipeline.Verdict{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.verdicts[id]
	if !ok {
		return pipeline.Verdict{}, fmt.Errorf("memory: verdict %d: %w", id, pipeline.ErrVerdictNotFound)
	}
	return v, nil
}

// VerdictID returns the id of the verdict under key or an error wrapping
// pipeline.ErrVerdictNotFound.
func (m *Memory) VerdictID(ctx context.Context, key pipeline.ReviewKey) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.ids[normKey(key)]
	if !ok {
		return 0, fmt.Errorf("memory: verdict id %s: %w", key, pipeline.ErrVerdictNotFound)
	}
	return id, nil
}

// Ping answers ctx's error, else nil.
func (m *Memory) Ping(ctx context.Context) error { return ctx.Err() }

// Actions returns the audit records so far, in order.
func (m *Memory) Actions() []moderation.AuditRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.actions)
}

// RecordAction appends r (its time kept in UTC, microseconds).
func (m *Memory) RecordAction(ctx context.Context, r moderation.AuditRecord) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := r.Validate(); err != nil {
		return 0, pipeline.Permanent(fmt.Errorf("memory: record action: %w", err))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ActionErr != nil {
		if err := m.ActionErr(r); err != nil {
			return 0, fmt.Errorf("memory: record action: %w", err)
		}
	}
	r.At = us(r.At)
	r.Detail = pipeline.ClipRunes(r.Detail, moderation.MaxAuditDetailRunes)
	m.actions = append(m.actions, r)
	return uint64(len(m.actions)), nil
}
