package k8s_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/rules"
	"github.com/stretchr/testify/require"
)

// actionsAlerts are the protective actions' conditions; their runbooks
// are in docs/actions.md.
var actionsAlerts = []string{
	"ChatguardProtectionLatencyBurnFast", "ChatguardActionRuleFiringHigh", "ChatguardActionRuleCapped",
	"ChatguardActionsDeadLettered", "ChatguardActionsPlanFailing",
}

// TestActionsRules checks the PrometheusRule chatguard-actions as
// TestRealtimeRules checks real time's: Prometheus' own rule loader,
// every chatguard_ metric exported by the binaries with the labels
// matched on, a severity and a runbook section per alert, in every
// overlay. The actions DLQ is the chat service's queue, named by the
// convention chatguard[-<env>]-actions-dlq, not by a worker flag, so its
// matcher is not checked against the overlays' queues.
func TestActionsRules(t *testing.T) {
	t.Parallel()
	for _, o := range overlays {
		pr, ok := render(t, o).PrometheusRules["chatguard-actions"]
		require.True(t, ok, "%s: PrometheusRule chatguard-actions", o)
		seen := checkAlerts(t, o, pr, nil)
		for _, a := range actionsAlerts {
			require.True(t, seen[a], "%s: alert %s missing", o, a)
		}
	}
}

// latencySeries is minutes of per-minute action counts (within 4 minutes,
// later), as freshnessSeries.
func latencySeries(phases ...[3]int) string {
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
	l := `{namespace="chatguard",pod="w1",action="warn_counterpart"`
	return "load 1m\n chatguard_protection_latency_seconds_bucket" + l + `,le="240"} ` + strings.Join(fast, " ") +
		"\n chatguard_protection_latency_seconds_count" + l + "} " + strings.Join(all, " ")
}

// ruleSeries is a rule's written actions: per-minute counts for each
// phase (minutes, actions per minute).
func ruleSeries(phases ...[2]int) string {
	vals := []string{"0"}
	n := 0
	for _, p := range phases {
		for range p[0] {
			n += p[1]
			vals = append(vals, fmt.Sprint(n))
		}
	}
	return `load 1m
 chatguard_actions_rule_total{namespace="chatguard",pod="w1",rule="payment_scam_notice",mode="on"} ` + strings.Join(vals, " ")
}

func TestActionsAlertsFire(t *testing.T) {
	t.Parallel()
	cases := []struct {
		alert, name, series string
		until               time.Duration
		fires               bool
	}{
		{"ChatguardProtectionLatencyBurnFast", "every action late", latencySeries([3]int{70, 0, 10}), 70 * time.Minute, true},
		{"ChatguardProtectionLatencyBurnFast", "healthy: 2 % late", latencySeries([3]int{70, 49, 1}), 70 * time.Minute, false},
		{"ChatguardActionRuleFiringHigh", "a day at 1 a minute, then 10 a minute for an hour",
			ruleSeries([2]int{24 * 60, 1}, [2]int{60, 10}), 25 * time.Hour, true},
		{"ChatguardActionRuleFiringHigh", "steady at 1 a minute", ruleSeries([2]int{25 * 60, 1}), 25 * time.Hour, false},
		{"ChatguardActionsPlanFailing", "errors for 20 minutes",
			"load 1m\n chatguard_actions_plan_errors_total{namespace=\"chatguard\",pod=\"w1\"} 0+1x30", 30 * time.Minute, true},
		{"ChatguardActionsPlanFailing", "no errors",
			"load 1m\n chatguard_actions_plan_errors_total{namespace=\"chatguard\",pod=\"w1\"} 0+0x30", 30 * time.Minute, false},
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
