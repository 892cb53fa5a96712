package chatreplay

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// DayShape is when a generated day's conversations start: a relative
// weight per UTC hour, and bursts in which many rooms start within a few
// minutes (a scam account pasting its script into room after room).
type DayShape struct {
	Weights [24]float64
	Bursts  []Burst
}

// Burst starts Rooms rooms within Within from At (an offset into the day).
type Burst struct {
	At     time.Duration
	Within time.Duration
	Rooms  int
}

// DefaultDayShape peaks at 20 times its trough (21:00 against 03:00–05:00
// UTC) with three bursts of 20 rooms in five minutes each.
func DefaultDayShape() DayShape {
	return DayShape{
		Weights: [24]float64{2, 1.5, 1, 1, 1, 1, 2, 4, 7, 9, 11, 12, 13, 12, 11, 11, 12, 14, 16, 18, 19, 20, 13, 6},
		Bursts: []Burst{
			{At: 10*time.Hour + 15*time.Minute, Within: 5 * time.Minute, Rooms: 20},
			{At: 15*time.Hour + 40*time.Minute, Within: 5 * time.Minute, Rooms: 20},
			{At: 21*time.Hour + 5*time.Minute, Within: 5 * time.Minute, Rooms: 20},
		},
	}
}

// Retime moves every room's conversation, its pace unchanged, so that it
// starts on day (a UTC midnight) as shape says: the rooms named in
// bursty fill the bursts first (in order), the rest start by the hourly
// weights. A conversation that would run past the day is moved back to
// end inside it. Seed makes it repeatable; rooms is not changed.
func Retime(rooms map[string][]pipeline.ChatMessage, day time.Time, shape DayShape, bursty []string, seed uint64) map[string][]pipeline.ChatMessage {
	r := rand.New(rand.NewPCG(seed, 0x7265706c6179))
	ids := make([]string, 0, len(rooms))
	for id := range rooms {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	starts := map[string]time.Time{}
	next := 0
	for _, b := range shape.Bursts {
		for i := 0; i < b.Rooms && next < len(bursty); i++ {
			if _, ok := rooms[bursty[next]]; ok {
				starts[bursty[next]] = day.Add(b.At + time.Duration(r.Int64N(int64(b.Within))))
			}
			next++
		}
	}
	total := 0.0
	for _, w := range shape.Weights {
		total += w
	}
	out := make(map[string][]pipeline.ChatMessage, len(rooms))
	for _, id := range ids {
		msgs := rooms[id]
		if len(msgs) == 0 {
			continue
		}
		first, last := msgs[0].SentAt, msgs[0].SentAt
		for _, m := range msgs {
			first, last = minTime(first, m.SentAt), maxTime(last, m.SentAt)
		}
		start, ok := starts[id]
		if !ok {
			start = day.Add(time.Duration(pickHour(r, shape.Weights, total))*time.Hour + time.Duration(r.Int64N(int64(time.Hour))))
		}
		if end := day.Add(24 * time.Hour); start.Add(last.Sub(first)).After(end) {
			start = end.Add(-last.Sub(first) - time.Second)
		}
		moved := make([]pipeline.ChatMessage, len(msgs))
		for i, m := range msgs {
			m.SentAt = start.Add(m.SentAt.Sub(first)).UTC().Truncate(time.Millisecond)
			moved[i] = m
		}
		out[id] = moved
	}
	return out
}

func pickHour(r *rand.Rand, w [24]float64, total float64) int {
	x := r.Float64() * total
	for h, v := range w {
		if x < v {
			return h
		}
		x -= v
	}
	return 23
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
