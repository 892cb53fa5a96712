// Package campaigntest is the conformance suite every
// pipeline.CampaignCounter passes, and Fake, an exact in-memory counter
// for tests of what uses one.
package campaigntest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// Pseudonym is a stand-in keyed pseudonym of s: the shape the counters
// accept, uniform like an HMAC.
func Pseudonym(s string) string {
	h := sha256.Sum256([]byte(s))
	return "hmac:" + hex.EncodeToString(h[:12])
}

// Fake is an exact pipeline.CampaignCounter: every room and sender of
// every mark, seen within Window hours (whole hours, as the Redis counter
// buckets them). Err, when set, fails every call. Safe for concurrent use.
type Fake struct {
	Window time.Duration
	mu     sync.Mutex
	Err    error
	Calls  int
	marks  map[string]*fakeMark
}

type fakeMark struct{ rooms, senders map[string]int64 }

var _ pipeline.CampaignCounter = (*Fake)(nil)

// Observe implements pipeline.CampaignCounter.
func (f *Fake) Observe(ctx context.Context, room string, sightings []pipeline.CampaignSighting, at time.Time) ([]pipeline.CampaignCount, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls++
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if f.Err != nil {
		return nil, f.Err
	}
	if !pipeline.IsSubjectPseudonym(room) {
		return nil, errors.New("fake campaign: room is not a keyed pseudonym")
	}
	if f.marks == nil {
		f.marks = map[string]*fakeMark{}
	}
	win := int64(f.Window / time.Hour)
	if win == 0 {
		win = 24
	}
	hour := at.Unix() / 3600
	out := make([]pipeline.CampaignCount, len(sightings))
	for i, s := range sightings {
		if !pipeline.IsSubjectPseudonym(s.Mark) || !pipeline.IsSubjectPseudonym(s.Sender) {
			return nil, errors.New("fake campaign: a mark or sender is not a keyed pseudonym")
		}
		m := f.marks[s.Mark]
		if m == nil {
			m = &fakeMark{rooms: map[string]int64{}, senders: map[string]int64{}}
			f.marks[s.Mark] = m
		}
		m.rooms[room], m.senders[s.Sender] = hour, hour
		out[i] = pipeline.CampaignCount{Kind: s.Kind, Mark: s.Mark, MessageID: s.MessageID, Rooms: live(m.rooms, hour, win), Senders: live(m.senders, hour, win)}
	}
	return out, nil
}

func live(set map[string]int64, hour, win int64) int {
	n := 0
	for k, h := range set {
		if hour-h < win {
			n++
		} else {
			delete(set, k)
		}
	}
	return n
}

var t0 = time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)

func sight(mark, sender string) pipeline.CampaignSighting {
	return pipeline.CampaignSighting{Kind: pipeline.CampaignScript, Mark: Pseudonym(mark), MessageID: "m-" + mark, Sender: Pseudonym(sender)}
}

// Run is the conformance suite. newCounter returns a counter with a
// 24-hour window and an empty state of its own.
func Run(t *testing.T, newCounter func(t *testing.T) pipeline.CampaignCounter) {
	t.Run("DistinctRoomsAndSenders", func(t *testing.T) { distinct(t, newCounter(t)) })
	t.Run("SlidingWindowOfHours", func(t *testing.T) { window(t, newCounter(t)) })
	t.Run("ManyMarksKeepTheirOrder", func(t *testing.T) { many(t, newCounter(t)) })
	t.Run("LargeCountsAreClose", func(t *testing.T) { large(t, newCounter(t)) })
	t.Run("RefusesRawValues", func(t *testing.T) { refuses(t, newCounter(t)) })
}

func observe(t *testing.T, c pipeline.CampaignCounter, room string, at time.Time, s ...pipeline.CampaignSighting) []pipeline.CampaignCount {
	t.Helper()
	out, err := c.Observe(context.Background(), Pseudonym(room), s, at)
	require.NoError(t, err)
	require.Len(t, out, len(s))
	return out
}

func distinct(t *testing.T, c pipeline.CampaignCounter) {
	for i := range 5 {
		got := observe(t, c, fmt.Sprintf("r%d", i), t0.Add(time.Duration(i)*time.Minute), sight("a", fmt.Sprintf("s%d", i%2)))
		require.Equal(t, i+1, got[0].Rooms)
		require.Equal(t, min(i+1, 2), got[0].Senders)
		require.Equal(t, Pseudonym("a"), got[0].Mark)
		require.Equal(t, "m-a", got[0].MessageID)
	}
	got := observe(t, c, "r0", t0.Add(time.Hour), sight("a", "s0"), sight("b", "s0"))
	require.Equal(t, 5, got[0].Rooms, "a room seen again is not counted again")
	require.Equal(t, 2, got[0].Senders)
	require.Equal(t, 1, got[1].Rooms, "another mark counts apart")
	require.Equal(t, 1, got[1].Senders)
}

func window(t *testing.T, c pipeline.CampaignCounter) {
	observe(t, c, "r1", t0, sight("w", "s1"))
	observe(t, c, "r2", t0.Add(3*time.Hour), sight("w", "s2"))
	got := observe(t, c, "r3", t0.Add(23*time.Hour), sight("w", "s3"))
	require.Equal(t, 3, got[0].Rooms, "23 hours later every room is in the window")
	got = observe(t, c, "r4", t0.Add(24*time.Hour), sight("w", "s4"))
	require.Equal(t, 3, got[0].Rooms, "24 hours later the first hour's room has left it")
	require.Equal(t, 3, got[0].Senders)
	got = observe(t, c, "r5", t0.Add(60*time.Hour), sight("w", "s5"))
	require.Equal(t, 1, got[0].Rooms, "after a quiet window the mark starts again")
	require.Equal(t, 1, got[0].Senders)
}

func many(t *testing.T, c pipeline.CampaignCounter) {
	var s []pipeline.CampaignSighting
	for i := range 40 {
		s = append(s, sight(fmt.Sprintf("many-%d", i), "s"))
	}
	observe(t, c, "r1", t0, s[:20]...)
	got := observe(t, c, "r2", t0, s...)
	for i, g := range got {
		require.Equal(t, s[i].Mark, g.Mark)
		require.Equal(t, map[bool]int{true: 2, false: 1}[i < 20], g.Rooms, "mark %d", i)
		require.Equal(t, 1, g.Senders)
	}
}

func large(t *testing.T, c pipeline.CampaignCounter) {
	const rooms = 2000
	var got []pipeline.CampaignCount
	for i := range rooms {
		got = observe(t, c, fmt.Sprintf("big-%d", i), t0.Add(time.Duration(i)*time.Second), sight("big", fmt.Sprintf("s%d", i%3)))
	}
	// A bottom-32 sample's standard error is about 18 %; 3 of them bound
	// it, and a counter that saturates or forgets fails by far more.
	require.InDelta(t, rooms, got[0].Rooms, 0.55*rooms, "rooms estimated")
	require.Equal(t, 3, got[0].Senders, "few senders stay exact")
}

func refuses(t *testing.T, c pipeline.CampaignCounter) {
	for _, s := range []pipeline.CampaignSighting{
		{Kind: pipeline.CampaignContact, Mark: "01012345678", Sender: Pseudonym("s")},
		{Kind: pipeline.CampaignContact, Mark: Pseudonym("x"), Sender: "seller-8812"},
	} {
		_, err := c.Observe(context.Background(), Pseudonym("r"), []pipeline.CampaignSighting{s}, t0)
		require.Error(t, err)
		require.NotContains(t, err.Error(), "8812")
		require.NotContains(t, err.Error(), "12345678")
	}
	_, err := c.Observe(context.Background(), "room-1", []pipeline.CampaignSighting{sight("a", "s")}, t0)
	require.Error(t, err)
}
