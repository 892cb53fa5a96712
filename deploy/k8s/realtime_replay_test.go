package k8s_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/rules"
	"github.com/stretchr/testify/require"
)

// replay writes per-minute series over minutes in promqltest's notation:
// each line is a series and its samples.
func replay(lines ...string) string {
	return "load 1m\n " + strings.Join(lines, "\n ")
}

const (
	nsLabels   = `namespace="chatguard"`
	trigLabels = nsLabels + `,pod="t1"`
	workLabels = nsLabels + `,pod="w1"`
)

// totalFailure is three hours of real time announced and never
// delivered: the trigger takes 50 chat messages a minute and publishes 20
// windows a minute, review-realtime fills and ages, and no worker ever
// commits a verdict.
func totalFailure() string {
	const n = "180"
	return replay(
		`up{`+trigLabels+`,job="chatguard/chatguard-trigger"} 1+0x`+n,
		`up{`+workLabels+`,job="chatguard/chatguard-worker"} 1+0x`+n,
		`chatguard_trigger_chat_events_total{`+trigLabels+`,outcome="new"} 0+50x`+n,
		`chatguard_trigger_fires_total{`+trigLabels+`,reason="quiet"} 0+20x`+n,
		`chatguard_trigger_publishes_total{`+trigLabels+`} 0+20x`+n,
		`chatguard_trigger_publish_failures_total{`+trigLabels+`} 0+0x`+n,
		`chatguard_review_messages_covered_total{`+workLabels+`,source="realtime"} 0+0x`+n,
		`chatguard_worker_jobs_total{`+workLabels+`,outcome="done"} 0+0x`+n,
		`aws_sqs_approximate_age_of_oldest_message_maximum{dimension_QueueName="chatguard-review-realtime"} 0+60x`+n,
		`aws_sqs_approximate_age_of_oldest_message_maximum{dimension_QueueName="chatguard-chat-events"} 1+0x`+n,
	)
}

// healthyDay is a day of real time working: every message accepted is
// covered within minutes (window messages outnumber accepted ones: a
// window also holds messages inside a pending window and system
// messages), 2 % of verdicts miss 3 minutes, queues stay young, one
// publish in a thousand is refused and retried.
func healthyDay() string {
	const n = "1440"
	return replay(
		`up{`+trigLabels+`,job="chatguard/chatguard-trigger"} 1+0x`+n,
		`up{`+workLabels+`,job="chatguard/chatguard-worker"} 1+0x`+n,
		`chatguard_trigger_chat_events_total{`+trigLabels+`,outcome="new"} 0+50x`+n,
		`chatguard_trigger_chat_events_total{`+trigLabels+`,outcome="late"} 0+0.5x`+n,
		`chatguard_trigger_chat_events_total{`+trigLabels+`,outcome="stale"} 0+0x`+n,
		`chatguard_trigger_chat_events_total{`+trigLabels+`,outcome="invalid"} 0+0x`+n,
		`chatguard_trigger_clock_skew_clamped_total{`+trigLabels+`} 0+0x`+n,
		`chatguard_trigger_fires_total{`+trigLabels+`,reason="quiet"} 0+20x`+n,
		`chatguard_trigger_publishes_total{`+trigLabels+`} 0+1000x`+n,
		`chatguard_trigger_publish_failures_total{`+trigLabels+`} 0+1x`+n,
		`chatguard_trigger_redis_seconds_count{`+trigLabels+`,op="record"} 0+100x`+n,
		`chatguard_trigger_redis_errors_total{`+trigLabels+`,op="record"} 0+0x`+n,
		`chatguard_trigger_state_lost_total{`+trigLabels+`,op="claim"} 0+0x`+n,
		`chatguard_review_messages_covered_total{`+workLabels+`,source="realtime"} 0+55x`+n,
		`chatguard_worker_jobs_total{`+workLabels+`,outcome="done"} 0+20x`+n,
		`chatguard_review_freshness_seconds_bucket{`+workLabels+`,source="realtime",le="180"} 0+49x`+n,
		`chatguard_review_freshness_seconds_count{`+workLabels+`,source="realtime"} 0+50x`+n,
		`aws_sqs_approximate_age_of_oldest_message_maximum{dimension_QueueName="chatguard-review-realtime"} `+seq(1441, 5, 20, 60, 10),
		`aws_sqs_approximate_age_of_oldest_message_maximum{dimension_QueueName="chatguard-chat-events"} `+seq(1441, 1, 3, 30),
		`aws_sqs_approximate_number_of_messages_visible_maximum{dimension_QueueName="chatguard-chat-events-dlq"} 0+0x`+n,
	)
}

// realtimeRuleNames are the alerts of the chatguard-realtime rule.
func realtimeRuleNames(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, g := range render(t, "prod"+realtimeSuffix).PrometheusRules["chatguard-realtime"].Spec.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Alert)
		}
	}
	require.NotEmpty(t, out)
	return out
}

// TestRealtimeAlertsOnATotalFailureAndAHealthyDay replays three hours of
// real time that announces and never delivers (the freshness SLO, fed by
// committed verdicts only, sees nothing): the alerts computed from what was
// announced fire. A healthy day keeps every real-time alert silent.
func TestRealtimeAlertsOnATotalFailureAndAHealthyDay(t *testing.T) {
	t.Parallel()
	t.Run("total failure", func(t *testing.T) {
		t.Parallel()
		for _, a := range []string{"ChatguardRealtimeCoverageLag", "ChatguardRealtimeQueueOld", "ChatguardNoVerdicts"} {
			require.Equal(t, rules.StateFiring, evalAlert(t, ruleOf(t, a), totalFailure(), 180*time.Minute), "%s must fire", a)
		}
	})
	for _, a := range append(realtimeRuleNames(t), "ChatguardNoVerdicts", "ChatguardDeadLetterQueueNotEmpty", "ChatguardWorkerDown") {
		t.Run("healthy day/"+a, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, rules.StateInactive, evalAlert(t, ruleOf(t, a), healthyDay(), 24*time.Hour), "%s must stay silent", a)
		})
	}
}

// TestRealtimeFailureAlertsFireOnTheirCause evaluates the alerts whose
// shape changed: absences per namespace, publish failures as a share, the
// chat-events queues.
func TestRealtimeFailureAlertsFireOnTheirCause(t *testing.T) {
	t.Parallel()
	cases := []struct {
		alert, name, series string
		until               time.Duration
		fires               bool
	}{
		{"ChatguardTriggerDown", "prod's trigger gone while dev's is up on the same Prometheus",
			replay(`up{`+trigLabels+`,job="chatguard/chatguard-trigger"} 1+0x30 _x60`,
				`up{namespace="chatguard-dev",pod="t1",job="chatguard-dev/chatguard-trigger"} 1+0x90`), 90 * time.Minute, true},
		{"ChatguardTriggerDown", "both up",
			replay(`up{`+trigLabels+`,job="chatguard/chatguard-trigger"} 1+0x90`,
				`up{namespace="chatguard-dev",pod="t1",job="chatguard-dev/chatguard-trigger"} 1+0x90`), 90 * time.Minute, false},
		{"ChatguardWorkerDown", "prod's workers gone while dev's are up",
			replay(`up{`+workLabels+`,job="chatguard/chatguard-worker"} 1+0x30 _x60`,
				`up{namespace="chatguard-dev",pod="w1",job="chatguard-dev/chatguard-worker"} 1+0x90`), 90 * time.Minute, true},
		{"ChatguardTriggerPublishFailing", "a third of the review events refused",
			replay(`chatguard_trigger_publishes_total{`+trigLabels+`} 0+30x60`, `chatguard_trigger_publish_failures_total{`+trigLabels+`} 0+10x60`),
			60 * time.Minute, true},
		{"ChatguardTriggerPublishFailing", "one in a hundred refused and retried",
			replay(`chatguard_trigger_publishes_total{`+trigLabels+`} 0+100x60`, `chatguard_trigger_publish_failures_total{`+trigLabels+`} 0+1x60`),
			60 * time.Minute, false},
		{"ChatguardChatEventsQueueOld", "the trigger takes no events",
			replay(`aws_sqs_approximate_age_of_oldest_message_maximum{dimension_QueueName="chatguard-chat-events"} 0+60x30`), 30 * time.Minute, true},
		{"ChatguardDeadLetterQueueNotEmpty", "malformed chat events dead-lettered",
			replay(`aws_sqs_approximate_number_of_messages_visible_maximum{dimension_QueueName="chatguard-chat-events-dlq"} 3+0x30`), 30 * time.Minute, true},
		{"ChatguardChatEventsClockSkew", "a producer clock an hour ahead",
			replay(`chatguard_trigger_clock_skew_clamped_total{` + trigLabels + `} 0+5x30`), 30 * time.Minute, true},
		{"ChatguardChatEventsStale", "a day-old backlog drained",
			replay(`chatguard_trigger_chat_events_total{` + trigLabels + `,outcome="stale"} 0+0x10 5+0x20`), 30 * time.Minute, true},
	}
	for _, c := range cases {
		t.Run(c.alert+"/"+c.name, func(t *testing.T) {
			t.Parallel()
			got := evalAlert(t, ruleOf(t, c.alert), c.series, c.until)
			if c.fires {
				require.Equal(t, rules.StateFiring, got, "%s must fire: %s", c.alert, c.name)
			} else {
				require.Equal(t, rules.StateInactive, got, "%s must stay silent: %s", c.alert, c.name)
			}
		})
	}
}
