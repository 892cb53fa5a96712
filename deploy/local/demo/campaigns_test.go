package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/deploy/local/stack"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/campaign"
	"github.com/chatguard/chatguard/pipeline/campaign/campaigntest"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
)

// TestDemoDataShowsACampaignAndARepeatSender: the lake the stack writes by
// default, its sample window (the hour `make demo` publishes) reviewed in
// order of first message through what the demo's workers run (the marker
// over the messages with a rule signal, an exact counter, the detector
// with the demo's verified-accounts file), then the console's campaign
// join once, as the demo does, gives a campaign over several accounts,
// its first rooms linked afterwards, and the shop as a repeat sender,
// never a campaign; the summary the demo prints says so.
func TestDemoDataShowsACampaignAndARepeatSender(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	def := stack.Defaults(dir)
	lake, truthDir := filepath.Join(dir, "lake"), filepath.Join(dir, "truth")
	_, err := sampledata.Generate(t.Context(), sampledata.Options{LakeDir: lake, TruthDir: truthDir, Seed: def.Seed, Rooms: def.Rooms})
	require.NoError(t, err)
	rooms, err := sampledata.LoadRooms(lake)
	require.NoError(t, err)
	msgs, err := sampledata.LoadMessages(lake)
	require.NoError(t, err)
	start, _ := sampledata.BusiestHour(rooms)
	rows := reviewWindow(t, dir, rooms, msgs, start)

	senderOf := func(room, id string) string {
		for _, m := range msgs[room] {
			if m.MessageID == id {
				return m.SenderID
			}
		}
		return ""
	}
	got := SummarizeCampaigns(rows, senderOf)
	require.NotEmpty(t, got.Campaigns, "a campaign")
	ring := got.Campaigns[0]
	require.GreaterOrEqual(t, len(ring.Accounts), 2, "over several accounts: %+v", ring)
	require.NotContains(t, ring.Accounts, sampledata.ShopAccount)
	require.Positive(t, ring.Linked, "the ring's first rooms, linked by the join")
	require.Len(t, got.Repeats, 1, "one repeat sender")
	require.Equal(t, sampledata.ShopAccount, got.Repeats[0].Account)
	for _, c := range got.Campaigns {
		require.NotContains(t, c.Accounts, sampledata.ShopAccount, "the shop is no campaign")
	}

	var b bytes.Buffer
	(&Report{Database: "chatguard_x", Campaigns: got}).printCampaigns(func(f string, a ...any) { fmt.Fprintf(&b, f+"\n", a...) })
	require.Contains(t, b.String(), "campaign "+ring.ID+": ")
	require.Contains(t, b.String(), "repeat sender "+sampledata.ShopAccount+": ")
	require.Contains(t, b.String(), "make console CONSOLE_DB=chatguard_x")
	require.Contains(t, b.String(), "/campaigns/"+ring.ID)
}

// reviewWindow reviews the window's rooms in order of first message as
// the demo's workers would, runs the campaign join once over what they
// recorded, and returns the rows the demo's summary reads.
func reviewWindow(t *testing.T, dir string, rooms []sampledata.RoomRow, msgs map[string][]pipeline.ChatMessage, start time.Time) []CampaignRow {
	t.Helper()
	var in []sampledata.RoomRow
	for _, r := range rooms {
		if !r.FirstMessageAt.Before(start) && r.FirstMessageAt.Before(start.Add(time.Hour)) {
			in = append(in, r)
		}
	}
	slices.SortFunc(in, func(a, b sampledata.RoomRow) int { return a.FirstMessageAt.Compare(b.FirstMessageAt) })
	verified := filepath.Join(dir, "verified.txt")
	require.NoError(t, os.WriteFile(verified, []byte(sampledata.VerifiedAccounts), 0o600))
	cfg := campaign.DefaultConfig()
	cfg.Enabled, cfg.VerifiedFile = true, verified
	det, err := campaign.New(cfg, &campaigntest.Fake{}, nil, clock.NewFake(start))
	require.NoError(t, err)
	marker := chatprep.NewCampaignMarker(pseudonym.Dev(), false)
	var recorded []pipeline.CampaignJoinRow
	var out []CampaignRow
	for i, r := range in {
		id := uint64(i + 1)
		var risky []pipeline.ChatMessage
		sender := map[string]string{}
		for _, m := range msgs[r.RoomID] {
			sender[m.MessageID] = m.SenderID
			if len(chatprep.FindSignals(m.MessageID, m.Text)) > 0 {
				risky = append(risky, m)
			}
		}
		hits, below := det.Observe(context.Background(), marker.Party("room", r.RoomID), marker.Sightings(risky), "", nil)
		det.Classify(hits, func(m string) (string, pipeline.SenderStanding) { return sender[m], pipeline.SenderStanding{} })
		for _, c := range hits {
			class := pipeline.ClassCampaign
			if c.RepeatSender {
				class = pipeline.ClassRepeatSender
			} else {
				recorded = append(recorded, pipeline.CampaignJoinRow{VerdictID: id, Kind: c.Kind, Mark: c.Mark, Class: class, Senders: c.Senders})
			}
			out = append(out, CampaignRow{Campaign: c.Mark, Class: string(class), VerdictID: id, RoomID: r.RoomID, MessageID: c.MessageID})
		}
		for _, c := range below {
			recorded = append(recorded, pipeline.CampaignJoinRow{VerdictID: id, Kind: c.Kind, Mark: c.Mark, Class: pipeline.ClassSighting, Senders: c.Senders})
			out = append(out, CampaignRow{Campaign: c.Mark, Class: string(pipeline.ClassSighting), VerdictID: id, RoomID: r.RoomID, MessageID: c.MessageID})
		}
	}
	joined, _ := campaign.Join(recorded, campaign.DefaultJoinConfig())
	links := map[[2]string]bool{}
	for _, l := range joined.Links {
		links[[2]string{in[l.VerdictID-1].RoomID, l.Mark}] = true
	}
	for i := range out {
		if links[[2]string{out[i].RoomID, out[i].Campaign}] {
			out[i].Class = string(pipeline.ClassLinked)
		}
		if c, ok := joined.Members[out[i].Campaign]; ok {
			out[i].Campaign = c
		}
	}
	return out
}
