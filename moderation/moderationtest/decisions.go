package moderationtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// AddDecision implements moderation.Decisions.
func (m *Memory) AddDecision(ctx context.Context, d moderation.Decision) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := d.Validate(); err != nil {
		return 0, pipeline.Permanent(fmt.Errorf("memory: add decision: %w", err))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.verdicts[d.VerdictID]
	if !ok {
		return 0, pipeline.Permanent(fmt.Errorf("memory: add decision: verdict %d: %w", d.VerdictID, pipeline.ErrVerdictNotFound))
	}
	d.DecidedAt, d.FeedbackSentAt, d.ReversedAt = us(d.DecidedAt), time.Time{}, time.Time{}
	if d.Decision == moderation.DecisionUndo {
		undone, err := m.undoable(d)
		if err != nil {
			return 0, pipeline.Permanent(fmt.Errorf("memory: add decision: %w", err))
		}
		d.Label, d.Category = undone.Label, undone.Category
		undone.ReversedAt = d.DecidedAt
	} else if err := d.CheckAgainst(v.Label, v.Category); err != nil {
		return 0, pipeline.Permanent(fmt.Errorf("memory: add decision: %w", err))
	}
	d.ID = uint64(len(m.decisions) + 1)
	d.Note = pipeline.ClipRunes(d.Note, moderation.MaxNoteRunes)
	m.decisions = append(m.decisions, decisionRow{Decision: d})
	return d.ID, nil
}

// undoable returns the row undo d reverses: the decision in force on its
// verdict, made by d's moderator. The caller holds m.mu.
func (m *Memory) undoable(d moderation.Decision) (*decisionRow, error) {
	var (
		in  *decisionRow
		ids []uint64
	)
	for i := range m.decisions {
		if m.decisions[i].VerdictID == d.VerdictID {
			ids = append(ids, m.decisions[i].ID)
		}
	}
	// Newest first, as Decisions orders them.
	ds := m.sorted(ids)
	if cur, ok := moderation.InForce(ds); ok {
		in = &m.decisions[cur.ID-1]
	}
	if in == nil || in.ID != d.Reverses || in.Moderator != d.Moderator {
		return nil, fmt.Errorf("undo of decision %d: %w", d.Reverses, moderation.ErrCannotUndo)
	}
	return in, nil
}

// sorted returns the decisions ids newest first. The caller holds m.mu.
func (m *Memory) sorted(ids []uint64) []moderation.Decision {
	out := make([]moderation.Decision, 0, len(ids))
	for _, id := range ids {
		out = append(out, m.decisions[id-1].Decision)
	}
	slices.SortFunc(out, func(a, b moderation.Decision) int {
		if c := b.DecidedAt.Compare(a.DecidedAt); c != 0 {
			return c
		}
		return int(b.ID) - int(a.ID)
	})
	return out
}

// Decisions implements moderation.Decisions.
func (m *Memory) Decisions(ctx context.Context, verdictID uint64, limit int) ([]moderation.Decision, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []uint64
	for _, d := range m.decisions {
		if d.VerdictID == verdictID {
			ids = append(ids, d.ID)
		}
	}
	out := m.sorted(ids)
	return out[:min(len(out), max(limit, 0))], nil
}

// MarkFeedbackSent implements moderation.Decisions.
func (m *Memory) MarkFeedbackSent(ctx context.Context, at time.Time, ids ...uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		if id >= 1 && id <= uint64(len(m.decisions)) && m.decisions[id-1].FeedbackSentAt.IsZero() {
			m.decisions[id-1].FeedbackSentAt = us(at)
		}
	}
	return nil
}

// SweepUnsentFeedback implements moderation.FeedbackOutbox. The mutex is
// held across send, so a second sweep waits instead of taking the same
// decisions (the MySQL store skips locked rows instead; either way no
// decision is taken twice at once).
func (m *Memory) SweepUnsentFeedback(ctx context.Context, now time.Time, grace time.Duration, limit int,
	send func(ctx context.Context, rows []moderation.UnsentFeedback) ([]moderation.FeedbackSend, error)) (moderation.FeedbackSweep, error) {
	var out moderation.FeedbackSweep
	if limit < 1 {
		return out, pipeline.Permanent(errors.New("memory: sweep feedback: limit must be positive"))
	}
	if err := ctx.Err(); err != nil {
		return out, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var idx []int
	for i, d := range m.decisions {
		if d.FeedbackSentAt.IsZero() && d.rejectedAt.IsZero() && d.DecidedAt.Before(us(now.Add(-grace))) &&
			(d.nextAt.IsZero() || !d.nextAt.After(us(now))) {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return m.decisions[a].DecidedAt.Compare(m.decisions[b].DecidedAt) })
	idx = idx[:min(len(idx), limit)]
	if len(idx) == 0 {
		return out, nil
	}
	batch := make([]moderation.UnsentFeedback, len(idx))
	for j, i := range idx {
		d := m.decisions[i]
		v := m.verdicts[d.VerdictID]
		batch[j] = moderation.UnsentFeedback{Decision: d.Decision, Key: v.Key, VerdictLabel: v.Label, VerdictCategory: v.Category,
			Action: v.Action, Attempts: d.attempts}
	}
	out.Taken = len(batch)
	results, sendErr := send(ctx, batch)
	if len(results) != len(batch) {
		return out, errors.Join(sendErr, fmt.Errorf("memory: sweep feedback: %d results for %d rows: nothing marked", len(results), len(batch)))
	}
	if err := ctx.Err(); err != nil {
		return moderation.FeedbackSweep{Taken: out.Taken}, errors.Join(sendErr, fmt.Errorf("memory: sweep feedback: %w", err))
	}
	for j, r := range results {
		d := &m.decisions[idx[j]]
		switch {
		case r.Sent:
			d.FeedbackSentAt = us(now)
			out.Sent++
		case r.Rejected != "":
			d.rejectedAt, d.reason = us(now), pipeline.ClipRunes(r.Rejected, moderation.MaxRejectReason)
			out.Rejected++
		default:
			d.attempts++
			d.nextAt = us(r.RetryAt)
			out.Deferred++
		}
	}
	return out, sendErr
}

// FeedbackBacklog implements moderation.FeedbackOutbox.
func (m *Memory) FeedbackBacklog(ctx context.Context) (moderation.FeedbackBacklog, error) {
	if err := ctx.Err(); err != nil {
		return moderation.FeedbackBacklog{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var b moderation.FeedbackBacklog
	for _, d := range m.decisions {
		switch {
		case !d.FeedbackSentAt.IsZero():
		case !d.rejectedAt.IsZero():
			b.Rejected++
		default:
			b.Unsent++
			if b.Oldest.IsZero() || d.DecidedAt.Before(b.Oldest) {
				b.Oldest = d.DecidedAt
			}
		}
	}
	return b, nil
}
