package demo

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/chatreplay"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/policy"
)

func TestTheDemoPolicyTurnsOnlyWarnCounterpartAndEscalateOn(t *testing.T) {
	p, err := policy.Parse(demoPolicy)
	require.NoError(t, err, "the worker would refuse to start")
	on := map[pipeline.ActionKind]bool{}
	for _, r := range p.Rules {
		for _, a := range r.Actions {
			if a.Mode == pipeline.ModeOn {
				on[a.Action] = true
			}
		}
	}
	require.Equal(t, map[pipeline.ActionKind]bool{pipeline.ActionWarnCounterpart: true, pipeline.ActionEscalate: true}, on)
}

func TestTheProtectionTableSaysWhetherLatencyIsWithinFreshness(t *testing.T) {
	var lines []string
	pr := func(f string, a ...any) {
		lines = append(lines, strings.Join(strings.Fields(fmt.Sprintf(f, a...)), " "))
	}
	rep := &ProtectionReport{ScamRooms: 12, Protected: 11, Reversed: 1, Latency: Percentiles{N: 11, P50: 40 * time.Second, P95: 70 * time.Second},
		Publish: Percentiles{N: 14, P50: 38 * time.Second, P95: 70 * time.Second}}
	rep.print(pr, 63*time.Second)
	out := strings.Join(lines, "\n")
	require.Contains(t, out, "scams announced (rooms the truth calls abusive) 12")
	require.Contains(t, out, "protected (a notice shown in the room) 11")
	require.Contains(t, out, "message to the action's publish (on actions) p50 38s p95 1m10s")
	require.Contains(t, out, "protection latency p95 1m10s (message to publish) against freshness p95 1m3s + 10 s: within")
	lines = nil
	rep.print(pr, 50*time.Second)
	require.Contains(t, strings.Join(lines, "\n"), ": over")

	// A generated day compares its peak hours.
	rep.PublishPeak = Percentiles{N: 5, P50: 50 * time.Second, P95: 90 * time.Second}
	lines = nil
	rep.print(pr, 63*time.Second)
	out = strings.Join(lines, "\n")
	require.Contains(t, out, "message to the action's publish, peak hours p50 50s p95 1m30s")
	require.Contains(t, out, "protection latency p95 1m30s (message to publish, peak hours) against freshness p95 1m3s + 10 s: over")
}

// TestPublishLatencyCountsFromTheWindowsNewestRelease: each publish is
// timed from the release of its window's newest message, as freshness is,
// and split off for the day's peak hours.
func TestPublishLatencyCountsFromTheWindowsNewestRelease(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	arrival := func(room, id string, lake time.Time, at time.Duration) chatreplay.Arrival {
		return chatreplay.Arrival{RoomID: room, LakeSentAt: lake, At: start.Add(at),
			Message: pipeline.ChatMessage{MessageID: id, SentAt: start.Add(at)}}
	}
	peakHour, offHour := time.Date(2026, 11, 2, 20, 5, 0, 0, time.UTC), time.Date(2026, 11, 2, 3, 5, 0, 0, time.UTC)
	plan := []chatreplay.Arrival{
		arrival("r1", "a", peakHour, 0), arrival("r1", "b", peakHour, 10*time.Second),
		arrival("r2", "c", offHour, 20*time.Second),
	}
	pubs := []actionPublish{
		{RoomID: "r1", Start: start.Add(-time.Minute), End: start.Add(time.Minute), SentAt: start.Add(50 * time.Second)}, // 40 s after b
		{RoomID: "r2", Start: start, End: start.Add(time.Minute), SentAt: start.Add(80 * time.Second)},                   // 60 s after c
		{RoomID: "r3", Start: start, End: start.Add(time.Minute), SentAt: start.Add(time.Hour)},                          // no message: left out
	}
	all, peak := publishLatency(plan, pubs, []int{19, 20, 21})
	require.Equal(t, 2, all.N)
	require.True(t, all.P50 >= 40*time.Second && all.P50 <= 60*time.Second, "p50 %s", all.P50)
	require.InDelta(t, 60, all.P99.Seconds(), 0.5)
	require.Equal(t, Percentiles{N: 1, P50: 40 * time.Second, P95: 40 * time.Second, P99: 40 * time.Second}, peak)
}
