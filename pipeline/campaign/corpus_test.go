package campaign_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/campaign"
	"github.com/chatguard/chatguard/pipeline/campaign/campaigntest"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
)

// corpusRun is what the extended corpus gave one room.
type corpusRun struct {
	room     campaigntest.ExtRoom
	verdict  uint64
	signals  []pipeline.CampaignCount
	sighting []pipeline.CampaignCount
}

// TestExtendedCorpusFigures is the figures of docs/campaigns.md: the
// extended corpus (campaigntest.Extended) in review order through the
// marker, the exact counter, the detector and its repeat-sender rule
// (the account history being what the corpus says each account had before
// the day; nothing is assumed of a judge, so no verdict has subjects and
// the join links by shared rooms only), then one campaign join over the
// day. It prints a table and asserts the targets: campaign recall counting
// linked rooms at least 95 %, shops and saved phrases given a campaign
// (signal or link) in at most 2 % of their rooms, at most 1.5 campaigns
// per true script, and no campaign holding rooms of two scripts or a
// scam room and a benign one.
func TestExtendedCorpusFigures(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	corpus := campaigntest.Extended(46, start)
	verified := t.TempDir() + "/verified.txt"
	require.NoError(t, os.WriteFile(verified, []byte(strings.Join(corpus.Verified, "\n")), 0o600))
	cfg := campaign.DefaultConfig()
	cfg.Enabled, cfg.VerifiedFile = true, verified
	clk := clock.NewFake(start)
	det, err := campaign.New(cfg, &campaigntest.Fake{}, nil, clk)
	require.NoError(t, err)
	marker := chatprep.NewCampaignMarker(pseudonym.Dev(), false)
	runs := make([]corpusRun, 0, len(corpus.Rooms))
	var rows []pipeline.CampaignJoinRow
	for i, r := range corpus.Rooms {
		if d := r.At.Sub(clk.Now()); d > 0 {
			clk.Advance(d)
		}
		var risky []pipeline.ChatMessage
		sender := map[string]string{}
		for _, m := range r.Msgs {
			sender[m.MessageID] = m.SenderID
			if len(chatprep.FindSignals(m.MessageID, m.Text)) > 0 {
				risky = append(risky, m)
			}
		}
		run := corpusRun{room: r, verdict: uint64(i + 1)}
		run.signals, run.sighting = det.Observe(context.Background(), marker.Party("room", r.ID), marker.Sightings(risky), "", nil)
		det.Classify(run.signals, func(id string) (string, pipeline.SenderStanding) {
			return sender[id], pipeline.SenderStanding{CleanRooms: corpus.CleanRooms[sender[id]]}
		})
		for _, c := range run.signals {
			if !c.RepeatSender {
				rows = append(rows, pipeline.CampaignJoinRow{VerdictID: run.verdict, Kind: c.Kind, Mark: c.Mark, Class: pipeline.ClassCampaign, Senders: c.Senders})
			}
		}
		for _, c := range run.sighting {
			rows = append(rows, pipeline.CampaignJoinRow{VerdictID: run.verdict, Kind: c.Kind, Mark: c.Mark, Class: pipeline.ClassSighting, Senders: c.Senders})
		}
		runs = append(runs, run)
	}
	joined, _ := campaign.Join(rows, campaign.DefaultJoinConfig())
	f := corpusFigures(runs, joined)
	f.print()
	require.GreaterOrEqual(t, f.share(campaigntest.ExtendedScam, true), 0.95, "campaign recall counting linked rooms")
	require.LessOrEqual(t, f.shopShare(), 0.02, "shops and saved phrases given a campaign")
	require.LessOrEqual(t, f.perScript(true), 1.5, "campaigns per true script")
	require.Zero(t, f.mixed, "campaigns mixing scripts or scam and benign rooms")
}

// figures are the corpus's tallies.
type figures struct {
	rooms, direct, linked, repeat map[campaigntest.RoomKind]int
	// marks and campaigns per script: distinct campaign-signal marks, and
	// distinct joined campaigns, over the script's rooms.
	marks, camps map[string]map[string]bool
	mixed        int
}

func corpusFigures(runs []corpusRun, j pipeline.CampaignJoin) figures {
	f := figures{rooms: map[campaigntest.RoomKind]int{}, direct: map[campaigntest.RoomKind]int{}, linked: map[campaigntest.RoomKind]int{},
		repeat: map[campaigntest.RoomKind]int{}, marks: map[string]map[string]bool{}, camps: map[string]map[string]bool{}}
	linked := map[uint64]bool{}
	for _, l := range j.Links {
		linked[l.VerdictID] = true
	}
	members := map[string][]campaigntest.ExtRoom{} // campaign -> rooms
	for _, r := range runs {
		k := r.room.Kind
		f.rooms[k]++
		direct, repeat := false, false
		for _, c := range r.signals {
			direct = direct || !c.RepeatSender
			repeat = repeat || c.RepeatSender
		}
		switch {
		case direct:
			f.direct[k]++
		case linked[r.verdict]:
			f.linked[k]++
		}
		if repeat {
			f.repeat[k]++
		}
		if r.room.Script != "" && f.marks[r.room.Script] == nil {
			f.marks[r.room.Script], f.camps[r.room.Script] = map[string]bool{}, map[string]bool{}
		}
		in := map[string]bool{}
		for _, c := range slices.Concat(r.signals, r.sighting) {
			id, ok := j.Members[c.Mark]
			if c.RepeatSender || !ok || (!slices.Contains(r.signals, c) && !linked[r.verdict]) {
				continue
			}
			in[id] = true
			if r.room.Script != "" {
				f.camps[r.room.Script][id] = true
			}
		}
		for _, c := range r.signals {
			if r.room.Script != "" && !c.RepeatSender {
				f.marks[r.room.Script][c.Mark] = true
			}
		}
		for id := range in {
			members[id] = append(members[id], r.room)
		}
	}
	for _, rooms := range members {
		scripts := map[string]bool{}
		for _, r := range rooms {
			scripts[r.Script] = true
		}
		if len(scripts) > 1 {
			f.mixed++
		}
	}
	return f
}

func (f figures) share(k campaigntest.RoomKind, withLinked bool) float64 {
	n := f.direct[k]
	if withLinked {
		n += f.linked[k]
	}
	return float64(n) / float64(max(f.rooms[k], 1))
}

func (f figures) shopShare() float64 {
	n := f.direct[campaigntest.Shop] + f.linked[campaigntest.Shop] + f.direct[campaigntest.SavedPhrase] + f.linked[campaigntest.SavedPhrase]
	return float64(n) / float64(f.rooms[campaigntest.Shop]+f.rooms[campaigntest.SavedPhrase])
}

func (f figures) perScript(joined bool) float64 {
	m := f.marks
	if joined {
		m = f.camps
	}
	n := 0
	for _, s := range m {
		n += len(s)
	}
	return float64(n) / float64(max(len(m), 1))
}

func (f figures) print() {
	fmt.Printf("\n| rooms | n | campaign signal | linked later | campaign (signal or linked) | repeat-sender signal |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, k := range []campaigntest.RoomKind{campaigntest.ExtendedScam, campaigntest.Shop, campaigntest.SavedPhrase, campaigntest.RepeatBuyer,
		campaigntest.NewShop, campaigntest.Ordinary, campaigntest.Meetup, campaigntest.Photos} {
		fmt.Printf("| %s | %d | %d | %d | %.1f %% | %d |\n", k, f.rooms[k], f.direct[k], f.linked[k], 100*f.share(k, true), f.repeat[k])
	}
	fmt.Printf("\nscripts: %d; campaign-signal marks per script %.1f; campaigns per script after the join %.2f; campaigns mixing scripts or benign rooms: %d\n\n",
		len(f.marks), f.perScript(false), f.perScript(true), f.mixed)
}
