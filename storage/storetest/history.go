package storetest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// HistoryRecord is one earlier verdict about one sender, as an account
// history reads it: the room, the verdict's label and category, when it
// was decided, and the moderators' decisions on it in order ("confirm" or
// "overturn"; the last one stands).
type HistoryRecord struct {
	Room      string
	Sender    string
	Label     pipeline.Label
	Category  pipeline.Category
	DecidedAt time.Time
	Decisions []string
}

// History is an in-memory pipeline.AccountHistory for unit tests: it
// answers from the records added, as the MySQL adapter answers from
// verdict_subjects (RunAccountHistoryConformance holds both to one
// behaviour). It is safe for concurrent use.
type History struct {
	mu      sync.Mutex
	records []HistoryRecord
}

var _ pipeline.AccountHistory = (*History)(nil)

// Add records an earlier verdict about a sender.
func (h *History) Add(r HistoryRecord) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
}

// AccountHistory implements pipeline.AccountHistory.
func (h *History) AccountHistory(ctx context.Context, q pipeline.HistoryQuery) ([]pipeline.HistoryCount, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("storetest: account history: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("storetest: account history: %w", context.Cause(ctx))
	}
	if len(q.Accounts) == 0 {
		return nil, nil
	}
	role := map[string]pipeline.SenderRole{}
	for _, a := range q.Accounts {
		role[a.SenderID] = a.Role
	}
	rooms := map[pipeline.HistoryCount]map[string]bool{}
	h.mu.Lock()
	for _, r := range h.records {
		who, ok := role[r.Sender]
		if !ok || r.Room == q.ExcludeRoom || r.DecidedAt.Before(q.Since) {
			continue
		}
		k := pipeline.HistoryCount{Role: who, Label: r.Label, Category: r.Category,
			Overturned: len(r.Decisions) > 0 && r.Decisions[len(r.Decisions)-1] == "overturn"}
		if rooms[k] == nil {
			rooms[k] = map[string]bool{}
		}
		rooms[k][r.Room] = true
	}
	h.mu.Unlock()
	var out []pipeline.HistoryCount
	for k, set := range rooms {
		k.Rooms = len(set)
		out = append(out, k)
	}
	SortHistory(out)
	return out[:min(len(out), pipeline.MaxHistoryLines)], nil
}

// SortHistory orders history lines as the adapters return them: most
// rooms first, then by role, label, category, and not overturned first.
func SortHistory(lines []pipeline.HistoryCount) {
	slices.SortFunc(lines, func(a, b pipeline.HistoryCount) int {
		return cmp.Or(cmp.Compare(b.Rooms, a.Rooms), cmp.Compare(a.Role, b.Role), cmp.Compare(a.Label, b.Label),
			cmp.Compare(a.Category, b.Category), boolOrder(a.Overturned, b.Overturned))
	})
}

func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// RunAccountHistoryConformance checks that a pipeline.AccountHistory
// counts as the reviewer relies on: distinct rooms, not verdicts; only the
// asked accounts, under the role each has in the room under review; never
// the room under review itself; only since the cut-off; a verdict whose
// newest decision overturned it as overturned and not in its label's
// rooms, and one confirmed after an overturn counts again; most rooms
// first; nothing for no accounts; a bad query refused. newHistory returns
// an empty history and the function that records an earlier verdict in it.
func RunAccountHistoryConformance(t *testing.T, newHistory func(t *testing.T) (pipeline.AccountHistory, func(HistoryRecord))) {
	t.Helper()
	h, add := newHistory(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ago := func(hours int) time.Time { return now.Add(-time.Duration(hours) * time.Hour) }
	abusive := func(room, sender string, hours int, decisions ...string) {
		add(HistoryRecord{Room: room, Sender: sender, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment,
			DecidedAt: ago(hours), Decisions: decisions})
	}
	abusive("h-room-1", "scammer", 2)
	abusive("h-room-1", "scammer", 5)      // the same room, another window
	abusive("h-room-2", "scammer-alt", 30) // a second account of the same side
	abusive("h-room-2", "scammer", 31)     // the same room through both accounts: once
	abusive("h-room-3", "scammer", 40, "overturn")
	add(HistoryRecord{Room: "h-room-4", Sender: "scammer", Label: pipeline.LabelSuspicious, Category: pipeline.CategoryOffPlatform,
		DecidedAt: ago(50), Decisions: []string{"overturn", "confirm"}}) // the newest decision stands
	abusive("h-room-5", "scammer", 31*24)      // older than the cut-off
	abusive("h-room-6", "someone-else", 3)     // not asked about
	abusive("h-room-now", "scammer", 1)        // the room under review
	abusive("h-room-7", "buyer-with-past", 10) // the other side, under its own role

	got, err := h.AccountHistory(ctx, pipeline.HistoryQuery{
		Accounts: []pipeline.HistoryAccount{
			{SenderID: "scammer", Role: pipeline.RoleSeller}, {SenderID: "scammer-alt", Role: pipeline.RoleSeller},
			{SenderID: "buyer-with-past", Role: pipeline.RoleBuyer}, {SenderID: "nobody", Role: pipeline.RoleBuyer},
		},
		ExcludeRoom: "h-room-now", Since: ago(30 * 24),
	})
	require.NoError(t, err)
	require.Equal(t, []pipeline.HistoryCount{
		{Role: pipeline.RoleSeller, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Rooms: 2},
		{Role: pipeline.RoleBuyer, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Rooms: 1},
		{Role: pipeline.RoleSeller, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Overturned: true, Rooms: 1},
		{Role: pipeline.RoleSeller, Label: pipeline.LabelSuspicious, Category: pipeline.CategoryOffPlatform, Rooms: 1},
	}, got)

	// Reviewing another room, the room excluded before is history.
	got, err = h.AccountHistory(ctx, pipeline.HistoryQuery{Accounts: []pipeline.HistoryAccount{{SenderID: "scammer", Role: pipeline.RoleBuyer}},
		ExcludeRoom: "h-room-1", Since: ago(30 * 24)})
	require.NoError(t, err)
	require.Contains(t, got, pipeline.HistoryCount{Role: pipeline.RoleBuyer, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Rooms: 2},
		"h-room-2 and h-room-now; h-room-1 is the room under review")

	none, err := h.AccountHistory(ctx, pipeline.HistoryQuery{Since: now})
	require.NoError(t, err)
	require.Empty(t, none)
	many := make([]pipeline.HistoryAccount, pipeline.MaxHistoryAccounts+1)
	for i := range many {
		many[i] = pipeline.HistoryAccount{SenderID: fmt.Sprint("a-", i), Role: pipeline.RoleBuyer}
	}
	_, err = h.AccountHistory(ctx, pipeline.HistoryQuery{Accounts: many, Since: now})
	require.ErrorContains(t, err, "at most")
	_, err = h.AccountHistory(ctx, pipeline.HistoryQuery{Accounts: []pipeline.HistoryAccount{{SenderID: "x", Role: pipeline.RoleSystem}}, Since: now})
	require.ErrorContains(t, err, "neither buyer nor seller")
}
