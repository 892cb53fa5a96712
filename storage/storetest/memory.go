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

var _ pipeline.VerdictStore = (*Memory)(nil)

// Memory is an in-memory pipeline.VerdictStore and pipeline.OutboxStore with the MySQL store's
// semantics (times truncated to microseconds, a done verdict never replaced
// by a non-done one). It is safe for concurrent use. SaveErr and GetErr, when
// set, are returned instead of doing the work, to inject failures.
type Memory struct {
	mu      sync.Mutex
	rows    map[pipeline.ReviewKey]pipeline.Verdict
	saves   int
	out     outbox
	SaveErr func(v pipeline.Verdict) error
	GetErr  func(k pipeline.ReviewKey) error
}

// NewMemory returns an empty store.
func NewMemory() *Memory { return &Memory{rows: map[pipeline.ReviewKey]pipeline.Verdict{}} }

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
	v, ok := m.rows[norm(key)]
	if !ok {
		return pipeline.Verdict{}, fmt.Errorf("memory: get %s: %w", key, pipeline.ErrVerdictNotFound)
	}
	return clone(v), nil
}

// Save upserts v; a stored done verdict is kept when v is not done, and
// Save then reports nothing committed. A committed save writes v.Outbox
// to the store's outbox (OutboxStore), available at v.FinishedAt.
func (m *Memory) Save(ctx context.Context, v pipeline.Verdict) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	hook := m.SaveErr
	m.mu.Unlock()
	if hook != nil {
		if err := hook(v); err != nil {
			return false, err
		}
	}
	if err := checkOutbox(v.Outbox); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.saves++
	v = clone(v)
	v.Key = norm(v.Key)
	v.PublishedAt = v.PublishedAt.UTC().Truncate(time.Microsecond)
	v.StartedAt = v.StartedAt.UTC().Truncate(time.Microsecond)
	v.FinishedAt = v.FinishedAt.UTC().Truncate(time.Microsecond)
	v.OldestMessageAt = usUTC(v.OldestMessageAt)
	v.NewestMessageAt = usUTC(v.NewestMessageAt)
	for i := range v.Stages {
		v.Stages[i].TTFT = v.Stages[i].TTFT.Round(time.Microsecond)
		v.Stages[i].Latency = v.Stages[i].Latency.Round(time.Microsecond)
	}
	if old, ok := m.rows[v.Key]; ok && old.Status == pipeline.StatusDone && v.Status != pipeline.StatusDone {
		return false, nil
	}
	m.out.insert(v.FinishedAt, v.Outbox)
	v.Outbox = nil // not read back, as in MySQL
	m.rows[v.Key] = v
	return true, nil
}

// Saves returns how many Save calls got past the failure hooks.
func (m *Memory) Saves() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.saves
}

// All returns every stored verdict, in no particular order.
func (m *Memory) All() []pipeline.Verdict {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]pipeline.Verdict, 0, len(m.rows))
	for _, v := range m.rows {
		out = append(out, clone(v))
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
