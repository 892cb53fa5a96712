package moderationtest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// AccountsStore is what the accounts suite runs on: the port, and
// verdicts, decisions and takes to list.
type AccountsStore interface {
	moderation.Verdicts
	moderation.Accounts
	moderation.Decisions
	moderation.Takes
}

// Sender returns a sender id (a keyed pseudonym) unique to n.
func Sender(n int) string { return fmt.Sprintf("hmac:%024x", 0xa11ce0000000+n) }

// about is Verdict(room) with its window at T0 plus at, finished at T0
// plus finished, naming subjects (on the seller side) and listing
// participants beside them.
func about(room string, at, finished time.Duration, subjects []string, parts ...pipeline.HistoryAccount) pipeline.Verdict {
	v := Verdict(room)
	v.Key.WindowStart, v.Key.WindowEnd, v.FinishedAt = T0.Add(at), T0.Add(at+time.Hour), T0.Add(finished)
	v.OffenderRole, v.Subjects, v.Participants = pipeline.RoleSeller, subjects, parts
	return v
}

func decideAs(t *testing.T, s moderation.Decisions, id uint64, decision string, label pipeline.Label, at time.Time) {
	t.Helper()
	d := moderation.Decision{VerdictID: id, Moderator: "mod-x", Decision: decision, Label: label, DecidedAt: at}
	if label != pipeline.LabelClean {
		d.Category = pipeline.CategoryExternalPayment
	}
	_, err := s.AddDecision(testCtx(t), d)
	require.NoError(t, err)
}

// RunAccountsConformance checks moderation.Accounts: an account's
// verdicts (rooms it took part in, subjects marked, its side, the
// decision in force) and a campaign's rooms (with their takes) are paged
// newest first by verdict time then id with cursors bound to their list;
// the marks of an account's and of one verdict's rooms; bad limits, marks
// and cursors refused; and the account history counts distinct rooms per
// role, label, category and overturn, the room under review and verdicts
// before Since left out. newStore returns a store over empty, isolated
// storage.
func RunAccountsConformance(t *testing.T, newStore func(t *testing.T) AccountsStore) {
	t.Helper()
	t.Run("account verdicts", func(t *testing.T) { t.Parallel(); runAccountVerdicts(t, newStore(t)) })
	t.Run("marks", func(t *testing.T) { t.Parallel(); runAccountMarks(t, newStore(t)) })
	t.Run("campaign rooms", func(t *testing.T) { t.Parallel(); runCampaignRooms(t, newStore(t)) })
	t.Run("history", func(t *testing.T) { t.Parallel(); runAccountHistory(t, newStore(t)) })
}

func runAccountVerdicts(t *testing.T, s AccountsStore) {
	ctx, who, other := testCtx(t), Sender(1), Sender(2)
	v1 := Seed(t, s, about("room-acc-1", 0, time.Hour, []string{who}))
	v2 := Seed(t, s, about("room-acc-2", 0, 2*time.Hour, []string{other}, pipeline.HistoryAccount{SenderID: who, Role: pipeline.RoleBuyer}))
	v3 := Seed(t, s, about("room-acc-3", time.Hour, 2*time.Hour, []string{who, other}))
	Seed(t, s, about("room-acc-4", 0, 3*time.Hour, []string{other}))
	decideAs(t, s, v1, moderation.DecisionConfirm, pipeline.LabelAbusive, T0.Add(3*time.Hour))
	decideAs(t, s, v1, moderation.DecisionOverturn, pipeline.LabelClean, T0.Add(4*time.Hour))
	page, err := s.AccountVerdicts(ctx, who, "", 2)
	require.NoError(t, err)
	require.Len(t, page.Items, 2)
	require.Equal(t, []uint64{v3, v2}, []uint64{page.Items[0].VerdictID, page.Items[1].VerdictID}, "newest first, then id descending")
	require.Equal(t, moderation.AccountVerdict{VerdictID: v2, RoomID: "room-acc-2", Role: pipeline.RoleBuyer, Label: pipeline.LabelAbusive,
		Category: pipeline.CategoryExternalPayment, DecidedAt: T0.Add(2 * time.Hour)}, page.Items[1], "a participant, not a subject")
	require.True(t, page.Items[0].Subject)
	require.Equal(t, pipeline.RoleSeller, page.Items[0].Role, "a subject is on the offender's side")
	require.NotEmpty(t, page.Next)
	last, err := s.AccountVerdicts(ctx, who, page.Next, 2)
	require.NoError(t, err)
	require.Len(t, last.Items, 1)
	require.Empty(t, last.Next)
	require.Equal(t, v1, last.Items[0].VerdictID)
	require.Equal(t, moderation.Newest{Decision: moderation.DecisionOverturn, Label: pipeline.LabelClean}, last.Items[0].Newest, "the decision in force")
	none, err := s.AccountVerdicts(ctx, Sender(99), "", 10)
	require.NoError(t, err)
	require.Empty(t, none.Items)
	require.Empty(t, none.Next)
	for _, limit := range []int{0, moderation.MaxAccountLimit + 1} {
		_, err = s.AccountVerdicts(ctx, who, "", limit)
		require.Error(t, err, "limit %d", limit)
	}
	for _, c := range []string{"not base64 !", page.Next[:len(page.Next)-2]} {
		_, err = s.AccountVerdicts(ctx, who, c, 2)
		require.ErrorIs(t, err, moderation.ErrBadCursor)
	}
	_, err = s.AccountVerdicts(ctx, other, page.Next, 2)
	require.ErrorIs(t, err, moderation.ErrBadCursor, "a cursor of another sender")
}

func runAccountMarks(t *testing.T, s AccountsStore) {
	ctx, who := testCtx(t), Sender(1)
	early := about("room-mark-1", 0, time.Hour, []string{who})
	early.Campaigns = []pipeline.CampaignCount{{Kind: pipeline.CampaignScript, Mark: Mark(1), MessageID: "m1", Rooms: 3, Senders: 2}}
	Seed(t, s, early)
	late := about("room-mark-2", 0, 2*time.Hour, []string{who})
	late.Campaigns = []pipeline.CampaignCount{{Kind: pipeline.CampaignScript, Mark: Mark(1), MessageID: "m4", Rooms: 5, Senders: 4},
		{Kind: pipeline.CampaignContact, Mark: Mark(2), MessageID: "m2", Rooms: 7, Senders: 1, RepeatSender: true}}
	lateID := Seed(t, s, late)
	elsewhere := about("room-mark-3", 0, 3*time.Hour, []string{Sender(2)}, pipeline.HistoryAccount{SenderID: who, Role: pipeline.RoleBuyer})
	elsewhere.Campaigns = []pipeline.CampaignCount{{Kind: pipeline.CampaignScript, Mark: Mark(3), MessageID: "m1", Rooms: 1, Senders: 1}}
	Seed(t, s, elsewhere)
	got, err := s.AccountCampaigns(ctx, who)
	require.NoError(t, err)
	at := T0.Add(2 * time.Hour)
	require.Equal(t, []moderation.CampaignMark{
		{Kind: "script", Mark: Mark(1), Rooms: 5, Senders: 4, Here: 2, LastAt: at},
		{Kind: "contact", Mark: Mark(2), Rooms: 7, Senders: 1, Here: 1, LastAt: at, RepeatSender: true},
	}, got, "the subject's marks only, the most recent first (then by mark), Here counting its rooms")
	got, err = s.VerdictCampaigns(ctx, lateID)
	require.NoError(t, err)
	require.Equal(t, []moderation.CampaignMark{
		{Kind: "contact", Mark: Mark(2), Rooms: 7, Senders: 1, Here: 1, LastAt: at, RepeatSender: true},
		{Kind: "script", Mark: Mark(1), Rooms: 5, Senders: 4, Here: 1, LastAt: at},
	}, got, "by kind, then mark")
	page, err := s.CampaignRooms(ctx, Mark(2), "", 10)
	require.NoError(t, err)
	require.Empty(t, page.Items, "a repeat sender's mark is no campaign: no rooms to take or decide in bulk")
	got, err = s.VerdictCampaigns(ctx, 987654321)
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = s.AccountCampaigns(ctx, Sender(99))
	require.NoError(t, err)
	require.Empty(t, got)
}

func runCampaignRooms(t *testing.T, s AccountsStore) {
	ctx, mark := testCtx(t), Mark(1)
	Seed(t, s, about("room-cr-a", 0, time.Hour, nil))
	bv := Verdict("room-cr-b", Mark(2), mark)
	bv.FinishedAt = T0.Add(2 * time.Hour)
	b := Seed(t, s, bv)
	Seed(t, s, about("room-cr-c", 0, 3*time.Hour, nil))
	same := Verdict("room-cr-a2", mark)
	same.FinishedAt = bv.FinishedAt // the same time as b's: ordered by id
	Seed(t, s, same)
	_, err := s.TakeItem(ctx, b, "mod-a", T0.Add(time.Minute), T0, false)
	require.NoError(t, err)
	decideAs(t, s, b, moderation.DecisionConfirm, pipeline.LabelAbusive, T0.Add(3*time.Hour))
	page, err := s.CampaignRooms(ctx, mark, "", 1)
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	next, err := s.CampaignRooms(ctx, mark, page.Next, 5)
	require.NoError(t, err)
	require.Empty(t, next.Next)
	all := append(page.Items, next.Items...)
	require.Len(t, all, 2, "only the verdicts carrying the mark")
	require.Equal(t, "room-cr-a2", all[0].Key.RoomID, "same time: the higher id first")
	got := all[1]
	require.Equal(t, moderation.CampaignRoom{VerdictID: b, Key: bv.Key, Kind: "script", MessageID: "m2", Label: pipeline.LabelAbusive,
		Category: pipeline.CategoryExternalPayment, Action: pipeline.ActionWarn, DecidedAt: T0.Add(2 * time.Hour), TakenBy: "mod-a",
		TakenActiveAt: T0.Add(time.Minute), Newest: moderation.Newest{Decision: moderation.DecisionConfirm, Label: pipeline.LabelAbusive}}, got)
	for _, bad := range []string{"", strings.Repeat("x", 41)} {
		_, err = s.CampaignRooms(ctx, bad, "", 5)
		require.ErrorIs(t, err, moderation.ErrBadMark)
	}
	_, err = s.CampaignRooms(ctx, mark, "", 0)
	require.Error(t, err)
	_, err = s.CampaignRooms(ctx, mark, "garbage!", 5)
	require.ErrorIs(t, err, moderation.ErrBadCursor)
	_, err = s.CampaignRooms(ctx, Mark(2), page.Next, 5)
	require.ErrorIs(t, err, moderation.ErrBadCursor, "a cursor of another mark")
	empty, err := s.CampaignRooms(ctx, Mark(99), "", 5)
	require.NoError(t, err)
	require.Empty(t, empty.Items)
}

func runAccountHistory(t *testing.T, s AccountsStore) {
	ctx, who, other := testCtx(t), Sender(1), Sender(2)
	harass := func(v pipeline.Verdict) pipeline.Verdict { v.Category = pipeline.CategoryHarassment; return v }
	overturned := Seed(t, s, about("room-h-1", 0, time.Hour, []string{who}))
	decideAs(t, s, overturned, moderation.DecisionConfirm, pipeline.LabelAbusive, T0.Add(2*time.Hour))
	decideAs(t, s, overturned, moderation.DecisionOverturn, pipeline.LabelClean, T0.Add(3*time.Hour))
	Seed(t, s, harass(about("room-h-2", 0, time.Hour, []string{who})))
	Seed(t, s, harass(about("room-h-2", time.Hour, 2*time.Hour, []string{who}))) // the same room again
	Seed(t, s, harass(about("room-h-3", 0, time.Hour, []string{other})))
	Seed(t, s, harass(about("room-h-4", 0, time.Hour, []string{who, other})))
	Seed(t, s, harass(about("room-h-now", 0, time.Hour, []string{who})))
	Seed(t, s, harass(about("room-h-old", -48*time.Hour, -47*time.Hour, []string{who})))
	Seed(t, s, harass(about("room-h-part", 0, time.Hour, []string{Sender(3)}, pipeline.HistoryAccount{SenderID: who, Role: pipeline.RoleBuyer})))
	got, err := s.AccountHistory(ctx, pipeline.HistoryQuery{Accounts: []pipeline.HistoryAccount{{SenderID: who, Role: pipeline.RoleBuyer},
		{SenderID: other, Role: pipeline.RoleSeller}}, ExcludeRoom: "room-h-now", Since: T0})
	require.NoError(t, err)
	require.Equal(t, []pipeline.HistoryCount{
		{Role: pipeline.RoleBuyer, Label: pipeline.LabelAbusive, Category: pipeline.CategoryHarassment, Rooms: 2},
		{Role: pipeline.RoleSeller, Label: pipeline.LabelAbusive, Category: pipeline.CategoryHarassment, Rooms: 2},
		{Role: pipeline.RoleBuyer, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Overturned: true, Rooms: 1},
	}, got, "rooms, not verdicts; the query's role; subjects only; the room under review and verdicts before Since left out")
	none, err := s.AccountHistory(ctx, pipeline.HistoryQuery{})
	require.NoError(t, err)
	require.Nil(t, none)
	_, err = s.AccountHistory(ctx, pipeline.HistoryQuery{Accounts: []pipeline.HistoryAccount{{SenderID: who, Role: "admin"}}})
	require.Error(t, err)
}
