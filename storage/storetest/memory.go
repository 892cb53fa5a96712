// Package storetest holds test support for verdict stores: a conformance
// suite every pipeline.VerdictStore must pass, and an in-memory store with
// the same semantics for unit tests of the job loop.
package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

var _ pipeline.VerdictReviser = (*Memory)(nil)

// Memory is an in-memory pipeline.VerdictReviser, pipeline.OutboxStore and
// pipeline.ActionStore with the MySQL store's
// semantics (times truncated to microseconds, a done verdict never replaced
// by a non-done one, nor a done re-review by a review from a queue; the last
// revision of a key is its current one). It is safe for concurrent use.
// SaveErr and GetErr, when set, are returned instead of doing the work, to
// inject failures (SaveErr for Revise too).
type Memory struct {
	mu sync.Mutex
	// rows holds each key's revisions, oldest first; the last is current.
	rows    map[pipeline.ReviewKey][]pipeline.Verdict
	saves   int
	out     outbox
	acts    actionsState
	SaveErr func(v pipeline.Verdict) error
	GetErr  func(k pipeline.ReviewKey) error
	// now dates superseded revisions; a counter, so that tests need no
	// clock (the fake is about order, not time).
	now time.Time
}

// NewMemory returns an empty store.
func NewMemory() *Memory {
	return &Memory{rows: map[pipeline.ReviewKey][]pipeline.Verdict{}, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func norm(k pipeline.ReviewKey) pipeline.ReviewKey {
	k.WindowStart = k.WindowStart.UTC().Truncate(time.Microsecond)
	k.WindowEnd = k.WindowEnd.UTC().Truncate(time.Microsecond)
	return k
}

// Get returns the verdict under key or an error wrapping
// pipeline.ErrVerdictNotFound; it honours ctx.
func (m *Memory) Get(ctx context.Context, key pipeline.ReviewKey) (pipeline.Verdict, error) {
	if err := ctx.Err(); err != nil {
		return pipeline.Verdict{}, err
	}
	m.mu.Lock()
	hook := m.GetErr
	m.mu.Unlock()
	if hook != nil {
		if err := hook(key); err != nil {
			return pipeline.Verdict{}, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	revs := m.rows[norm(key)]
	if len(revs) == 0 {
		return pipeline.Verdict{}, fmt.Errorf("memory: get %s: %w", key, pipeline.ErrVerdictNotFound)
	}
	return clone(revs[len(revs)-1]), nil
}

// Save upserts v into the current revision of its key (revision 1 for a
// new key); a stored done verdict is kept when v is not done, and a done
// revision above 1 always, and Save then reports nothing committed. A
// committed save writes v.Outbox to the store's outbox (OutboxStore),
// available at v.FinishedAt.
func (m *Memory) Save(ctx context.Context, v pipeline.Verdict) (bool, error) {
	if err := m.hooks(ctx, v); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.saves++
	v = stored(v)
	revs := m.rows[v.Key]
	if n := len(revs); n > 0 {
		cur := revs[n-1]
		if cur.Status == pipeline.StatusDone && (v.Status != pipeline.StatusDone || cur.Revision > 1) {
			return false, nil
		}
	}
	m.out.insert(v.FinishedAt, v.Outbox)
	m.writeActions(v.Actions)
	v.Outbox, v.Actions = nil, nil // not read back, as in MySQL
	if len(revs) == 0 {
		v.Revision = 1
		m.rows[v.Key] = []pipeline.Verdict{v}
		return true, nil
	}
	v.Revision = revs[len(revs)-1].Revision
	revs[len(revs)-1] = v
	return true, nil
}

// Revise implements pipeline.VerdictReviser.
func (m *Memory) Revise(ctx context.Context, v pipeline.Verdict) (int, bool, error) {
	if err := m.hooks(ctx, v); err != nil {
		return 0, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.saves++
	v = stored(v)
	revs := m.rows[v.Key]
	if n := len(revs); n > 0 {
		cur := &revs[n-1]
		if cur.Status == pipeline.StatusDone && v.Status != pipeline.StatusDone {
			return cur.Revision, false, nil
		}
		m.now = m.now.Add(time.Second)
		cur.SupersededAt = m.now
		v.Revision = cur.Revision + 1
	} else {
		v.Revision = 1
	}
	m.rows[v.Key] = append(revs, v)
	return v.Revision, true, nil
}

// Revisions implements pipeline.VerdictReviser.
func (m *Memory) Revisions(ctx context.Context, key pipeline.ReviewKey) ([]pipeline.Verdict, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	revs := m.rows[norm(key)]
	if len(revs) == 0 {
		return nil, fmt.Errorf("memory: revisions %s: %w", key, pipeline.ErrVerdictNotFound)
	}
	out := make([]pipeline.Verdict, len(revs))
	for i, v := range revs {
		out[i] = clone(v)
	}
	return out, nil
}

// hooks checks ctx and runs the SaveErr hook.
func (m *Memory) hooks(ctx context.Context, v pipeline.Verdict) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	hook := m.SaveErr
	m.mu.Unlock()
	if hook != nil {
		if err := hook(v); err != nil {
			return err
		}
	}
	if err := checkOutbox(v.Outbox); err != nil {
		return err
	}
	return checkActions(v.Actions)
}

// stored is v as the store keeps it: a copy, UTC, microseconds, not
// superseded.
func stored(v pipeline.Verdict) pipeline.Verdict {
	v = clone(v)
	v.Key = norm(v.Key)
	v.SupersededAt = time.Time{}
	v.PublishedAt = v.PublishedAt.UTC().Truncate(time.Microsecond)
	v.StartedAt = v.StartedAt.UTC().Truncate(time.Microsecond)
	v.FinishedAt = v.FinishedAt.UTC().Truncate(time.Microsecond)
	v.OldestMessageAt = usUTC(v.OldestMessageAt)
	v.NewestMessageAt = usUTC(v.NewestMessageAt)
	for i := range v.Stages {
		v.Stages[i].TTFT = v.Stages[i].TTFT.Round(time.Microsecond)
		v.Stages[i].Latency = v.Stages[i].Latency.Round(time.Microsecond)
	}
	return v
}

// Saves returns how many Save calls got past the failure hooks.
func (m *Memory) Saves() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.saves
}

// All returns the current revision of every stored key, in no particular
// order.
func (m *Memory) All() []pipeline.Verdict {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]pipeline.Verdict, 0, len(m.rows))
	for _, revs := range m.rows {
		out = append(out, clone(revs[len(revs)-1]))
	}
	return out
}

func clone(v pipeline.Verdict) pipeline.Verdict {
	v.EvidenceIDs = slices.Clone(v.EvidenceIDs)
	v.Stages = slices.Clone(v.Stages)
	for i := range v.Stages {
		v.Stages[i].Output = slices.Clone(v.Stages[i].Output)
	}
	return v
}

// usUTC is t as MySQL's DATETIME(6) keeps it; the zero time (unknown, NULL)
// stays zero.
func usUTC(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}
