package moderationtest

import (
	"context"
	"slices"
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

var _ moderation.TakeHistory = (*Memory)(nil)

// RecordTake appends r to the take history.
func (m *Memory) RecordTake(ctx context.Context, r moderation.TakeRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.Validate(); err != nil {
		return pipeline.Permanent(err)
	}
	r.At = us(r.At)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.history = append(m.history, r)
	return nil
}

// HandledItems returns the decisions made in [from, to) with their take
// times, as storage/mysql computes them.
func (m *Memory) HandledItems(ctx context.Context, from, to time.Time) ([]moderation.HandledItem, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	from, to = us(from), us(to)
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []moderation.HandledItem
	for _, d := range m.decisions {
		if d.DecidedAt.Before(from) || !d.DecidedAt.Before(to) {
			continue
		}
		it := moderation.HandledItem{VerdictID: d.VerdictID, Moderator: d.Moderator, Decision: d.Decision.Decision,
			QueuedAt: m.verdicts[d.VerdictID].FinishedAt, DecidedAt: d.DecidedAt}
		for _, h := range m.history {
			if h.VerdictID != d.VerdictID || h.Event != moderation.TakeStarted || h.At.After(d.DecidedAt) {
				continue
			}
			if it.PickedAt.IsZero() || h.At.Before(it.PickedAt) {
				it.PickedAt = h.At
			}
			if h.Moderator == d.Moderator && h.At.After(it.TakenAt) {
				it.TakenAt = h.At
			}
		}
		out = append(out, it)
	}
	slices.SortStableFunc(out, func(a, b moderation.HandledItem) int { return a.DecidedAt.Compare(b.DecidedAt) })
	return out, nil
}

// PurgeTakeHistory deletes up to limit rows recorded before cutoff.
func (m *Memory) PurgeTakeHistory(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	kept, n := m.history[:0], 0
	for _, h := range m.history {
		if h.At.Before(cutoff) && n < limit {
			n++
			continue
		}
		kept = append(kept, h)
	}
	m.history = kept
	return n, nil
}
