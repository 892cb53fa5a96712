package chatreplay

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// The plan transforms below turn a replay into a producer fault of the
// real-time fault rows. Each returns a new plan in release order and
// leaves its input unchanged.

// Duplicate delivers every message's event copies more times, each copy at
// a random moment up to within after the original, so copies interleave
// with later events (duplicated and reordered, as SQS and an SNS fan-out
// deliver).
func Duplicate(plan []Arrival, copies int, within time.Duration, seed uint64) []Arrival {
	r := rand.New(rand.NewPCG(seed, 0x647570))
	out := slices.Clone(plan)
	for _, a := range plan {
		for range copies {
			c := a
			c.Repeat = true
			c.At = a.At.Add(time.Duration(r.Int64N(int64(within) + 1)))
			out = append(out, c)
		}
	}
	sortPlan(out)
	return out
}

// Flood adds n messages to one new room, sent evenly over within from at:
// a room flooded by a bot.
func Flood(plan []Arrival, room string, n int, at time.Time, within time.Duration) []Arrival {
	out := slices.Clone(plan)
	for i := range n {
		sent := at.Add(within * time.Duration(i) / time.Duration(max(n, 1))).UTC()
		out = append(out, Arrival{RoomID: room, At: sent, LakeSentAt: sent, Message: pipeline.ChatMessage{
			MessageID: fmt.Sprintf("flood-%06d", i), SenderID: "flood-bot", SenderRole: pipeline.RoleSeller,
			SentAt: sent, Kind: pipeline.KindText, Text: fmt.Sprintf("대량 메시지 %d", i)}})
	}
	sortPlan(out)
	return out
}

// Skew stamps the messages of every nth room with a sent_at ahead of their
// release by d, in the chat API and in their events alike: a producer
// whose clock runs ahead.
func Skew(plan []Arrival, every int, d time.Duration) []Arrival {
	rooms := map[string]int{}
	out := slices.Clone(plan)
	for i, a := range out {
		k, ok := rooms[a.RoomID]
		if !ok {
			k = len(rooms)
			rooms[a.RoomID] = k
		}
		if k%every == 0 {
			out[i].Message.SentAt = a.Message.SentAt.Add(d)
		}
	}
	return out
}

// Late announces a share of the messages late: each picked message is
// stored when it is sent, as the chat service does, but its event is
// published a random delay of min to max later (a delivery delay), so
// the trigger may have fired the room's window past its sent_at already.
func Late(plan []Arrival, share float64, minDelay, maxDelay time.Duration, seed uint64) []Arrival {
	r := rand.New(rand.NewPCG(seed, 0x6c617465))
	out := slices.Clone(plan)
	for i, a := range plan {
		if a.Repeat || r.Float64() >= share {
			continue
		}
		out[i].Unannounced = true
		c := a
		c.Repeat = true
		c.At = a.At.Add(minDelay + time.Duration(r.Int64N(int64(maxDelay-minDelay)+1)))
		out = append(out, c)
	}
	sortPlan(out)
	return out
}
