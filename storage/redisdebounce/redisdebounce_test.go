package redisdebounce

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
)

var t0 = time.Date(2026, 12, 2, 4, 10, 0, 0, time.UTC)

// setup returns a store on the real Redis under a key prefix of its own
// (removed when the test ends) and the fake clock it reads.
func setup(t testing.TB, r stacktest.RedisTarget, mod func(*Config)) (*Store, *clock.Fake, redis.UniversalClient) {
	t.Helper()
	rdb := r.Client(t, nil)
	cfg := DefaultConfig()
	cfg.Prefix = stacktest.Unique("test:rt") + ":"
	cfg.Shards = 8
	if mod != nil {
		mod(&cfg)
	}
	clk := clock.NewFake(t0)
	s, err := New(rdb, cfg, clk)
	require.NoError(t, err)
	t.Cleanup(func() { stacktest.DeleteKeys(rdb, cfg.Prefix) })
	return s, clk, rdb
}

func chat(room, msg string, sent time.Time) pipeline.ChatEvent {
	return pipeline.ChatEvent{SchemaVersion: 1, RoomID: room, MessageID: msg, SenderID: "u1", SenderRole: "buyer", Kind: "text", SentAt: sent}
}

func record(t *testing.T, s *Store, evs ...pipeline.ChatEvent) []pipeline.RecordOutcome {
	t.Helper()
	out, err := s.Record(context.Background(), evs)
	require.NoError(t, err)
	require.Len(t, out, len(evs))
	return out
}

func due(t *testing.T, s *Store, room string) bool {
	t.Helper()
	rooms, err := s.Due(context.Background(), s.Shard(room), 100)
	require.NoError(t, err)
	return slicesContains(rooms, room)
}

func slicesContains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func claim(t *testing.T, s *Store, room string) (pipeline.RoomWindow, bool) {
	t.Helper()
	w, ok, err := s.Claim(context.Background(), room)
	require.NoError(t, err)
	return w, ok
}

func ack(t *testing.T, s *Store, w pipeline.RoomWindow) bool {
	t.Helper()
	ok, err := s.Ack(context.Background(), w)
	require.NoError(t, err)
	return ok
}

func TestQuietFiresAWindowFromTheFirstArrival(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		s, clk, rdb := setup(t, r, nil)
		// sent_at is the producer's: five seconds ahead of the trigger here,
		// and it sets no bound.
		require.Equal(t, []pipeline.RecordOutcome{pipeline.RecordNew}, record(t, s, chat("r1", "m1", t0.Add(5*time.Second))))
		clk.Advance(20 * time.Second)
		record(t, s, chat("r1", "m2", t0.Add(25*time.Second)))
		clk.Advance(59 * time.Second)
		require.False(t, due(t, s, "r1"), "59s after the last message the room is not quiet yet")
		_, ok := claim(t, s, "r1")
		require.False(t, ok, "a room that is not due cannot be claimed")
		clk.Advance(time.Second)
		require.True(t, due(t, s, "r1"))
		w, ok := claim(t, s, "r1")
		require.True(t, ok)
		require.Equal(t, pipeline.FireQuiet, w.Reason)
		require.Equal(t, t0.Add(-DefaultSlack), w.Start, "the window starts at the first arrival less the slack")
		require.Equal(t, t0.Add(80*time.Second), w.End, "the window ends at the fire time of the trigger's clock")
		require.Equal(t, 2, w.Messages)
		require.False(t, w.Republish)
		ev := w.ReviewEvent(clk.Now())
		require.NoError(t, ev.Validate())
		require.Equal(t, "rt-20261202T040000Z", ev.RunID)
		require.Equal(t, pipeline.SourceRealtime, ev.Source)

		require.True(t, ack(t, s, w))
		require.False(t, due(t, s, "r1"), "nothing new: the room leaves the due set")
		wm, err := rdb.HGet(context.Background(), s.RoomKey("r1"), "wm").Int64()
		require.NoError(t, err)
		require.Equal(t, w.End.UnixMilli(), wm, "the watermark is the window's end")
		ttl := rdb.PTTL(context.Background(), s.RoomKey("r1")).Val()
		require.Greater(t, ttl, time.Duration(0), "the state expires once the room goes quiet")
		require.LessOrEqual(t, ttl, DefaultRetention)

		// The next message opens a window that starts at the watermark, not
		// earlier: no overlap with the reviewed one.
		clk.Advance(10 * time.Minute)
		record(t, s, chat("r1", "m3", clk.Now()))
		clk.Advance(time.Minute)
		w2, ok := claim(t, s, "r1")
		require.True(t, ok)
		require.Equal(t, clk.Now().Add(-time.Minute-DefaultSlack), w2.Start)
		clk.Advance(0)
		record(t, s, chat("r1", "m4", clk.Now()))
		require.True(t, ack(t, s, w2))

		// Messages during a pending window re-arm the room at the ack.
		require.False(t, due(t, s, "r1"))
		clk.Advance(time.Minute)
		w3, ok := claim(t, s, "r1")
		require.True(t, ok)
		require.Equal(t, w2.End, w3.Start, "contiguous with the window before")
	})
}

func TestBusyRoomFiresAtMaxDelayOncePerMaxDelay(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		s, clk, rdb := setup(t, r, nil)
		// A flood: 10,000 messages in one minute, then one every 10 s.
		var evs []pipeline.ChatEvent
		for i := range 10_000 {
			evs = append(evs, chat("flood", fmt.Sprintf("m%05d", i), t0.Add(time.Duration(i)*6*time.Millisecond)))
		}
		for i := 0; i < len(evs); i += 100 {
			record(t, s, evs[i:i+100]...)
			clk.Advance(600 * time.Millisecond)
		}
		fires := 0
		var reasons []pipeline.FireReason
		for i := 0; i < 60; i++ { // ten more minutes, a message every 10 s
			record(t, s, chat("flood", fmt.Sprintf("late%03d", i), clk.Now()))
			clk.Advance(10 * time.Second)
			if w, ok := claim(t, s, "flood"); ok {
				fires++
				reasons = append(reasons, w.Reason)
				require.LessOrEqual(t, w.End.Sub(w.Start), DefaultMaxDelay+DefaultSlack+10*time.Second)
				require.True(t, ack(t, s, w))
			}
		}
		require.Equal(t, 2, fires, "eleven minutes of a busy room fire twice, once per max delay")
		require.Equal(t, []pipeline.FireReason{pipeline.FireMaxDelay, pipeline.FireMaxDelay}, reasons)
		n := rdb.ZCard(context.Background(), s.SeenKey("flood")).Val()
		require.Equal(t, int64(DefaultSeenCap), n, "the seen set is capped")
		mem := rdb.MemoryUsage(context.Background(), s.SeenKey("flood")).Val() + rdb.MemoryUsage(context.Background(), s.RoomKey("flood")).Val()
		t.Logf("redis memory of a flooded room: %d bytes", mem)
		require.Less(t, mem, int64(64<<10), "a room's memory stays bounded whatever its traffic")
	})
}

func TestDuplicatesAndReorderingChangeNothing(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		s, clk, _ := setup(t, r, nil)
		var evs []pipeline.ChatEvent
		for i := range 20 {
			evs = append(evs, chat("r-dup", fmt.Sprintf("m%02d", i), t0.Add(time.Duration(i)*time.Second)))
		}
		// Three copies of every event, shuffled, in batches of ten.
		var all []pipeline.ChatEvent
		for range 3 {
			all = append(all, evs...)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		counts := map[pipeline.RecordOutcome]int{}
		for i := 0; i < len(all); i += 10 {
			for _, o := range record(t, s, all[i:i+10]...) {
				counts[o]++
			}
			clk.Advance(time.Second)
		}
		require.Equal(t, map[pipeline.RecordOutcome]int{pipeline.RecordNew: 20, pipeline.RecordDuplicate: 40}, counts)
		clk.Advance(time.Minute)
		w, ok := claim(t, s, "r-dup")
		require.True(t, ok)
		require.Equal(t, 20, w.Messages)
		require.Equal(t, t0.Add(-DefaultSlack), w.Start)
		require.True(t, ack(t, s, w))
		// A redelivery after the fire changes nothing either.
		require.Equal(t, []pipeline.RecordOutcome{pipeline.RecordDuplicate}, record(t, s, evs[3]))
		require.False(t, due(t, s, "r-dup"))
	})
}

func TestTwoConcurrentClaimersClaimEachRoomOnce(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		a, clk, rdb := setup(t, r, nil)
		b, err := New(rdb, a.cfg, clk) // a second replica on the same Redis
		require.NoError(t, err)
		const rooms = 200
		for i := range rooms {
			record(t, a, chat(fmt.Sprintf("room-%03d", i), "m1", t0))
		}
		clk.Advance(time.Minute)
		var mu sync.Mutex
		claimed := map[string]int{}
		var wg sync.WaitGroup
		for _, s := range []*Store{a, b, a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for shard := range s.Shards() {
					rooms, err := s.Due(context.Background(), shard, 1000)
					if err != nil {
						t.Error(err)
						return
					}
					for _, room := range rooms {
						if _, ok, err := s.Claim(context.Background(), room); err != nil {
							t.Error(err)
						} else if ok {
							mu.Lock()
							claimed[room]++
							mu.Unlock()
						}
					}
				}
			}()
		}
		wg.Wait()
		require.Len(t, claimed, rooms, "every due room is claimed")
		for room, n := range claimed {
			require.Equal(t, 1, n, "room %s claimed by exactly one replica", room)
		}
	})
}

func TestACrashedClaimIsRepublishedUnchanged(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		s, clk, _ := setup(t, r, nil)
		record(t, s, chat("r-crash", "m1", t0))
		clk.Advance(time.Minute)
		w1, ok := claim(t, s, "r-crash")
		require.True(t, ok)
		// The claimer dies before publishing. Meanwhile a message arrives.
		clk.Advance(5 * time.Second)
		record(t, s, chat("r-crash", "m2", clk.Now()))
		_, ok = claim(t, s, "r-crash")
		require.False(t, ok, "the lease holds the room")
		clk.Advance(DefaultLease)
		w2, ok := claim(t, s, "r-crash")
		require.True(t, ok, "another replica takes the pending window over once the lease ran out")
		require.True(t, w2.Republish)
		require.Equal(t, w1.Start, w2.Start)
		require.Equal(t, w1.End, w2.End, "unchanged: the worker's idempotency key dedupes it")
		require.Equal(t, w1.Reason, w2.Reason)
		require.False(t, ack(t, s, w1), "the first claim was lost")
		require.True(t, ack(t, s, w2))
		// The message that arrived meanwhile fires in the next window.
		clk.Advance(time.Minute)
		w3, ok := claim(t, s, "r-crash")
		require.True(t, ok)
		require.Equal(t, w1.End, w3.Start)
		require.Equal(t, 1, w3.Messages)
	})
}

func TestLatePendingAndAheadMessagesAreCovered(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		s, clk, _ := setup(t, r, nil)
		record(t, s, chat("r", "m1", t0))
		clk.Advance(time.Minute)
		w, ok := claim(t, s, "r")
		require.True(t, ok)
		// A message sent inside the pending window is that window's.
		require.Equal(t, []pipeline.RecordOutcome{pipeline.RecordPending}, record(t, s, chat("r", "m2", t0.Add(30*time.Second))))
		require.True(t, ack(t, s, w))
		require.False(t, due(t, s, "r"), "a pending message needs no window of its own")

		// A message sent long before the watermark (a producer clock behind)
		// is late: the trigger gives it a window of its own, and the room is
		// not armed by it. A redelivery answers late again, so its own window
		// is published again rather than lost.
		clk.Advance(10 * time.Minute)
		sent := t0.Add(-20 * time.Minute)
		require.Equal(t, []pipeline.RecordOutcome{pipeline.RecordLate}, record(t, s, chat("r", "m3", sent)))
		require.Equal(t, []pipeline.RecordOutcome{pipeline.RecordLate}, record(t, s, chat("r", "m3", sent)))
		clk.Advance(time.Minute)
		require.False(t, due(t, s, "r"), "a late message does not pull the room's next window back")

		// A producer 10 min ahead: windows end at the trigger's clock, and the
		// room stays armed until one reaches past the message's sent_at.
		clk.Advance(time.Hour)
		ahead := clk.Now().Add(10 * time.Minute)
		record(t, s, chat("r", "m5", ahead))
		var ends []time.Time
		for i := 0; i < 30 && (len(ends) == 0 || !ends[len(ends)-1].After(ahead)); i++ {
			clk.Advance(30 * time.Second)
			if w, ok := claim(t, s, "r"); ok {
				require.LessOrEqual(t, w.End, clk.Now(), "no window ends in the trigger's future")
				ends = append(ends, w.End)
				require.True(t, ack(t, s, w))
			}
		}
		require.NotEmpty(t, ends)
		require.True(t, ends[len(ends)-1].After(ahead), "a window finally covers the message sent ahead")
		require.LessOrEqual(t, len(ends), 4, "at most one extra window per max delay")
		require.False(t, due(t, s, "r"))
	})
}

func TestPendingCountsEveryShard(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		s, clk, _ := setup(t, r, nil)
		for i := range 30 {
			record(t, s, chat(fmt.Sprintf("p%02d", i), "m", clk.Now()))
		}
		n, err := s.Pending(context.Background())
		require.NoError(t, err)
		require.Equal(t, int64(30), n)
	})
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, DefaultConfig().Validate())
	bad := Config{Prefix: "a{b}", Shards: 0, Quiet: 0, MaxDelay: -1, MaxWindow: 0, Slack: -1, Lease: 0, SeenCap: 0, Retention: 0}
	err := bad.Validate()
	for _, w := range []string{"braces", "shards 0", "quiet", "max delay", "slack", "lease", "seen cap", "retention"} {
		require.ErrorContains(t, err, w)
	}
	short := DefaultConfig()
	short.MaxWindow = DefaultMaxDelay
	require.ErrorContains(t, short.Validate(), "max window 5m0s must be at least max delay + slack")
}

func TestALateMessageLeavesTheNextWindowAlone(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		s, clk, _ := setup(t, r, nil)
		record(t, s, chat("r2", "m1", t0), chat("r2", "m2", t0.Add(10*time.Second)), chat("r2", "m3", t0.Add(20*time.Second)))
		clk.Advance(time.Minute)
		w1, ok := claim(t, s, "r2")
		require.True(t, ok)
		require.Zero(t, w1.DoubleCovered, "the room's first window overlaps nothing")
		require.Equal(t, []pipeline.RecordOutcome{pipeline.RecordPending}, record(t, s, chat("r2", "p1", t0.Add(30*time.Second))))
		require.True(t, ack(t, s, w1))

		// A late message sent between m1 and m2 is late (a window of its
		// own); the next window starts at the watermark all the same, so
		// m2, m3 and p1 are not covered again.
		clk.Advance(10 * time.Second)
		late := t0.Add(5 * time.Second)
		require.Equal(t, []pipeline.RecordOutcome{pipeline.RecordLate, pipeline.RecordNew},
			record(t, s, chat("r2", "l1", late), chat("r2", "m4", clk.Now())))
		require.Equal(t, []pipeline.RecordOutcome{pipeline.RecordLate, pipeline.RecordDuplicate},
			record(t, s, chat("r2", "l1", late), chat("r2", "m4", clk.Now())), "a redelivered late event is late again")
		clk.Advance(time.Minute)
		w2, ok := claim(t, s, "r2")
		require.True(t, ok)
		require.Equal(t, w1.End, w2.Start)
		require.Equal(t, 1, w2.Messages, "m4 alone")
		require.Zero(t, w2.DoubleCovered)
		require.True(t, ack(t, s, w2))

		// After a quiet spell a window starts at its first message less the
		// slack, after the watermark. A message sent in that gap while the
		// window is being published is late too, and leaves the next window
		// alone.
		clk.Advance(10 * time.Minute)
		record(t, s, chat("r2", "m6", clk.Now()))
		clk.Advance(time.Minute)
		w4, ok := claim(t, s, "r2")
		require.True(t, ok)
		require.True(t, w4.Start.After(w2.End))
		gap := w4.Start.Add(-10 * time.Second)
		require.Equal(t, []pipeline.RecordOutcome{pipeline.RecordLate}, record(t, s, chat("r2", "l2", gap)))
		require.True(t, ack(t, s, w4))
		clk.Advance(time.Minute)
		_, ok = claim(t, s, "r2")
		require.False(t, ok, "nothing new: no window")
		record(t, s, chat("r2", "m7", clk.Now()))
		clk.Advance(time.Minute)
		w5, ok := claim(t, s, "r2")
		require.True(t, ok)
		require.Equal(t, w4.End, w5.Start)
		require.Zero(t, w5.DoubleCovered)
		require.True(t, ack(t, s, w5))
	})
}
