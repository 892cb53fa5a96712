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

// TakeItem implements moderation.Takes.
func (m *Memory) TakeItem(ctx context.Context, verdictID uint64, moderator string, now, staleBefore time.Time, force bool) (moderation.Take, error) {
	if err := ctx.Err(); err != nil {
		return moderation.Take{}, err
	}
	if verdictID == 0 || moderator == "" || len(moderator) > 128 || now.IsZero() {
		return moderation.Take{}, pipeline.Permanent(errors.New("memory: take: verdict id, a moderator of 1..128 bytes and a time are required"))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.verdicts[verdictID]; !ok {
		return moderation.Take{}, pipeline.Permanent(fmt.Errorf("memory: take: verdict %d: %w", verdictID, pipeline.ErrVerdictNotFound))
	}
	at := us(now)
	t, held := m.takes[verdictID]
	switch {
	case !held:
		t = moderation.Take{VerdictID: verdictID, Moderator: moderator, TakenAt: at, ActiveAt: at}
	case t.Moderator == moderator:
		t.ActiveAt = at
	case t.ActiveAt.Before(us(staleBefore)) || force:
		t = moderation.Take{VerdictID: verdictID, Moderator: moderator, TakenAt: at, ActiveAt: at}
	default:
		return moderation.Take{}, &moderation.TakenError{Holder: t}
	}
	m.takes[verdictID] = t
	return t, nil
}

// TakeOf implements moderation.Takes.
func (m *Memory) TakeOf(ctx context.Context, verdictID uint64) (moderation.Take, bool, error) {
	if err := ctx.Err(); err != nil {
		return moderation.Take{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.takes[verdictID]
	return t, ok, nil
}

// TouchTake implements moderation.Takes.
func (m *Memory) TouchTake(ctx context.Context, verdictID uint64, moderator string, now time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.takes[verdictID]
	if !ok || t.Moderator != moderator {
		return false, nil
	}
	if at := us(now); at.After(t.ActiveAt) {
		t.ActiveAt = at
		m.takes[verdictID] = t
	}
	return true, nil
}

// ReleaseItem implements moderation.Takes.
func (m *Memory) ReleaseItem(ctx context.Context, verdictID uint64, moderator string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.takes[verdictID]; ok && t.Moderator == moderator {
		delete(m.takes, verdictID)
		return true, nil
	}
	return false, nil
}

// openRooms returns the undecided verdicts of mark's campaign. The caller
// holds m.mu.
func (m *Memory) openRooms(mark string) []uint64 {
	marks := m.campaignOf(mark)
	decided := m.decidedSet()
	var out []uint64
	for id, v := range m.verdicts {
		if !v.SupersededAt.IsZero() {
			continue // a superseded revision: only current ones are listed, as in MySQL
		}
		if decided[id] {
			continue
		}
		if len(m.campaignRows(id, marks)) > 0 {
			out = append(out, id)
		}
	}
	return out
}

// CountOpenCampaignRooms implements moderation.Takes.
func (m *Memory) CountOpenCampaignRooms(ctx context.Context, mark string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.openRooms(mark)), nil
}

// TakeCampaign implements moderation.Takes.
func (m *Memory) TakeCampaign(ctx context.Context, mark, moderator string, now, staleBefore time.Time) (moderation.CampaignTakes, error) {
	if err := ctx.Err(); err != nil {
		return moderation.CampaignTakes{}, err
	}
	if mark == "" || len(mark) > 40 || moderator == "" || len(moderator) > 128 || now.IsZero() {
		return moderation.CampaignTakes{}, pipeline.Permanent(errors.New("memory: take campaign: a mark of 1..40 bytes, a moderator of 1..128 bytes and a time are required"))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	at, stale := us(now), us(staleBefore)
	res := moderation.CampaignTakes{Others: map[string]int{}}
	for _, id := range m.openRooms(mark) {
		t, held := m.takes[id]
		switch {
		case !held || t.ActiveAt.Before(stale):
			m.takes[id] = moderation.Take{VerdictID: id, Moderator: moderator, TakenAt: at, ActiveAt: at}
			res.Mine++
		case t.Moderator == moderator:
			t.ActiveAt = at
			m.takes[id] = t
			res.Mine++
		default:
			res.Others[t.Moderator]++
		}
	}
	return res, nil
}

// ReleaseCampaign implements moderation.Takes.
func (m *Memory) ReleaseCampaign(ctx context.Context, mark, moderator string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, marks := 0, m.campaignOf(mark)
	for id, t := range m.takes {
		if t.Moderator != moderator {
			continue
		}
		if slices.ContainsFunc(m.rowsOf(id), func(c classed) bool { return marks[c.Mark] }) {
			delete(m.takes, id)
			n++
		}
	}
	return n, nil
}
