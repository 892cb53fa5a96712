package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/campaign"
	"github.com/chatguard/chatguard/storage/storetest"
)

const (
	markC = "hmac:c00000000000000000000001"
	markD = "hmac:d00000000000000000000001"
	markE = "hmac:e00000000000000000000001"
	markS = "hmac:f00000000000000000000001"
)

// TestCampaignJoinMakesOneCampaignAndLinksItsFirstRooms: a script's early
// room (sightings only), the room where its band became a campaign, and a
// variant's room pushed by the same account are one campaign; the early
// room's sightings are linked to it (once: a second run links nothing),
// a phrase many senders wrote and a repeat sender's mark join nothing, and
// the campaign view, its count and its take cover the three rooms.
func TestCampaignJoinMakesOneCampaignAndLinksItsFirstRooms(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	seed := func(room string, subjects []string, signals, sightings []pipeline.CampaignCount) {
		v := storetest.SampleVerdict(room)
		v.Subjects, v.Campaigns, v.Sightings, v.OffenderRole = subjects, signals, sightings, pipeline.RoleSeller
		_, err := s.Save(ctx, v)
		require.NoError(t, err)
	}
	count := func(kind pipeline.CampaignKind, mark string, rooms, senders int, repeat bool) pipeline.CampaignCount {
		return pipeline.CampaignCount{Kind: kind, Mark: mark, MessageID: "m2", Rooms: rooms, Senders: senders, RepeatSender: repeat}
	}
	seed("room-early", nil, nil, []pipeline.CampaignCount{count(pipeline.CampaignScript, markA, 1, 1, false), count(pipeline.CampaignContact, markC, 1, 1, false)})
	seed("room-fourth", []string{"acct-1"}, []pipeline.CampaignCount{count(pipeline.CampaignScript, markA, 4, 2, false)},
		[]pipeline.CampaignCount{count(pipeline.CampaignContact, markD, 1, 1, false), count(pipeline.CampaignScript, markE, 60, 55, false)})
	seed("room-variant", []string{"acct-1"}, []pipeline.CampaignCount{count(pipeline.CampaignScript, markB, 5, 2, false)}, nil)
	seed("room-phrase", nil, nil, []pipeline.CampaignCount{count(pipeline.CampaignScript, markE, 61, 56, false)})
	seed("room-shop", []string{"shop-1"}, []pipeline.CampaignCount{count(pipeline.CampaignContact, markS, 6, 1, true)}, nil)

	clk := clock.NewFake(storetest.SampleVerdict("x").FinishedAt.Add(time.Hour))
	j, err := campaign.NewJoiner(campaign.DefaultJoinConfig(), s, nil, clk)
	require.NoError(t, err)
	st, linked, err := j.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Campaigns)
	require.Equal(t, 3, linked, "the early room's two sightings and the fourth room's contact")

	for _, m := range []string{markA, markB, markC, markD} {
		var c string
		require.NoError(t, s.DB().QueryRowContext(ctx, "SELECT campaign FROM campaign_members WHERE mark = ?", m).Scan(&c))
		require.Equal(t, markA, c, "one campaign, named by its smallest signal mark")
	}
	var n int
	require.NoError(t, s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM campaign_members WHERE mark IN (?, ?)", markE, markS).Scan(&n))
	require.Zero(t, n, "a phrase and a repeat sender join nothing")

	page, err := s.CampaignRooms(ctx, markB, "", 50)
	require.NoError(t, err)
	var rooms []string
	for _, it := range page.Items {
		rooms = append(rooms, it.Key.RoomID)
	}
	require.ElementsMatch(t, []string{"room-early", "room-fourth", "room-variant"}, rooms, "one line a room, the linked room included")
	open, err := s.CountOpenCampaignRooms(ctx, markC)
	require.NoError(t, err)
	require.Equal(t, 3, open)
	took, err := s.TakeCampaign(ctx, markD, "mod-a", clk.Now(), clk.Now().Add(-time.Hour))
	require.NoError(t, err)
	require.Equal(t, 3, took.Mine, "the take covers the whole campaign")
	released, err := s.ReleaseCampaign(ctx, markA, "mod-a")
	require.NoError(t, err)
	require.Equal(t, 3, released)

	marks, err := s.AccountCampaigns(ctx, "acct-1")
	require.NoError(t, err)
	require.Len(t, marks, 1, "the account's rooms belong to one campaign")
	require.Equal(t, markA, marks[0].Mark)
	require.Equal(t, 2, marks[0].Here)

	_, linked, err = j.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, linked, "linked once")
	v, err := s.Get(ctx, storetest.SampleVerdict("room-early").Key)
	require.NoError(t, err)
	require.Len(t, v.Sightings, 2, "a linked sighting reads back as a sighting")
}
