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

// decidedAt is when a verdict's subject, participant and campaign rows
// say it was decided: its finish, else its window's end.
func decidedAt(v pipeline.Verdict) time.Time {
	if !v.FinishedAt.IsZero() {
		return us(v.FinishedAt)
	}
	return us(v.Key.WindowEnd)
}

// newest is the decision in force on verdictID. The caller holds m.mu.
func (m *Memory) newest(verdictID uint64) (moderation.Decision, bool) {
	var (
		best  moderation.Decision
		found bool
	)
	for _, d := range m.decisions {
		if d.VerdictID == verdictID && d.Decision.Decision != moderation.DecisionUndo && d.ReversedAt.IsZero() && (!found || d.DecidedAt.After(best.DecidedAt) || (d.DecidedAt.Equal(best.DecidedAt) && d.ID > best.ID)) {
			best, found = d.Decision, true
		}
	}
	return best, found
}

func (m *Memory) newestOf(verdictID uint64) moderation.Newest {
	d, _ := m.newest(verdictID)
	return moderation.Newest{Decision: d.Decision, Label: d.Label}
}

// pageCursor is the fake's account and campaign cursor.
type pageCursor struct {
	At time.Time `json:"t"`
	ID uint64    `json:"i"`
	Of string    `json:"o"`
}

func encodePage(at time.Time, id uint64, of string) string {
	b, _ := json.Marshal(pageCursor{At: at, ID: id, Of: of}) // plain fields: cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePage(cursor, of string) (*pageCursor, error) {
	if cursor == "" {
		return nil, nil
	}
	var c pageCursor
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.Of != of || c.ID == 0 || c.At.IsZero() {
		return nil, fmt.Errorf("%w: not a cursor of this list", moderation.ErrBadCursor)
	}
	return &c, nil
}

// pageArgs checks a list's cursor and limit.
func pageArgs(cursor, of string, limit int) (*pageCursor, error) {
	cur, err := decodePage(cursor, of)
	if err == nil && (limit < 1 || limit > moderation.MaxAccountLimit) {
		err = fmt.Errorf("limit %d is not in 1..%d", limit, moderation.MaxAccountLimit)
	}
	return cur, err
}

// after reports whether (at, id) comes after cur, newest first.
func after(cur *pageCursor, at time.Time, id uint64) bool {
	return cur == nil || at.Before(cur.At) || (at.Equal(cur.At) && id < cur.ID)
}

// participants are the accounts the store records for v as having taken
// part: its participants, then its subjects on the offender's side, each
// sender once, its first side kept.
func participants(v pipeline.Verdict) []pipeline.HistoryAccount {
	out := slices.Clone(v.Participants)
	for _, s := range v.Subjects {
		out = append(out, pipeline.HistoryAccount{SenderID: s, Role: v.OffenderRole})
	}
	var seen []string
	return slices.DeleteFunc(out, func(a pipeline.HistoryAccount) bool {
		dup := slices.Contains(seen, a.SenderID)
		seen = append(seen, a.SenderID)
		return dup
	})
}

// AccountVerdicts implements moderation.Accounts.
func (m *Memory) AccountVerdicts(ctx context.Context, senderID, cursor string, limit int) (moderation.AccountPage, error) {
	if err := ctx.Err(); err != nil {
		return moderation.AccountPage{}, err
	}
	of := "account\x00" + senderID
	cur, err := pageArgs(cursor, of, limit)
	if err != nil {
		return moderation.AccountPage{}, fmt.Errorf("memory: account verdicts: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var items []moderation.AccountVerdict
	for id, v := range m.verdicts {
		if !v.SupersededAt.IsZero() {
			continue // a superseded revision: only current ones are listed, as in MySQL
		}
		i := slices.IndexFunc(participants(v), func(a pipeline.HistoryAccount) bool { return a.SenderID == senderID })
		if i < 0 || !after(cur, decidedAt(v), id) {
			continue
		}
		items = append(items, moderation.AccountVerdict{VerdictID: id, RoomID: v.Key.RoomID, Role: participants(v)[i].Role,
			Subject: slices.Contains(v.Subjects, senderID), Label: v.Label, Category: v.Category, DecidedAt: decidedAt(v), Newest: m.newestOf(id)})
	}
	slices.SortFunc(items, func(a, b moderation.AccountVerdict) int {
		return cmp.Or(b.DecidedAt.Compare(a.DecidedAt), cmp.Compare(b.VerdictID, a.VerdictID))
	})
	page := moderation.AccountPage{Items: items}
	if len(items) > limit {
		page.Items = items[:limit]
		page.Next = encodePage(items[limit-1].DecidedAt, items[limit-1].VerdictID, of)
	}
	return page, nil
}

// AccountCampaigns implements moderation.Accounts: one line a campaign
// (the join's id, else the mark), its Rooms and Senders the largest its
// rows carry, as storage/mysql reads them.
func (m *Memory) AccountCampaigns(ctx context.Context, senderID string) ([]moderation.CampaignMark, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	byMark := map[string]*moderation.CampaignMark{}
	rooms := map[string]map[string]bool{}
	for id, v := range m.verdicts {
		if !v.SupersededAt.IsZero() {
			continue // a superseded revision: only current ones are listed, as in MySQL
		}
		if !slices.Contains(v.Subjects, senderID) {
			continue
		}
		for _, c := range m.rowsOf(id) {
			if c.class == pipeline.ClassSighting {
				continue
			}
			k := m.campaignID(c.Mark)
			cm := byMark[k]
			if cm == nil {
				cm = &moderation.CampaignMark{Kind: string(c.Kind), Mark: k, RepeatSender: true}
				byMark[k], rooms[k] = cm, map[string]bool{}
			}
			cm.Kind = min(cm.Kind, string(c.Kind))
			cm.RepeatSender = cm.RepeatSender && c.class == pipeline.ClassRepeatSender
			cm.Rooms, cm.Senders = max(cm.Rooms, c.Rooms), max(cm.Senders, c.Senders)
			if at := decidedAt(v); at.After(cm.LastAt) {
				cm.LastAt = at
			}
			rooms[k][v.Key.RoomID] = true
			cm.Here = len(rooms[k])
		}
	}
	var out []moderation.CampaignMark
	for _, cm := range byMark {
		out = append(out, *cm)
	}
	slices.SortFunc(out, func(a, b moderation.CampaignMark) int {
		return cmp.Or(b.LastAt.Compare(a.LastAt), cmp.Compare(a.Mark, b.Mark))
	})
	return out[:min(len(out), moderation.MaxMarks)], nil
}

// VerdictCampaigns implements moderation.Accounts.
func (m *Memory) VerdictCampaigns(ctx context.Context, verdictID uint64) ([]moderation.CampaignMark, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.verdicts[verdictID]
	if !ok {
		return nil, nil
	}
	var out []moderation.CampaignMark
	for _, c := range m.rowsOf(verdictID) {
		if c.class != pipeline.ClassSighting {
			out = append(out, moderation.CampaignMark{Kind: string(c.Kind), Mark: c.Mark, Rooms: c.Rooms, Senders: c.Senders, Here: 1, LastAt: decidedAt(v),
				RepeatSender: c.class == pipeline.ClassRepeatSender})
		}
	}
	slices.SortFunc(out, func(a, b moderation.CampaignMark) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Mark, b.Mark))
	})
	return out[:min(len(out), moderation.MaxMarks)], nil
}

// CampaignRooms implements moderation.Accounts.
func (m *Memory) CampaignRooms(ctx context.Context, mark, cursor string, limit int) (moderation.CampaignPage, error) {
	if err := ctx.Err(); err != nil {
		return moderation.CampaignPage{}, err
	}
	of := "campaign\x00" + mark
	cur, err := pageArgs(cursor, of, limit)
	if err == nil && (mark == "" || len(mark) > 40) {
		err = moderation.ErrBadMark
	}
	if err != nil {
		return moderation.CampaignPage{}, fmt.Errorf("memory: campaign rooms: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var items []moderation.CampaignRoom
	marks := m.campaignOf(mark)
	for id, v := range m.verdicts {
		if !v.SupersededAt.IsZero() {
			continue // a superseded revision: only current ones are listed, as in MySQL
		}
		rows := m.campaignRows(id, marks)
		if len(rows) == 0 || !after(cur, decidedAt(v), id) {
			continue
		}
		// One line a room: its row of the campaign's smallest mark.
		c := rows[0]
		r := moderation.CampaignRoom{VerdictID: id, Key: v.Key, Kind: string(c.Kind), MessageID: c.MessageID, Label: v.Label,
			Category: v.Category, Action: v.Action, DecidedAt: decidedAt(v), Newest: m.newestOf(id)}
		if t, ok := m.takes[id]; ok {
			r.TakenBy, r.TakenActiveAt = t.Moderator, t.ActiveAt
		}
		items = append(items, r)
	}
	slices.SortFunc(items, func(a, b moderation.CampaignRoom) int {
		return cmp.Or(b.DecidedAt.Compare(a.DecidedAt), cmp.Compare(b.VerdictID, a.VerdictID))
	})
	page := moderation.CampaignPage{Items: items}
	if len(items) > limit {
		page.Items = items[:limit]
		page.Next = encodePage(items[limit-1].DecidedAt, items[limit-1].VerdictID, of)
	}
	return page, nil
}

// AccountHistory implements pipeline.AccountHistory over the verdicts'
// subjects, as storage/mysql counts them.
func (m *Memory) AccountHistory(ctx context.Context, q pipeline.HistoryQuery) ([]pipeline.HistoryCount, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("memory: account history: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(q.Accounts) == 0 {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rooms := map[pipeline.HistoryCount]map[string]bool{}
	for id, v := range m.verdicts {
		if !v.SupersededAt.IsZero() {
			continue // a superseded revision: only current ones are listed, as in MySQL
		}
		if v.Key.RoomID == q.ExcludeRoom || decidedAt(v).Before(us(q.Since)) {
			continue
		}
		d, ok := m.newest(id)
		for _, a := range q.Accounts {
			if !slices.Contains(v.Subjects, a.SenderID) {
				continue
			}
			k := pipeline.HistoryCount{Role: a.Role, Label: v.Label, Category: v.Category, Overturned: ok && d.Decision == moderation.DecisionOverturn}
			if rooms[k] == nil {
				rooms[k] = map[string]bool{}
			}
			rooms[k][v.Key.RoomID] = true
		}
	}
	out := make([]pipeline.HistoryCount, 0, len(rooms))
	for k, r := range rooms {
		k.Rooms = len(r)
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b pipeline.HistoryCount) int {
		return cmp.Or(cmp.Compare(b.Rooms, a.Rooms), cmp.Compare(a.Role, b.Role), cmp.Compare(a.Label, b.Label),
			cmp.Compare(a.Category, b.Category), compareBool(a.Overturned, b.Overturned))
	})
	return out[:min(len(out), pipeline.MaxHistoryLines)], nil
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
