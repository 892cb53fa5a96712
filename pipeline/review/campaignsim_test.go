//go:build campaignsim

package review

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/accounthistory"
	"github.com/chatguard/chatguard/pipeline/campaign"
	"github.com/chatguard/chatguard/pipeline/campaign/campaigntest"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/storage/storetest"
)

// TestCampaignVerdictsSimulator is `make bench-campaign-verdicts`: the
// campaign corpus (campaigntest.DefaultCorpus, 10,000 ordinary rooms and
// 300 campaign rooms over one day) in review order, through the real stage
// engine against the LLM simulator three ways: without campaign signals or
// account history, with campaign signals, and with both. Every campaign
// room and every 33rd ordinary room (BENCH_CAMPAIGN_ORDINARY_EVERY) is
// reviewed; the other rooms' risky messages are only counted, so the
// campaign counts are those of the whole corpus. The counter is the exact
// in-memory one (campaigntest.Fake) and the history the in-memory
// pipeline.AccountHistory (storetest.History) fed with each reviewed
// verdict's subjects: simulator figures, where llmsim's rules decide, so
// they show the plumbing, not a model's judgement. It prints a table and
// asserts only that the reviews ran.
func TestCampaignVerdictsSimulator(t *testing.T) {
	every := 33
	if s := os.Getenv("BENCH_CAMPAIGN_ORDINARY_EVERY"); s != "" {
		_, err := fmt.Sscan(s, &every)
		require.NoError(t, err)
	}
	e := setup(t, envOpts{})
	rooms := campaigntest.Corpus(campaigntest.DefaultCorpus())
	fmt.Printf("\n| way | rooms | reviewed | abusive | suspicious | clean | abusive share | given a campaign signal | shown history | model calls |\n")
	fmt.Printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, way := range []struct {
		name             string
		signals, history bool
	}{
		{"no campaign signals, no history", false, false},
		{"campaign signals", true, false},
		{"campaign signals and account history", true, true},
	} {
		tally := reviewCorpus(t, e, rooms, every, way.signals, way.history)
		for _, k := range []campaigntest.RoomKind{campaigntest.Scam, campaigntest.Ordinary, campaigntest.Meetup, campaigntest.Photos} {
			c := tally[k]
			fmt.Printf("| %s | %s | %d | %d | %d | %d | %.1f %% | %d | %d | %d |\n", way.name, k,
				c.reviewed, c.labels[pipeline.LabelAbusive], c.labels[pipeline.LabelSuspicious], c.labels[pipeline.LabelClean], c.share(),
				c.campaign, c.history, c.calls)
		}
	}
	fmt.Println()
}

// simTally counts one way's verdicts on one kind of room.
type simTally struct {
	reviewed, campaign, history, calls int
	labels                             map[pipeline.Label]int
}

func (s simTally) share() float64 {
	if s.reviewed == 0 {
		return 0
	}
	return 100 * float64(s.labels[pipeline.LabelAbusive]) / float64(s.reviewed)
}

// reviewCorpus runs the corpus one way and tallies the reviewed rooms'
// verdicts by kind of room.
func reviewCorpus(t *testing.T, e *env, rooms []campaigntest.Room, every int, signals, history bool) map[campaigntest.RoomKind]*simTally {
	clk := clock.NewFake(rooms[0].At)
	var cfg Config
	var det *campaign.Detector
	if signals {
		cc := campaign.DefaultConfig()
		cc.Enabled = true
		var err error
		det, err = campaign.New(cc, &campaigntest.Fake{}, prometheus.NewRegistry(), clk)
		require.NoError(t, err)
		cfg.Campaigns = det
	}
	past := &storetest.History{}
	if history {
		lookup, err := accounthistory.New(accounthistory.DefaultConfig(), past, clk, nil)
		require.NoError(t, err)
		cfg.History = lookup
	}
	rev, err := New(cfg, e.router, nil, prometheus.NewRegistry(), clk)
	require.NoError(t, err)
	tally := map[campaigntest.RoomKind]*simTally{}
	for _, k := range []campaigntest.RoomKind{campaigntest.Scam, campaigntest.Ordinary, campaigntest.Meetup, campaigntest.Photos} {
		tally[k] = &simTally{labels: map[pipeline.Label]int{}}
	}
	ordinary := 0
	for _, r := range rooms {
		if d := r.At.Sub(clk.Now()); d > 0 {
			clk.Advance(d)
		}
		scam := r.Kind == campaigntest.Scam
		if !scam {
			ordinary++
		}
		if !scam && ordinary%every != 0 {
			if det != nil {
				countOnly(t, rev, det, r)
			}
			continue
		}
		ws := r.At.Truncate(time.Hour)
		ev := pipeline.ReviewEvent{RoomID: r.ID, WindowStart: ws, WindowEnd: ws.Add(time.Hour), RunID: "run-sim", PublishedAt: ws.Add(time.Hour), SchemaVersion: 1}
		v, err := rev.Review(t.Context(), ev, r.Msgs, 1)
		require.NoError(t, err, r.ID)
		require.Equal(t, pipeline.StatusDone, v.Status, r.ID)
		s := tally[r.Kind]
		s.reviewed++
		s.labels[v.Label]++
		s.calls += len(v.Stages)
		if len(v.Campaigns) > 0 {
			s.campaign++
		}
		if h := pipeline.RecordedHistory(v.Stages); h != nil && len(h.Lines) > 0 {
			s.history++
		}
		for _, sender := range v.Subjects {
			past.Add(storetest.HistoryRecord{Room: r.ID, Sender: sender, Label: v.Label, Category: v.Category, DecidedAt: r.At})
		}
	}
	require.NotZero(t, tally[campaigntest.Scam].reviewed)
	return tally
}

// countOnly counts a room that is not reviewed as the reviewer's campaign
// step would: its risky messages' marks, one call.
func countOnly(t *testing.T, rev *Reviewer, det *campaign.Detector, r campaigntest.Room) {
	t.Helper()
	var risky []pipeline.ChatMessage
	for _, m := range r.Msgs {
		if len(chatprep.FindSignals(m.MessageID, m.Text)) > 0 {
			risky = append(risky, m)
		}
	}
	if len(risky) > 0 {
		det.Detect(t.Context(), rev.marker.Party("room", r.ID), rev.marker.Sightings(risky))
	}
}
