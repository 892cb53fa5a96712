package mysql

import (
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

// subjectVerdict saves a flagged verdict about senders, finished at
// finished, and returns its row id.
func subjectVerdict(t *testing.T, s *Store, room string, finished time.Time, senders ...string) uint64 {
	t.Helper()
	ctx := ctxT(t)
	ws := finished.Add(-time.Hour)
	v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: room, WindowStart: ws, WindowEnd: finished, PipelineVersion: "v1"},
		RunID: "run", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Severity: 4,
		Action: pipeline.ActionRestrict, Attempts: 1, PublishedAt: ws, StartedAt: ws, FinishedAt: finished,
		Subjects: senders, OffenderRole: pipeline.RoleSeller}
	storetest.MustSave(t, ctx, s, v)
	id, err := s.VerdictID(ctx, v.Key)
	require.NoError(t, err)
	return id
}

// campaignRow writes the verdict_campaigns row the pipeline would write.
func campaignRow(t *testing.T, db *sql.DB, verdictID uint64, kind, mark, messageID string) {
	t.Helper()
	_, err := db.ExecContext(ctxT(t), `INSERT INTO verdict_campaigns (verdict_id, kind, mark, message_id, rooms, senders, room_id, label, category, decided_at)
		SELECT id, ?, ?, ?, 40, 12, room_id, label, category, finished_at FROM verdicts WHERE id = ?`, kind, mark, messageID, verdictID)
	require.NoError(t, err)
}

func TestAccountVerdictsPageNewestFirstWithTheDecisionInForce(t *testing.T) {
	db, s := migrated(t)
	ctx := ctxT(t)
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var ids []uint64 // oldest first
	for i, room := range []string{"r1", "r2", "r3", "r4", "r5"} {
		ids = append(ids, subjectVerdict(t, s, room, t0.Add(time.Duration(i)*time.Hour), "seller-1"))
	}
	other := subjectVerdict(t, s, "r6", t0.Add(10*time.Hour), "seller-2")
	_, err := s.AddDecision(ctx, moderation.Decision{VerdictID: ids[3], Moderator: "mod-a", Decision: moderation.DecisionOverturn, Label: pipeline.LabelClean, DecidedAt: t0.Add(20 * time.Hour)})
	require.NoError(t, err)

	var got []moderation.AccountVerdict
	cursor, pages := "", 0
	for {
		page, err := s.AccountVerdicts(ctx, "seller-1", cursor, 2)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Items), 2)
		got, cursor, pages = append(got, page.Items...), page.Next, pages+1
		if cursor == "" {
			break
		}
	}
	require.Equal(t, 3, pages)
	require.Len(t, got, 5)
	for i, v := range got {
		require.Equal(t, ids[4-i], v.VerdictID, "newest first")
		require.NotEqual(t, other, v.VerdictID)
		require.Equal(t, pipeline.RoleSeller, v.Role)
	}
	require.Equal(t, moderation.Newest{Decision: moderation.DecisionOverturn, Label: pipeline.LabelClean}, got[1].Newest)
	require.Equal(t, moderation.Newest{}, got[0].Newest)
	require.Equal(t, t0.Add(4*time.Hour), got[0].DecidedAt)

	// A cursor from one account does not page another.
	page, err := s.AccountVerdicts(ctx, "seller-1", "", 1)
	require.NoError(t, err)
	_, err = s.AccountVerdicts(ctx, "seller-2", page.Next, 1)
	require.ErrorIs(t, err, moderation.ErrBadCursor)
	_, err = s.AccountVerdicts(ctx, "seller-1", "", moderation.MaxAccountLimit+1)
	require.Error(t, err)

	// The account's campaigns: none until the pipeline writes signals.
	marks, err := s.AccountCampaigns(ctx, "seller-1")
	require.NoError(t, err)
	require.Empty(t, marks)
	campaignRow(t, db, ids[0], "script", "hmac:aaaaaaaaaaaaaaaaaaaaaaaa", "m3")
	campaignRow(t, db, ids[2], "script", "hmac:aaaaaaaaaaaaaaaaaaaaaaaa", "m4")
	campaignRow(t, db, ids[2], "contact", "hmac:bbbbbbbbbbbbbbbbbbbbbbbb", "m3")
	campaignRow(t, db, other, "contact", "hmac:cccccccccccccccccccccccc", "m1")
	marks, err = s.AccountCampaigns(ctx, "seller-1")
	require.NoError(t, err)
	require.Len(t, marks, 2, "seller-2's campaign is not seller-1's")
	byMark := map[string]moderation.CampaignMark{}
	for _, m := range marks {
		byMark[m.Mark] = m
	}
	require.Equal(t, 2, byMark["hmac:aaaaaaaaaaaaaaaaaaaaaaaa"].Here, "two of the account's rooms ran the script")
	require.Equal(t, 40, byMark["hmac:aaaaaaaaaaaaaaaaaaaaaaaa"].Rooms)
	require.Equal(t, "contact", byMark["hmac:bbbbbbbbbbbbbbbbbbbbbbbb"].Kind)

	vm, err := s.VerdictCampaigns(ctx, ids[2])
	require.NoError(t, err)
	require.Len(t, vm, 2)
	require.Equal(t, []string{"contact", "script"}, []string{vm[0].Kind, vm[1].Kind})
}

func TestCampaignRoomsCarryTheirTakeMessageAndDecision(t *testing.T) {
	db, s := migrated(t)
	ctx := ctxT(t)
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	const mark = "hmac:dddddddddddddddddddddddd"
	var ids []uint64
	for i, room := range []string{"c1", "c2", "c3"} {
		id := subjectVerdict(t, s, room, t0.Add(time.Duration(i)*time.Minute), "seller-"+room)
		campaignRow(t, db, id, "script", mark, "m-"+room)
		ids = append(ids, id)
	}
	loner := subjectVerdict(t, s, "c4", t0, "seller-c4")
	campaignRow(t, db, loner, "script", "hmac:eeeeeeeeeeeeeeeeeeeeeeee", "m1")
	_, err := s.TakeItem(ctx, ids[1], "mod-b", t0, t0.Add(-time.Minute), false)
	require.NoError(t, err)
	_, err = s.AddDecision(ctx, moderation.Decision{VerdictID: ids[0], Moderator: "mod-a", Decision: moderation.DecisionConfirm, Label: pipeline.LabelAbusive,
		Category: pipeline.CategoryExternalPayment, DecidedAt: t0.Add(time.Hour)})
	require.NoError(t, err)

	first, err := s.CampaignRooms(ctx, mark, "", 2)
	require.NoError(t, err)
	require.Len(t, first.Items, 2)
	require.NotEmpty(t, first.Next)
	rest, err := s.CampaignRooms(ctx, mark, first.Next, 2)
	require.NoError(t, err)
	require.Empty(t, rest.Next)
	all := append(first.Items, rest.Items...)
	require.Equal(t, []uint64{ids[2], ids[1], ids[0]}, []uint64{all[0].VerdictID, all[1].VerdictID, all[2].VerdictID})
	require.Equal(t, "m-c3", all[0].MessageID)
	require.Equal(t, "c3", all[0].Key.RoomID)
	require.Equal(t, t0.Add(2*time.Minute-time.Hour), all[0].Key.WindowStart, "the verdict's window, to fetch the message live")
	require.Equal(t, pipeline.ActionRestrict, all[0].Action)
	require.Equal(t, "mod-b", all[1].TakenBy)
	require.Equal(t, t0, all[1].TakenActiveAt)
	require.Equal(t, moderation.Newest{Decision: moderation.DecisionConfirm, Label: pipeline.LabelAbusive}, all[2].Newest)

	_, err = s.CampaignRooms(ctx, "", "", 10)
	require.ErrorIs(t, err, moderation.ErrBadMark)
	_, err = s.CampaignRooms(ctx, "hmac:eeeeeeeeeeeeeeeeeeeeeeee", first.Next, 2)
	require.ErrorIs(t, err, moderation.ErrBadCursor)
}

// An account's page lists every room it took part in: the verdicts naming
// it as a subject and those where it was only the other side (a victim,
// or a clean room), marked apart; a re-save replaces the participants,
// and an erasure removes them.
func TestAccountVerdictsListRoomsTheAccountOnlyTookPartIn(t *testing.T) {
	db, s := migrated(t)
	ctx := ctxT(t)
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	save := func(room string, finished time.Time, label pipeline.Label, subjects []string, parts ...pipeline.HistoryAccount) pipeline.Verdict {
		ws := finished.Add(-time.Hour)
		v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: room, WindowStart: ws, WindowEnd: finished, PipelineVersion: "v1"},
			RunID: "run", Status: pipeline.StatusDone, Label: label, Category: pipeline.CategoryExternalPayment, Severity: 4,
			Action: pipeline.ActionRestrict, Attempts: 1, PublishedAt: ws, StartedAt: ws, FinishedAt: finished, Participants: parts}
		if label == pipeline.LabelClean {
			v.Category, v.Action = "", pipeline.ActionNone
		}
		if len(subjects) > 0 {
			v.Subjects, v.OffenderRole = subjects, pipeline.RoleSeller
		}
		storetest.MustSave(t, ctx, s, v)
		return v
	}
	buyer, seller := pipeline.HistoryAccount{SenderID: "buyer-1", Role: pipeline.RoleBuyer}, pipeline.HistoryAccount{SenderID: "seller-1", Role: pipeline.RoleSeller}
	save("room-scam", t0.Add(-time.Hour), pipeline.LabelAbusive, []string{"seller-1"}, seller, buyer)
	save("room-clean", t0.Add(-2*time.Hour), pipeline.LabelClean, nil, buyer, pipeline.HistoryAccount{SenderID: "seller-2", Role: pipeline.RoleSeller})
	// A worker that records no participants: its subjects still list.
	save("room-old-worker", t0.Add(-3*time.Hour), pipeline.LabelAbusive, []string{"seller-1"})

	type row struct {
		Room    string
		Role    pipeline.SenderRole
		Subject bool
		Label   pipeline.Label
	}
	rows := func(sender string) []row {
		page, err := s.AccountVerdicts(ctx, sender, "", 10)
		require.NoError(t, err)
		var out []row
		for _, it := range page.Items {
			out = append(out, row{it.RoomID, it.Role, it.Subject, it.Label})
		}
		return out
	}
	require.Equal(t, []row{{"room-scam", pipeline.RoleBuyer, false, pipeline.LabelAbusive}, {"room-clean", pipeline.RoleBuyer, false, pipeline.LabelClean}},
		rows("buyer-1"), "the victim's rooms, never as a subject")
	require.Equal(t, []row{{"room-scam", pipeline.RoleSeller, true, pipeline.LabelAbusive}, {"room-old-worker", pipeline.RoleSeller, true, pipeline.LabelAbusive}},
		rows("seller-1"))

	// A re-save replaces the participants (the label is the verdict's).
	v := save("room-clean", t0.Add(-2*time.Hour), pipeline.LabelSuspicious, nil, pipeline.HistoryAccount{SenderID: "seller-2", Role: pipeline.RoleSeller})
	require.Equal(t, []row{{"room-scam", pipeline.RoleBuyer, false, pipeline.LabelAbusive}}, rows("buyer-1"))
	require.Equal(t, []row{{"room-clean", pipeline.RoleSeller, false, pipeline.LabelSuspicious}}, rows("seller-2"))

	// Bounded as the table holds them.
	v.Participants = []pipeline.HistoryAccount{{SenderID: "x", Role: "system"}}
	_, err := s.Save(ctx, v)
	require.Error(t, err)

	n, err := s.CountSenderSubjects(ctx, "buyer-1")
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	n, err = s.EraseSender(ctx, "buyer-1")
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.Empty(t, rows("buyer-1"))
	var left int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM verdict_participants").Scan(&left))
	require.Equal(t, 3, left)
}
