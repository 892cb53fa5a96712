package demo

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/chatapi"
	"github.com/chatguard/chatguard/deploy/local/chatreplay"
	"github.com/chatguard/chatguard/pipeline"
)

func TestRealtimeFiguresCountCoverageAndFreshness(t *testing.T) {
	hour := time.Date(2026, 11, 2, 19, 0, 0, 0, time.UTC)
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	arrival := func(room, id string, lake time.Duration) chatreplay.Arrival {
		// Replayed 60 times faster from start.
		return chatreplay.Arrival{RoomID: room, LakeSentAt: hour.Add(lake), At: start.Add(lake / 60),
			Message: pipeline.ChatMessage{MessageID: id, SentAt: start.Add(lake / 60)}}
	}
	plan := []chatreplay.Arrival{
		arrival("r1", "a", 0), arrival("r1", "b", 30*time.Minute), // replayed at +0s, +30s
		arrival("r2", "c", 45*time.Minute), // +45s
		arrival("r3", "d", 50*time.Minute), // +50s, never covered
	}
	ws := []windowRow{
		// r1: one window over a and b, committed 70 s after b.
		{RoomID: "r1", Start: start.Add(-time.Minute), End: start.Add(90 * time.Second), PublishedAt: start.Add(95 * time.Second), CommittedAt: start.Add(100 * time.Second)},
		// r2: two overlapping windows, both over c.
		{RoomID: "r2", Start: start.Add(40 * time.Second), End: start.Add(2 * time.Minute), PublishedAt: start.Add(2 * time.Minute), CommittedAt: start.Add(125 * time.Second)},
		{RoomID: "r2", Start: start.Add(30 * time.Second), End: start.Add(3 * time.Minute), PublishedAt: start.Add(3 * time.Minute), CommittedAt: start.Add(185 * time.Second)},
	}
	rep := realtimeFigures(plan, ws, 60, nil, nil)
	require.Equal(t, 4, rep.Messages)
	require.Equal(t, 3, rep.Rooms)
	require.Equal(t, 1, rep.Uncovered, "d has no window")
	require.Equal(t, 1, rep.CoveredTwice, "c is in both of r2's windows")
	require.Equal(t, 3, rep.Freshness.N)
	// Newest-message freshness: r1 100-30 = 70 s; r2 125-45 = 80 s and 185-45 = 140 s.
	require.Equal(t, 80*time.Second, rep.Freshness.P50)
	require.Equal(t, 140*time.Second, rep.Freshness.P99)
	// Hourly: r1's newest lake message is 30 min before the hour's end, plus
	// its review latency of 5 s; r2's 15 min plus the median of 5 s and 5 s.
	require.Equal(t, 2, rep.Hourly.N)
	require.Equal(t, 15*time.Minute+5*time.Second, rep.Hourly.P50)
	require.Equal(t, 30*time.Minute+5*time.Second, rep.Hourly.P99)
	require.Equal(t, 60*time.Minute+5*time.Second, rep.HourlyOldest.P99, "r1's oldest message opened the hour")
}

func TestSumFamilyAddsOnlyThatFamilysSamples(t *testing.T) {
	page := `# HELP chatguard_trigger_redis_seconds x
chatguard_trigger_redis_seconds_bucket{op="record",le="0.1"} 7
chatguard_trigger_redis_seconds_count{op="record"} 10
chatguard_trigger_redis_seconds_count{op="claim"} 2.5
chatguard_trigger_redis_seconds_count_other 100
chatguard_trigger_redis_seconds_sum{op="record"} 1
`
	got, err := sumFamily(strings.NewReader(page), "chatguard_trigger_redis_seconds_count")
	require.NoError(t, err)
	require.Equal(t, 12.5, got)
	_, err = sumFamily(strings.NewReader("chatguard_x{a=\"b\"} nope\n"), "chatguard_x")
	require.Error(t, err)
}

func TestCPUTimeReadsThisProcess(t *testing.T) {
	x := 0
	for i := range 20_000_000 {
		x += i % 7
	}
	require.NotZero(t, x)
	d, err := cpuTime(os.Getpid())
	require.NoError(t, err)
	require.Positive(t, d)
	_, err = cpuTime(-1)
	require.Error(t, err)
}

func TestReleasedCountsMessagesNotRepeats(t *testing.T) {
	now := time.Now()
	a := func(id string, at time.Duration, repeat bool) chatreplay.Arrival {
		return chatreplay.Arrival{RoomID: "r", At: now.Add(at), Repeat: repeat, Message: pipeline.ChatMessage{MessageID: id}}
	}
	rt := &realtimeRun{plan: []chatreplay.Arrival{a("m1", -time.Minute, false), a("m1", -time.Second, true), a("m2", time.Hour, false), a("m2", 2*time.Hour, true)},
		done: make(chan struct{})}
	out, msgs := rt.released()
	require.Len(t, out, 2)
	require.Equal(t, 1, msgs, "a repeat is an event, not a message")
	require.Equal(t, 2, rt.messages())
	close(rt.done)
	out, msgs = rt.released()
	require.Len(t, out, 4)
	require.Equal(t, 2, msgs)
}

func TestFetchCoverageCountsDistinctWindowsNotContextOrRetries(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	w := func(room string, from, to time.Duration, ids ...string) chatapi.Fetch {
		return chatapi.Fetch{RoomID: room, From: t0.Add(from), To: t0.Add(to), IDs: ids}
	}
	fetches := []chatapi.Fetch{
		w("r1", -time.Hour, 0, "z"),                                 // context: not a window
		w("r1", 0, 5*time.Minute, "a", "b"),                         // a window
		w("r1", 0, 5*time.Minute, "a", "b"),                         // its retry
		w("r1", 2*time.Minute, 2*time.Minute+time.Millisecond, "b"), // b's own window
		w("r2", 0, 5*time.Minute, "a"),                              // another room's a
	}
	fetched, twice := fetchCoverage(fetches, time.Hour)
	require.Equal(t, 3, fetched, "r1/a, r1/b, r2/a")
	require.Equal(t, 1, twice, "r1/b, in two distinct windows")
}

func TestMessageFreshnessCountsLateMessagesFromTheirAnnouncement(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	lakeHour := time.Date(2026, 11, 2, 20, 0, 0, 0, time.UTC)
	msg := func(id string, at time.Duration) chatreplay.Arrival {
		return chatreplay.Arrival{RoomID: "r1", LakeSentAt: lakeHour, At: start.Add(at),
			Message: pipeline.ChatMessage{MessageID: id, SentAt: start.Add(at)}}
	}
	a, b := msg("a", 0), msg("b", 10*time.Second)
	b.Unannounced = true
	announce := b
	announce.Unannounced, announce.Repeat, announce.At = false, true, start.Add(40*time.Second)
	plan := []chatreplay.Arrival{a, b, announce}
	ws := []windowRow{
		// a's window commits at +30 s; b's own late window at +70 s, and a
		// later window over both at +200 s must not count for either.
		{RoomID: "r1", Start: start, End: start.Add(5 * time.Second), CommittedAt: start.Add(30 * time.Second)},
		{RoomID: "r1", Start: start.Add(10 * time.Second), End: start.Add(10*time.Second + time.Millisecond), CommittedAt: start.Add(70 * time.Second)},
		{RoomID: "r1", Start: start, End: start.Add(time.Minute), CommittedAt: start.Add(200 * time.Second)},
	}
	got := messageFreshness(plan, ws, []int{20})
	require.Equal(t, 1, got.OnTime.N)
	require.Equal(t, 30*time.Second, got.OnTime.P95)
	require.Equal(t, 1, got.OnTimePeak.N, "a was sent in a peak lake hour")
	require.Equal(t, 1, got.Late.N)
	require.Equal(t, 30*time.Second, got.Late.P95, "from its announcement at +40 s to +70 s")
	require.Zero(t, messageFreshness(plan, ws, nil).OnTimePeak.N)

	// Per window too, a late newest message counts from its announcement:
	// 30 s (a), 70-40 = 30 s (b's own window), 200-40 = 160 s.
	rep := realtimeFigures(plan, ws, 60, nil, nil)
	require.Equal(t, 3, rep.Freshness.N)
	require.Equal(t, 30*time.Second, rep.Freshness.P50)
	require.Equal(t, 160*time.Second, rep.Freshness.P99)
}
