package k8s_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/rules"
	"github.com/stretchr/testify/require"
)

// realtimeAlerts are the real-time conditions the runbooks cover: the
// freshness SLO's burn rates and the trigger's failures (docs/runbooks.md),
// and those computed from what was announced: coverage, queue ages,
// clocks (docs/realtime-runbooks.md).
var realtimeAlerts = []string{
	"ChatguardRealtimeFreshnessBurnFast", "ChatguardRealtimeFreshnessBurnSlow", "ChatguardRealtimeFreshnessBudgetLow",
	"ChatguardTriggerDown", "ChatguardTriggerRedisErrors", "ChatguardTriggerStateLost", "ChatguardTriggerPublishFailing", "ChatguardChatEventsInvalid",
	"ChatguardRealtimeCoverageLag", "ChatguardRealtimeQueueOld", "ChatguardChatEventsQueueOld", "ChatguardChatEventsClockSkew", "ChatguardChatEventsStale",
}

// TestRealtimeRules checks the PrometheusRule chatguard-realtime as
// TestAlertRules checks the workers': Prometheus' own rule loader, every
// metric exported by the binaries with the labels matched on, a severity
// and a runbook section per alert, in every overlay.
func TestRealtimeRules(t *testing.T) {
	t.Parallel()
	for _, o := range overlays {
		_, ok := render(t, o).PrometheusRules["chatguard-realtime"]
		require.False(t, ok, "%s: real time's alerts come with components/realtime", o)
	}
	for _, o := range realtimeOverlays {
		pr, ok := render(t, o).PrometheusRules["chatguard-realtime"]
		require.True(t, ok, "%s: PrometheusRule chatguard-realtime", o)
		seen := checkAlerts(t, o, pr, func(where string, sels []selector) { checkQueueMatchers(t, where, sels) })
		for _, a := range realtimeAlerts {
			require.True(t, seen[a], "%s: alert %s missing", o, a)
		}
	}
}

// freshnessSeries is minutes of per-minute verdict counts (good within 3
// minutes, late after) in promqltest's notation, for one source: each
// element of phases is (minutes, good per minute, late per minute).
func freshnessSeries(source string, phases ...[3]int) string {
	var fast, all []string
	var f, a int
	fast, all = append(fast, "0"), append(all, "0")
	for _, p := range phases {
		for range p[0] {
			f += p[1]
			a += p[1] + p[2]
			fast, all = append(fast, fmt.Sprint(f)), append(all, fmt.Sprint(a))
		}
	}
	l := `{namespace="chatguard",pod="w1",source="` + source + `"`
	return "load 1m\n chatguard_review_freshness_seconds_bucket" + l + `,le="180"} ` + strings.Join(fast, " ") +
		"\n chatguard_review_freshness_seconds_count" + l + "} " + strings.Join(all, " ")
}

// TestFreshnessBurnAlertsFireOnTheirBurnRate evaluates the SLO's alerts on
// synthetic histograms: each fires at its burn rate over both of its
// windows, none fires on a healthy fleet or on late batch verdicts, and a
// burst that is over stops the fast alert (the short window).
func TestFreshnessBurnAlertsFireOnTheirBurnRate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		alert, name, series string
		until               time.Duration
		fires               bool
	}{
		{"ChatguardRealtimeFreshnessBurnFast", "every real-time verdict late",
			freshnessSeries("realtime", [3]int{70, 0, 10}), 70 * time.Minute, true},
		{"ChatguardRealtimeFreshnessBurnFast", "healthy: 2 % late",
			freshnessSeries("realtime", [3]int{70, 49, 1}), 70 * time.Minute, false},
		{"ChatguardRealtimeFreshnessBurnFast", "late for 55 minutes, fresh again for the last 10",
			freshnessSeries("realtime", [3]int{55, 0, 10}, [3]int{10, 10, 0}), 65 * time.Minute, false},
		{"ChatguardRealtimeFreshnessBurnFast", "only batch verdicts are hours old",
			freshnessSeries("batch", [3]int{70, 0, 10}) + "\n" + strings.TrimPrefix(freshnessSeries("realtime", [3]int{70, 10, 0}), "load 1m\n"),
			70 * time.Minute, false},

		{"ChatguardRealtimeFreshnessBurnSlow", "40 % late for seven hours",
			freshnessSeries("realtime", [3]int{420, 6, 4}), 420 * time.Minute, true},
		{"ChatguardRealtimeFreshnessBurnFast", "40 % late is not a fast burn",
			freshnessSeries("realtime", [3]int{420, 6, 4}), 420 * time.Minute, false},
		{"ChatguardRealtimeFreshnessBurnSlow", "10 % late",
			freshnessSeries("realtime", [3]int{420, 9, 1}), 420 * time.Minute, false},

		{"ChatguardRealtimeFreshnessBudgetLow", "20 % late for a day and more",
			freshnessSeries("realtime", [3]int{26 * 60, 4, 1}), 26 * time.Hour, true},
		{"ChatguardRealtimeFreshnessBudgetLow", "within the objective: 4 % late",
			freshnessSeries("realtime", [3]int{26 * 60, 24, 1}), 26 * time.Hour, false},
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
