package review

import (
	"context"
	"fmt"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/stages"
)

// Campaigns is what the reviewer needs to find campaign signals: a
// *campaign.Detector satisfies it. Legacy sightings are counted in their
// legacy form too (legacy, one for one, under the room's legacy
// pseudonym), and the larger of the two counts kept.
type Campaigns interface {
	// Observe counts the sightings (and their legacy twins when legacy is
	// not nil) and returns the campaign signals and the counted marks
	// below the threshold.
	Observe(ctx context.Context, room string, sightings []pipeline.CampaignSighting, legacyRoom string, legacy []pipeline.CampaignSighting) (hits, below []pipeline.CampaignCount)
	// Classify marks the signals that are one account repeating itself
	// as repeat senders, given the standing of the account behind each
	// signal's message.
	Classify(signals []pipeline.CampaignCount, standing func(messageID string) (senderID string, s pipeline.SenderStanding))
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
	sightings, legacy := rn.r.marker.SightingsWithLegacy(msgs)
	room := rn.r.marker.Party("room", rn.ev.RoomID)
	legacyRoom := ""
	if legacy != nil {
		legacyRoom = rn.r.marker.LegacyParty("room", rn.ev.RoomID)
	}
	rn.v.Campaigns, rn.v.Sightings = d.Observe(ctx, room, sightings, legacyRoom, legacy)
	d.Classify(rn.v.Campaigns, rn.standing)
	if legacy == nil {
		return
	}
	was := make(map[string]string, len(sightings))
	for i, s := range sightings {
		was[s.Mark] = legacy[i].Mark
	}
	for _, c := range rn.v.Campaigns {
		rn.v.Aliases = append(rn.v.Aliases, pipeline.PseudonymAlias{Purpose: pipeline.AliasCampaign, Legacy: was[c.Mark], Current: c.Mark})
	}
}

// standing is the standing of the account that sent message id: its
// sender id and the account history of its role in this room (none when
// the history is off, failed, or the message is not in the review).
func (rn *run) standing(messageID string) (string, pipeline.SenderStanding) {
	for _, m := range rn.msgs {
		if m.MessageID != messageID {
			continue
		}
		if rn.history == nil || rn.history.Status != pipeline.HistoryOK {
			return m.SenderID, pipeline.SenderStanding{}
		}
		return m.SenderID, rn.history.Standing(m.SenderRole)
	}
	return "", pipeline.SenderStanding{}
}

// campaignSignals are the campaign signals as rule-signal lines: counts
// and the message that carried the mark, never the mark's text. A repeat
// sender's line says it is one account repeating itself, not a
// campaign, so that the judge weighs it as such.
func (rn *run) campaignSignals() []stages.SignalLine {
	out := make([]stages.SignalLine, 0, len(rn.v.Campaigns))
	for _, c := range rn.v.Campaigns {
		what := "the same script"
		if c.Kind == pipeline.CampaignContact {
			what = "the same contact"
		}
		if c.RepeatSender {
			out = append(out, stages.SignalLine{Kind: "repeat_sender_" + string(c.Kind), MessageID: c.MessageID,
				Value: fmt.Sprintf("repeat sender, not a campaign: %s in %d rooms in the last 24 h, all from this one account, which is verified or has an established clean history", what, c.Rooms)})
			continue
		}
		out = append(out, stages.SignalLine{Kind: "campaign_" + string(c.Kind), MessageID: c.MessageID,
			Value: fmt.Sprintf("campaign: %s in %d rooms from %d senders in the last 24 h", what, c.Rooms, c.Senders)})
	}
	return out
}

// campaign reports whether the review carries a campaign signal that is
// not a repeat sender's.
func (rn *run) campaign() bool {
	for _, c := range rn.v.Campaigns {
		if !c.RepeatSender {
			return true
		}
	}
	return false
}
