package demo

import (
	"time"

	"github.com/chatguard/chatguard/deploy/local/chatreplay"
)

// MessageFreshness is freshness counted per message rather than per
// verdict: the commit of the first done verdict whose window covers the
// message, minus when its event was announced (its release, or for a late
// event its late announcement). A per-verdict figure weighs a late
// message's window of its own like a whole conversation's, and counts the
// chat service's own delay in announcing it; this one does neither, so it
// says what a late share costs the messages announced on time.
type MessageFreshness struct {
	// OnTime are the messages announced when they were sent; Late those
	// announced late, counted from their announcement.
	OnTime, Late Percentiles
	// OnTimePeak are the on-time messages of the peak hours (a generated
	// day only).
	OnTimePeak Percentiles
}

// messageFreshness computes MessageFreshness from the plan and the done
// verdicts; uncovered messages count nowhere (Uncovered counts them).
func messageFreshness(plan []chatreplay.Arrival, ws []windowRow, peak []int) MessageFreshness {
	announced := lateAnnouncements(plan)
	byRoom := map[string][]windowRow{}
	for _, w := range ws {
		byRoom[w.RoomID] = append(byRoom[w.RoomID], w)
	}
	var onTime, late, onTimePeak []float64
	for _, a := range plan {
		if a.Repeat {
			continue
		}
		first, ok := firstCommit(a, byRoom[a.RoomID])
		if !ok {
			continue
		}
		if a.Unannounced {
			late = append(late, first.Sub(announced[a.RoomID+"\x00"+a.Message.MessageID]).Seconds())
			continue
		}
		f := first.Sub(a.At).Seconds()
		onTime = append(onTime, f)
		if hourClass(a.LakeSentAt.Hour(), peak, nil) == "peak" {
			onTimePeak = append(onTimePeak, f)
		}
	}
	return MessageFreshness{OnTime: percentiles(onTime), Late: percentiles(late), OnTimePeak: percentiles(onTimePeak)}
}

// lateAnnouncements maps each message announced late (room, NUL, message
// id) to when its event was published: the first repeat of it in the plan.
func lateAnnouncements(plan []chatreplay.Arrival) map[string]time.Time {
	out := map[string]time.Time{}
	unannounced := map[string]bool{}
	for _, a := range plan {
		k := a.RoomID + "\x00" + a.Message.MessageID
		if a.Unannounced {
			unannounced[k] = true
		}
		if _, seen := out[k]; a.Repeat && unannounced[k] && !seen {
			out[k] = a.At
		}
	}
	return out
}

// announcedAt is when a's event was published: its release, or its late
// announcement.
func announcedAt(a chatreplay.Arrival, late map[string]time.Time) time.Time {
	if at, ok := late[a.RoomID+"\x00"+a.Message.MessageID]; ok {
		return at
	}
	return a.At
}

// firstCommit is the earliest commit among the windows covering a.
func firstCommit(a chatreplay.Arrival, ws []windowRow) (time.Time, bool) {
	var first time.Time
	for _, w := range ws {
		at := a.Message.SentAt
		if at.Before(w.Start) || !at.Before(w.End) {
			continue
		}
		if first.IsZero() || w.CommittedAt.Before(first) {
			first = w.CommittedAt
		}
	}
	return first, !first.IsZero()
}
