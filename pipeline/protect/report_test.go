package protect_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/eval/stats"
	"github.com/chatguard/chatguard/pipeline/policy"
	"github.com/chatguard/chatguard/pipeline/protect"
)

const reportPolicy = `{"version":"r1","defaults":{"locale":"ko","suppress_notices":"1h","action_ttl":"1h","restrict_for":"24h","cleared_for":"720h",
  "heavy_per_account_daily":1,"heavy_min_campaign_rooms":3,"heavy_min_history_rooms":1},
  "rules":[
   {"id":"notice","name":"Notice","daily_cap":100,"match":{"labels":["abusive"],"categories":["external_payment"]},
    "actions":[{"action":"warn_counterpart","mode":"on"},{"action":"escalate","mode":"dry_run"}]},
   {"id":"harass","name":"Harassment","daily_cap":100,"match":{"labels":["abusive"],"categories":["harassment"]},
    "actions":[{"action":"warn_sender","mode":"dry_run"}]}]}`

func reportCase(room, seller string, at time.Duration, label pipeline.Label, cat pipeline.Category, decision string) protect.Case {
	v := pipeline.Verdict{
		Key:    pipeline.ReviewKey{RoomID: room, WindowStart: t0.Add(at - 10*time.Minute), WindowEnd: t0.Add(at), PipelineVersion: "p"},
		Status: pipeline.StatusDone, Label: label, Category: cat, Severity: 4, Confidence: 0.9,
		OffenderRole: pipeline.RoleSeller, FinishedAt: t0.Add(at + time.Minute),
	}
	if label != pipeline.LabelClean {
		v.Subjects = []string{seller}
	}
	return protect.Case{Verdict: v, Source: pipeline.ActionSourceRealtime, Decision: decision}
}

// TestReportPrecisionMatchesAHandCount replays a fixture whose counts are
// worked out by hand in the comments.
func TestReportPrecisionMatchesAHandCount(t *testing.T) {
	p, err := policy.Parse([]byte(reportPolicy))
	require.NoError(t, err)
	ab, ep := pipeline.LabelAbusive, pipeline.CategoryExternalPayment
	cases := []protect.Case{
		// Listed out of order: the replay sorts by finish time.
		reportCase("room-b", "s2", 20*time.Minute, ab, ep, "confirm"),                                      // notice: warn + escalate; decided, upheld
		reportCase("room-a", "s1", 0, ab, ep, "confirm"),                                                   // notice: warn + escalate; decided, upheld
		reportCase("room-a", "s1", 10*time.Minute, ab, ep, "overturn"),                                     // notice: warn suppressed, escalate; decided, not upheld
		reportCase("room-c", "s3", 30*time.Minute, ab, ep, ""),                                             // notice: warn + escalate; not decided
		reportCase("room-d", "s4", 40*time.Minute, ab, ep, "overturn"),                                     // notice: warn + escalate; decided, not upheld
		reportCase("room-e", "s5", 50*time.Minute, ab, pipeline.CategoryHarassment, "confirm"),             // harass: warn_sender; decided, upheld
		reportCase("room-f", "s6", 60*time.Minute, pipeline.LabelClean, pipeline.CategoryClean, "confirm"), // nothing
		reportCase("room-g", "s7", 70*time.Minute, pipeline.LabelSuspicious, ep, "overturn"),               // nothing: abusive only
		reportCase("room-a", "s1", 130*time.Minute, ab, ep, ""),                                            // notice: the suppression is over: warn + escalate
	}
	reps := protect.Backtest(p, cases)
	require.Len(t, reps, 2)
	n := reps[0]
	require.Equal(t, "notice", n.Rule)
	// Verdicts acted on: a(0), a(10), b, c, d, a(130) = 6; accounts s1..s4.
	require.Equal(t, 6, n.Verdicts)
	require.Equal(t, 4, n.Accounts)
	require.Equal(t, map[string]int{"warn_counterpart:on": 5, "escalate:dry_run": 6}, n.Actions)
	// Decided: a(0) confirm, a(10) overturn, b confirm, d overturn = 4,
	// upheld 2: precision 0.5.
	require.Equal(t, 4, n.Decided)
	require.Equal(t, 2, n.Upheld)
	require.InDelta(t, 0.5, n.Precision, 1e-12)
	lo, hi := stats.Wilson(2, 4, 0.95)
	require.InDelta(t, lo, n.Lo, 1e-12)
	require.InDelta(t, hi, n.Hi, 1e-12)
	require.Less(t, n.Lo, 0.5)
	require.Greater(t, n.Hi, 0.5)

	h := reps[1]
	require.Equal(t, protect.RuleReport{Rule: "harass", Actions: map[string]int{"warn_sender:dry_run": 1}, Verdicts: 1, Accounts: 1,
		Decided: 1, Upheld: 1, Precision: 1, Lo: h.Lo, Hi: 1}, h)

	var buf bytes.Buffer
	require.NoError(t, protect.WriteReport(&buf, p, t0, t0.Add(3*time.Hour), len(cases), false, reps))
	require.Contains(t, buf.String(), "escalate:dry_run=6 warn_counterpart:on=5")
	require.Contains(t, buf.String(), "0.500")
}

func TestReportCapsLikeALiveRun(t *testing.T) {
	p, err := policy.Parse([]byte(reportPolicy))
	require.NoError(t, err)
	p.Rules[0].DailyCap = 3
	var cases []protect.Case
	for i := range 5 {
		cases = append(cases, reportCase("room-"+string(rune('a'+i)), "s"+string(rune('1'+i)), time.Duration(i)*time.Minute,
			pipeline.LabelAbusive, pipeline.CategoryExternalPayment, ""))
	}
	n := protect.Backtest(p, cases)[0]
	// Three actions a day: the first two verdicts' warn + escalate would
	// be four, so the second verdict's escalate is capped, and nothing
	// after.
	require.Equal(t, map[string]int{"warn_counterpart:on": 2, "escalate:dry_run": 1}, n.Actions)
}
