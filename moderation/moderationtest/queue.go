package moderationtest

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// memCursor is the fake's queue cursor: the last row's position and the
// filter it was read with (the filter itself, normalized, less its limit).
type memCursor struct {
	Label    pipeline.Label `json:"l"`
	Severity int            `json:"s"`
	Window   time.Time      `json:"w"`
	ID       uint64         `json:"i"`
	Filter   string         `json:"f"`
}

func filterKey(f moderation.QueueFilter) string {
	f.Limit = 0
	f.From, f.To = us(f.From), us(f.To)
	b, _ := json.Marshal(f) // plain fields: cannot fail
	return string(b)
}

// queueItem is verdict id as a queue row. The caller holds m.mu.
func (m *Memory) queueItem(id uint64, decided map[uint64]bool) moderation.QueueItem {
	v := m.verdicts[id]
	it := moderation.QueueItem{ID: id, Key: v.Key, RunID: v.RunID, Status: v.Status, Label: v.Label, Category: v.Category,
		Severity: v.Severity, Confidence: v.Confidence, Action: v.Action, Rationale: v.Rationale, EarlyExit: v.EarlyExit,
		InjectionFlagged: v.InjectionFlagged, FinishedAt: v.FinishedAt, NewestMessageAt: us(v.NewestMessageAt), Decided: decided[id]}
	it.Snippet = firstQuote(v)
	if t, ok := m.takes[id]; ok {
		it.TakenBy, it.TakenActiveAt = t.Moderator, t.ActiveAt
	}
	return it
}

// decidedSet is the verdicts with a decision in force (moderation.InForce:
// an undone decision returns its item to the queue). The caller holds m.mu.
func (m *Memory) decidedSet() map[uint64]bool {
	decided := map[uint64]bool{}
	for _, d := range m.decisions {
		if d.Decision.Decision != moderation.DecisionUndo && d.ReversedAt.IsZero() {
			decided[d.VerdictID] = true
		}
	}
	return decided
}

// matches reports whether verdict v (decided or not) is in f's queue,
// label aside.
func matches(f moderation.QueueFilter, v pipeline.Verdict, decided bool) bool {
	return v.Status == f.Status && (f.Category == "" || v.Category == f.Category) && (f.RunID == "" || v.RunID == f.RunID) &&
		v.Severity >= f.MinSeverity && (f.From.IsZero() || !v.Key.WindowStart.Before(us(f.From))) &&
		(f.To.IsZero() || v.Key.WindowStart.Before(us(f.To))) && (f.IncludeDecided || !decided)
}

// queueOrder is the queue's order within the filter's labels.
func queueOrder(labels []pipeline.Label) func(a, b moderation.QueueItem) int {
	return func(a, b moderation.QueueItem) int {
		return cmp.Or(cmp.Compare(slices.Index(labels, a.Label), slices.Index(labels, b.Label)), cmp.Compare(b.Severity, a.Severity),
			b.Key.WindowStart.Compare(a.Key.WindowStart), cmp.Compare(b.ID, a.ID))
	}
}

// ListQueue implements moderation.Queue.
func (m *Memory) ListQueue(ctx context.Context, f moderation.QueueFilter, cursor string) (moderation.QueuePage, error) {
	if err := ctx.Err(); err != nil {
		return moderation.QueuePage{}, err
	}
	f, err := f.Normalize()
	if err != nil {
		return moderation.QueuePage{}, fmt.Errorf("memory: list queue: %w", err)
	}
	var cur *moderation.QueueItem
	if cursor != "" {
		c, err := decodeMemCursor(cursor, f)
		if err != nil {
			return moderation.QueuePage{}, fmt.Errorf("memory: list queue: %w", err)
		}
		cur = &moderation.QueueItem{ID: c.ID, Label: c.Label, Severity: c.Severity, Key: pipeline.ReviewKey{WindowStart: c.Window}}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	decided := m.decidedSet()
	order := queueOrder(f.Labels)
	var items []moderation.QueueItem
	for id, v := range m.verdicts {
		if !v.SupersededAt.IsZero() {
			continue // a superseded revision: only current ones are listed, as in MySQL
		}
		if !slices.Contains(f.Labels, v.Label) || !matches(f, v, decided[id]) {
			continue
		}
		it := m.queueItem(id, decided)
		if f.TakenBy != "" && it.TakenBy != f.TakenBy {
			continue
		}
		if cur != nil && order(it, *cur) <= 0 {
			continue
		}
		items = append(items, it)
	}
	slices.SortFunc(items, order)
	page := moderation.QueuePage{Items: items}
	if len(items) > f.Limit {
		page.Items = items[:f.Limit]
		last := page.Items[f.Limit-1]
		b, _ := json.Marshal(memCursor{Label: last.Label, Severity: last.Severity, Window: last.Key.WindowStart, ID: last.ID, Filter: filterKey(f)})
		page.Next = base64.RawURLEncoding.EncodeToString(b)
	}
	return page, nil
}

func decodeMemCursor(s string, f moderation.QueueFilter) (memCursor, error) {
	var c memCursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		return c, fmt.Errorf("%w: %v", moderation.ErrBadCursor, err)
	}
	if c.Filter != filterKey(f) || !slices.Contains(f.Labels, c.Label) || c.ID == 0 || c.Window.IsZero() {
		return c, fmt.Errorf("%w: it was read with another filter or names no row", moderation.ErrBadCursor)
	}
	return c, nil
}

// ListAudit implements moderation.Queue.
func (m *Memory) ListAudit(ctx context.Context, share float64, limit int) ([]moderation.QueueItem, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	th := moderation.AuditThreshold(share)
	if th == 0 || limit < 1 {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	decided := m.decidedSet()
	var items []moderation.QueueItem
	for id, v := range m.verdicts {
		if !v.SupersededAt.IsZero() {
			continue // a superseded revision: only current ones are listed, as in MySQL
		}
		if !decided[id] && moderation.IsAuditItem(v.Key, v.Status, v.Label, share) {
			it := m.queueItem(id, decided)
			it.Audit = true
			items = append(items, it)
		}
	}
	slices.SortFunc(items, func(a, b moderation.QueueItem) int {
		return cmp.Or(cmp.Compare(moderation.AuditBucket(a.Key), moderation.AuditBucket(b.Key)), cmp.Compare(a.ID, b.ID))
	})
	return items[:min(len(items), limit, moderation.MaxQueueLimit)], nil
}

// CountQueue implements moderation.Queue.
func (m *Memory) CountQueue(ctx context.Context, now time.Time) (moderation.QueueCounts, error) {
	if err := ctx.Err(); err != nil {
		return moderation.QueueCounts{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	decided := m.decidedSet()
	hour, day := us(now.Add(-time.Hour)), us(now.Add(-24*time.Hour))
	c := moderation.QueueCounts{ByCategory: map[pipeline.Category]int{}}
	for id, v := range m.verdicts {
		if !v.SupersededAt.IsZero() {
			continue // a superseded revision: only current ones are listed, as in MySQL
		}
		if decided[id] || v.Status != pipeline.StatusDone || (v.Label != pipeline.LabelAbusive && v.Label != pipeline.LabelSuspicious) {
			continue
		}
		c.ByCategory[v.Category]++
		switch {
		case !v.FinishedAt.IsZero() && !v.FinishedAt.Before(hour):
			c.Under1h++
		case !v.FinishedAt.IsZero() && !v.FinishedAt.Before(day):
			c.Under24h++
		default:
			c.Older++
		}
	}
	return c, nil
}

// firstQuote is the first evidence quote of v's extract stage, as MySQL's
// queue reads it.
func firstQuote(v pipeline.Verdict) string {
	for _, st := range v.Stages {
		if st.Stage != pipeline.StageExtract {
			continue
		}
		var ex struct {
			Evidence []struct {
				Quote string `json:"quote"`
			} `json:"evidence"`
		}
		if json.Unmarshal(st.Output, &ex) == nil && len(ex.Evidence) > 0 {
			return ex.Evidence[0].Quote
		}
	}
	return ""
}
