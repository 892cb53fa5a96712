package moderationtest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/campaign"
)

// JoinsStore is what the campaign join's suite needs: the accounts and
// takes views it changes, and the join's own port.
type JoinsStore interface {
	AccountsStore
	pipeline.CampaignJoins
}

// RunCampaignJoinConformance checks pipeline.CampaignJoins with the views
// that read its result: a script's early room (sightings only), the room
// where its band became a campaign and a variant's room pushed by the
// same account are one campaign after a join; the early room's sightings
// are linked to it (once: a second run links nothing); a phrase many
// senders wrote and a repeat sender's mark join nothing; the campaign
// view (one line a room), its open-room count, take and release cover
// the three rooms from any of its marks; the account page lists the
// campaign once; a linked sighting reads back as a sighting; a row
// carries its verdict's window, label and run. newStore
// returns a store over empty, isolated storage.
func RunCampaignJoinConformance(t *testing.T, newStore func(t *testing.T) JoinsStore) {
	t.Helper()
	t.Run("join and link", func(t *testing.T) { t.Parallel(); runJoinAndLink(t, newStore(t)) })
}

func runJoinAndLink(t *testing.T, s JoinsStore) {
	ctx := testCtx(t)
	a, b, c, d, phrase, shop := Mark(101), Mark(102), Mark(103), Mark(104), Mark(105), Mark(106)
	count := func(kind pipeline.CampaignKind, mark string, rooms, senders int, repeat bool) pipeline.CampaignCount {
		return pipeline.CampaignCount{Kind: kind, Mark: mark, MessageID: "m2", Rooms: rooms, Senders: senders, RepeatSender: repeat}
	}
	seed := func(room string, subjects []string, signals, sightings []pipeline.CampaignCount) uint64 {
		v := about(room, 0, time.Hour, subjects)
		v.Campaigns, v.Sightings = signals, sightings
		return Seed(t, s, v)
	}
	early := seed("room-join-early", nil, nil, []pipeline.CampaignCount{count(pipeline.CampaignScript, a, 1, 1, false), count(pipeline.CampaignContact, c, 1, 1, false)})
	seed("room-join-fourth", []string{Sender(7)}, []pipeline.CampaignCount{count(pipeline.CampaignScript, a, 4, 2, false)},
		[]pipeline.CampaignCount{count(pipeline.CampaignScript, phrase, 60, 55, false), count(pipeline.CampaignContact, d, 1, 1, false)})
	seed("room-join-variant", []string{Sender(7)}, []pipeline.CampaignCount{count(pipeline.CampaignScript, b, 5, 2, false)}, nil)
	seed("room-join-phrase", nil, nil, []pipeline.CampaignCount{count(pipeline.CampaignScript, phrase, 61, 56, false)})
	seed("room-join-shop", []string{Sender(8)}, []pipeline.CampaignCount{count(pipeline.CampaignContact, shop, 6, 1, true)}, nil)

	clk := clock.NewFake(T0.Add(2 * time.Hour))
	requireJoinRowWindow(t, s, early, clk.Now())
	j, err := campaign.NewJoiner(campaign.DefaultJoinConfig(), s, nil, clk)
	require.NoError(t, err)
	st, linked, err := j.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Campaigns)
	require.Equal(t, 3, linked, "the early room's two sightings and the fourth room's contact")

	for _, m := range []string{a, b, c, d} {
		page, err := s.CampaignRooms(ctx, m, "", 50)
		require.NoError(t, err)
		var rooms []string
		for _, it := range page.Items {
			rooms = append(rooms, it.Key.RoomID)
		}
		require.ElementsMatch(t, []string{"room-join-early", "room-join-fourth", "room-join-variant"}, rooms, "one line a room, from any mark of the campaign")
	}
	for _, m := range []string{phrase, shop} {
		page, err := s.CampaignRooms(ctx, m, "", 50)
		require.NoError(t, err)
		require.Empty(t, page.Items, "a phrase and a repeat sender join nothing")
	}
	open, err := s.CountOpenCampaignRooms(ctx, c)
	require.NoError(t, err)
	require.Equal(t, 3, open)
	took, err := s.TakeCampaign(ctx, d, "mod-a", clk.Now(), clk.Now().Add(-time.Hour))
	require.NoError(t, err)
	require.Equal(t, 3, took.Mine, "the take covers the whole campaign")
	released, err := s.ReleaseCampaign(ctx, a, "mod-a")
	require.NoError(t, err)
	require.Equal(t, 3, released)

	marks, err := s.AccountCampaigns(ctx, Sender(7))
	require.NoError(t, err)
	require.Len(t, marks, 1, "the account's rooms belong to one campaign")
	require.Equal(t, a, marks[0].Mark, "named by its smallest signal mark")
	require.Equal(t, 2, marks[0].Here)

	_, linked, err = j.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, linked, "linked once")
	v, err := s.VerdictByID(ctx, early)
	require.NoError(t, err)
	require.Len(t, v.Sightings, 2, "a linked sighting reads back as a sighting")
	got, err := s.VerdictCampaigns(ctx, early)
	require.NoError(t, err)
	require.Len(t, got, 2, "the room page shows the linked marks")
}

// requireJoinRowWindow checks that verdict id's join rows carry its
// window, label and run (what a campaign re-review needs).
func requireJoinRowWindow(t *testing.T, s JoinsStore, id uint64, now time.Time) {
	t.Helper()
	rows, err := s.JoinRows(testCtx(t), now.Add(-campaign.DefaultJoinWindow), 100)
	require.NoError(t, err)
	n := 0
	for _, r := range rows {
		if r.VerdictID != id {
			continue
		}
		n++
		require.Equal(t, "room-join-early", r.RoomID)
		require.True(t, r.WindowStart.Equal(T0) && r.WindowEnd.Equal(T0.Add(time.Hour)), "%s..%s", r.WindowStart, r.WindowEnd)
		require.Equal(t, pipeline.LabelAbusive, r.Label)
		require.Equal(t, "run-conf", r.RunID)
	}
	require.Equal(t, 2, n, "the early room's two sightings")
}
