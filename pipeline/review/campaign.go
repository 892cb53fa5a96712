package review

import (
	"context"
	"fmt"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/stages"
)

// Campaigns is what the reviewer needs to find campaign signals: a
// *campaign.Detector satisfies it.
type Campaigns interface {
	Detect(ctx context.Context, room string, sightings []pipeline.CampaignSighting) []pipeline.CampaignCount
}

// campaigns counts the window's risky messages' marks fleet-wide (one
// bounded call; none when it fails) and records the campaign signals on
// the verdict. Only messages with a rule signal are fingerprinted, so the
// phrases everyone types are never counted.
func (rn *run) campaigns(ctx context.Context) {
	d := rn.r.cfg.Campaigns
	if d == nil {
		return
	}
	risky := map[string]bool{}
	for _, s := range rn.w.Signals {
		risky[s.MessageID] = true
	}
	var msgs []pipeline.ChatMessage
	for _, m := range rn.msgs {
		if risky[m.MessageID] {
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 0 {
		return
	}
	sightings := rn.r.marker.Sightings(msgs)
	rn.v.Campaigns = d.Detect(ctx, rn.r.marker.Party("room", rn.ev.RoomID), sightings)
}

// campaignSignals are the campaign signals as rule-signal lines: counts
// and the message that carried the mark, never the mark's text.
func (rn *run) campaignSignals() []stages.SignalLine {
	out := make([]stages.SignalLine, 0, len(rn.v.Campaigns))
	for _, c := range rn.v.Campaigns {
		what := "the same script"
		if c.Kind == pipeline.CampaignContact {
			what = "the same contact"
		}
		out = append(out, stages.SignalLine{Kind: "campaign_" + string(c.Kind), MessageID: c.MessageID,
			Value: fmt.Sprintf("%s in %d rooms from %d senders in the last 24 h", what, c.Rooms, c.Senders)})
	}
	return out
}
