// Package moderationtest holds test support for the moderation side's
// ports: one conformance suite per port (verdicts, the queue, takes,
// decisions, the feedback outbox, accounts, the audit record, the
// protective actions' history, control and policy retraction) that every
// implementation must pass, run against storage/mysql on MariaDB and
// against Memory, an in-memory moderation.Store (and ProtectiveActions,
// ActionControl, PolicyRetractions) with the same semantics for unit
// tests of the console.
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

var _ moderation.Store = (*Memory)(nil)

// Memory is an in-memory moderation.Store: verdicts with their queue,
// account and campaign views, takes, decisions with their feedback
// outbox, and audit records, with storage/mysql's semantics
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
	history   []moderation.TakeRecord
	ActionErr func(moderation.AuditRecord) error
	// members is the last campaign join's memberships, linked the
	// sightings it linked, by verdict (joins.go).
	members map[string]string
	linked  map[uint64]map[string]bool
	// prot holds the protective actions (protect.go).
	prot protectState
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
	v = stored(v)
	id, ok := m.ids[v.Key]
	if ok && m.verdicts[id].Status == pipeline.StatusDone && v.Status != pipeline.StatusDone {
		return false, nil
	}
	if !ok {
		id = m.nextVerdictID()
		m.ids[v.Key] = id
	}
	m.verdicts[id] = v
	delete(m.linked, id) // its rows are written again, sightings unlinked
	return true, nil
}

// Revise stores v as a new revision of its key, the current one from
// then on (revision 1 for a new key), with v.Actions (the planner's) each
// rebound to that revision (pipeline.ActionRecord.AtRevision) as
// storage/mysql's Revise writes them; a done current revision is kept
// against a v that is not done, and Revise then reports nothing committed.
func (m *Memory) Revise(ctx context.Context, v pipeline.Verdict) (int, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	for _, r := range v.Actions {
		if err := r.Validate(); err != nil {
			return 0, false, pipeline.Permanent(fmt.Errorf("memory: revise: %w", err))
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v = stored(v)
	v.Revision = 1
	if id, ok := m.ids[v.Key]; ok {
		cur := m.verdicts[id]
		if cur.Status == pipeline.StatusDone && v.Status != pipeline.StatusDone {
			return max(cur.Revision, 1), false, nil
		}
		v.Revision = max(cur.Revision, 1) + 1
		cur.SupersededAt = v.FinishedAt
		m.verdicts[id] = cur
	}
	id := m.nextVerdictID()
	m.ids[v.Key] = id
	m.verdicts[id] = v
	for _, r := range v.Actions {
		_ = m.writeAction(r.AtRevision(v.Revision))
	}
	return v.Revision, true, nil
}

// stored is v as MariaDB keeps it: times in UTC at microseconds, the key
// normalised, its own copy of the campaign signals.
func stored(v pipeline.Verdict) pipeline.Verdict {
	v.Key = normKey(v.Key)
	v.PublishedAt, v.StartedAt, v.FinishedAt = us(v.PublishedAt), us(v.StartedAt), us(v.FinishedAt)
	v.OldestMessageAt, v.NewestMessageAt = us(v.OldestMessageAt), us(v.NewestMessageAt)
	v.Campaigns = slices.Clone(v.Campaigns)
	v.Sightings = slices.Clone(v.Sightings)
	return v
}

// nextVerdictID is the id of a new verdict row: one above the largest.
func (m *Memory) nextVerdictID() uint64 {
	var top uint64
	for id := range m.verdicts {
		top = max(top, id)
	}
	return top + 1
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
