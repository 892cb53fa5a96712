package moderationtest

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

var _ pipeline.CampaignJoins = (*Memory)(nil)

// JoinRows implements pipeline.CampaignJoins as storage/mysql does: the
// recorded marks of current verdicts decided at or after since, newest
// first, repeat senders' left out, each with its verdict's subjects,
// window, label and run.
func (m *Memory) JoinRows(ctx context.Context, since time.Time, limit int) ([]pipeline.CampaignJoinRow, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	type row struct {
		at time.Time
		r  pipeline.CampaignJoinRow
	}
	var rows []row
	for id, v := range m.verdicts {
		if !v.SupersededAt.IsZero() || decidedAt(v).Before(us(since)) {
			continue
		}
		for _, c := range m.rowsOf(id) {
			if c.class != pipeline.ClassRepeatSender {
				rows = append(rows, row{decidedAt(v), pipeline.CampaignJoinRow{VerdictID: id, Kind: c.Kind, Mark: c.Mark, Class: c.class,
					Senders: c.Senders, Subjects: slices.Clone(v.Subjects), RoomID: v.Key.RoomID, WindowStart: v.Key.WindowStart, WindowEnd: v.Key.WindowEnd,
					Label: v.Label, RunID: v.RunID}})
			}
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Or(b.at.Compare(a.at), cmp.Compare(b.r.VerdictID, a.r.VerdictID)) })
	out := make([]pipeline.CampaignJoinRow, 0, min(len(rows), limit))
	for _, r := range rows[:min(len(rows), limit)] {
		out = append(out, r.r)
	}
	return out, nil
}

// SaveJoin implements pipeline.CampaignJoins.
func (m *Memory) SaveJoin(ctx context.Context, j pipeline.CampaignJoin) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if j.At.IsZero() {
		return 0, errors.New("memory: save campaign join: no run time")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.members = map[string]string{}
	for k, v := range j.Members {
		m.members[k] = v
	}
	n := 0
	for _, l := range j.Links {
		v, ok := m.verdicts[l.VerdictID]
		if !ok || m.linked[l.VerdictID][l.Mark] || !slices.ContainsFunc(v.Sightings, func(c pipeline.CampaignCount) bool { return c.Mark == l.Mark }) {
			continue
		}
		if m.linked == nil {
			m.linked = map[uint64]map[string]bool{}
		}
		if m.linked[l.VerdictID] == nil {
			m.linked[l.VerdictID] = map[string]bool{}
		}
		m.linked[l.VerdictID][l.Mark] = true
		n++
	}
	return n, nil
}

// classed is one recorded mark with its class.
type classed struct {
	pipeline.CampaignCount
	class pipeline.CampaignClass
}

// rowsOf are verdict id's recorded marks as verdict_campaigns holds them.
// The caller holds m.mu.
func (m *Memory) rowsOf(id uint64) []classed {
	v := m.verdicts[id]
	out := make([]classed, 0, len(v.Campaigns)+len(v.Sightings))
	for _, c := range v.Campaigns {
		class := pipeline.ClassCampaign
		if c.RepeatSender {
			class = pipeline.ClassRepeatSender
		}
		out = append(out, classed{c, class})
	}
	for _, c := range v.Sightings {
		class := pipeline.ClassSighting
		if m.linked[id][c.Mark] {
			class = pipeline.ClassLinked
		}
		out = append(out, classed{c, class})
	}
	return out
}

// campaignRows are verdict id's rows of a campaign (campaign or linked)
// whose mark is in marks, the smallest mark first. The caller holds m.mu.
func (m *Memory) campaignRows(id uint64, marks map[string]bool) []classed {
	var out []classed
	for _, c := range m.rowsOf(id) {
		if marks[c.Mark] && (c.class == pipeline.ClassCampaign || c.class == pipeline.ClassLinked) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b classed) int { return cmp.Compare(a.Mark, b.Mark) })
	return out
}

// campaignOf is the set of marks of mark's campaign: mark alone when the
// join put it in none. The caller holds m.mu.
func (m *Memory) campaignOf(mark string) map[string]bool {
	out := map[string]bool{mark: true}
	if c, ok := m.members[mark]; ok {
		for k, v := range m.members {
			if v == c {
				out[k] = true
			}
		}
	}
	return out
}

// campaignID is the campaign a mark belongs to: the join's id, else the
// mark. The caller holds m.mu.
func (m *Memory) campaignID(mark string) string {
	if c, ok := m.members[mark]; ok {
		return c
	}
	return mark
}
