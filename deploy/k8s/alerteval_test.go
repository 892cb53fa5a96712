package k8s_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/k8s/manifest"
)

// ruleOf returns the alert called name from prod's rendered rules, or the
// console's.
func ruleOf(t *testing.T, name string) manifest.Rule {
	t.Helper()
	for _, pr := range render(t, "prod"+realtimeSuffix).PrometheusRules {
		for _, g := range pr.Spec.Groups {
			for _, r := range g.Rules {
				if r.Alert == name {
					return r
				}
			}
		}
	}
	t.Fatalf("alert %s not found", name)
	return manifest.Rule{}
}

// evalAlert loads series (promqltest's "load" syntax) into a TSDB and
// evaluates the alert as Prometheus' rule manager does, once a minute from
// time 0 to until, and returns the alert's highest state at until
// (StateInactive when no instance is pending or firing).
func evalAlert(t *testing.T, r manifest.Rule, series string, until time.Duration) rules.AlertState {
	t.Helper()
	st := promqltest.LoadedStorage(t, series)
	engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
	expr, err := promParser.ParseExpr(r.Expr)
	require.NoError(t, err)
	var hold time.Duration
	if r.For != "" {
		d, err := model.ParseDuration(r.For)
		require.NoError(t, err)
		hold = time.Duration(d)
	}
	rule := rules.NewAlertingRule(r.Alert, expr, hold, 0, labels.FromMap(r.Labels), labels.EmptyLabels(), labels.EmptyLabels(), "", true, slog.New(slog.DiscardHandler))
	query := rules.EngineQueryFunc(engine, st)
	for ts := time.Duration(0); ts <= until; ts += time.Minute {
		_, err := rule.Eval(context.Background(), 0, time.Unix(0, 0).Add(ts).UTC(), query, nil, 0)
		require.NoError(t, err, "%s at %s", r.Alert, ts)
	}
	state := rules.StateInactive
	for _, a := range rule.ActiveAlerts() {
		state = max(state, a.State)
	}
	return state
}

// seq writes n samples of a repeating pattern in promqltest's notation.
func seq(n int, pattern ...float64) string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(pattern[i%len(pattern)])
	}
	return strings.Join(out, " ")
}

// TestFixedAlertsFireOnTheirFailure evaluates the alerts whose expressions
// carry a reason on synthetic series: each fires on the failure it is for
// and stays silent on a healthy fleet.
func TestFixedAlertsFireOnTheirFailure(t *testing.T) {
	t.Parallel()
	const ns = `namespace="chatguard"`
	cases := []struct {
		alert, name, series string
		until               time.Duration
		fires               bool
	}{
		// A pool that keeps failing: open 30 s, then half-open for a
		// 20 s probe that fails, again and again (10 s samples). The
		// minute evaluations land on half-open every few minutes, which
		// reset "== 2 for 5m".
		{"ChatguardLLMBreakerOpen", "failing pool flaps open and half-open",
			"load 10s\n chatguard_llm_breaker_state{" + ns + `,pod="w1",pool="primary"} ` + seq(240, 2, 2, 2, 1, 1),
			40 * time.Minute, true},
		{"ChatguardLLMBreakerOpen", "healthy pool stays closed",
			"load 10s\n chatguard_llm_breaker_state{" + ns + `,pod="w1",pool="primary"} ` + seq(240, 0),
			40 * time.Minute, false},
		{"ChatguardLLMBreakerOpen", "a pool that recovers within minutes",
			"load 10s\n chatguard_llm_breaker_state{" + ns + `,pod="w1",pool="primary"} ` + seq(24, 2, 2, 2, 1, 1) + " " + seq(216, 0),
			40 * time.Minute, false},

		// The worker exports outcome="done" at 0 from its start: a fleet
		// that never saved a verdict has a flat zero series.
		{"ChatguardNoVerdicts", "fleet that never saved a verdict",
			"load 1m\n chatguard_worker_jobs_total{" + ns + `,pod="w1",outcome="done"} 0+0x150`,
			150 * time.Minute, true},
		{"ChatguardNoVerdicts", "fleet saving verdicts",
			"load 1m\n chatguard_worker_jobs_total{" + ns + `,pod="w1",outcome="done"} 0+10x150`,
			150 * time.Minute, false},

		{"ChatguardFallbackShareHigh", "half the calls on the managed API",
			"load 1m\n chatguard_llm_requests_total{" + ns + `,pod="w1",pool="fallback",outcome="ok"} 0+50x60` +
				"\n chatguard_llm_requests_total{" + ns + `,pod="w1",pool="primary",outcome="ok"} 0+50x60`,
			60 * time.Minute, true},
		{"ChatguardFallbackShareHigh", "vLLM answering nearly everything",
			"load 1m\n chatguard_llm_requests_total{" + ns + `,pod="w1",pool="fallback",outcome="ok"} 0+2x60` +
				"\n chatguard_llm_requests_total{" + ns + `,pod="w1",pool="primary",outcome="ok"} 0+98x60`,
			60 * time.Minute, false},

		{"ChatguardAutoscalerErrors", "scaler errors every poll",
			`load 1m` + "\n" + ` keda_scaled_object_errors_total{namespace="keda",exported_namespace="chatguard",scaledObject="chatguard-worker"} 0+4x60`,
			60 * time.Minute, true},
		{"ChatguardAutoscalerErrors", "scaler reads its metric",
			`load 1m` + "\n" + ` keda_scaled_object_errors_total{namespace="keda",exported_namespace="chatguard",scaledObject="chatguard-worker"} 3+0x60`,
			60 * time.Minute, false},

		// The relays refresh the backlog gauge every 15 s; a message no
		// relay can send ages with the clock.
		{"ChatguardOutboxStuck", "a message no relay can send",
			"load 1m\n chatguard_outbox_oldest_age_seconds{" + ns + `,pod="w1",destination="feedback"} 0+60x60` +
				"\n chatguard_outbox_oldest_age_seconds{" + ns + `,pod="w2",destination="feedback"} 0+60x60`,
			60 * time.Minute, true},
		{"ChatguardOutboxStuck", "relays keeping up, through a five-minute SQS outage",
			"load 1m\n chatguard_outbox_oldest_age_seconds{" + ns + `,pod="w1",destination="feedback"} ` + seq(20, 0, 1) + " 60 120 180 240 300 " + seq(35, 0, 1),
			60 * time.Minute, false},
		// Two pods report the same Redis; the max decides.
		{"ChatguardRedisMemoryHigh", "room state at 90 % of maxmemory",
			"load 1m\n chatguard_redis_memory_used_bytes{" + ns + `,pod="t1",role="state"} 900+0x30` +
				"\n chatguard_redis_memory_max_bytes{" + ns + `,pod="t1",role="state"} 1000+0x30` +
				"\n chatguard_redis_memory_used_bytes{" + ns + `,pod="t2",role="state"} 900+0x30` +
				"\n chatguard_redis_memory_max_bytes{" + ns + `,pod="t2",role="state"} 1000+0x30`,
			30 * time.Minute, true},
		{"ChatguardRedisMemoryHigh", "half full",
			"load 1m\n chatguard_redis_memory_used_bytes{" + ns + `,pod="t1",role="state"} 500+0x30` +
				"\n chatguard_redis_memory_max_bytes{" + ns + `,pod="t1",role="state"} 1000+0x30`, 30 * time.Minute, false},
		{"ChatguardRedisMemoryHigh", "no maxmemory set",
			"load 1m\n chatguard_redis_memory_used_bytes{" + ns + `,pod="t1",role="shared"} 900+0x30` +
				"\n chatguard_redis_memory_max_bytes{" + ns + `,pod="t1",role="shared"} 0+0x30`, 30 * time.Minute, false},
		{"ChatguardRedisEvicting", "room state evicting",
			"load 1m\n chatguard_redis_evicted_keys_total{" + ns + `,pod="t1",role="state"} 0+5x30`, 30 * time.Minute, true},
		{"ChatguardRedisEvicting", "room state never evicts",
			"load 1m\n chatguard_redis_evicted_keys_total{" + ns + `,pod="t1",role="state"} 3+0x30`, 30 * time.Minute, false},
		{"ChatguardRedisEvicting", "the shared Redis evicts by design",
			"load 1m\n chatguard_redis_evicted_keys_total{" + ns + `,pod="w1",role="shared"} 0+5x30`, 30 * time.Minute, false},
		{"ChatguardRedisRejectingWrites", "a full noeviction Redis",
			"load 1m\n chatguard_redis_rejected_writes_total{" + ns + `,pod="w1",role="shared"} 0+2x30`, 30 * time.Minute, true},
		{"ChatguardRedisRejectingWrites", "writes accepted",
			"load 1m\n chatguard_redis_rejected_writes_total{" + ns + `,pod="w1",role="shared"} 4+0x30`, 30 * time.Minute, false},

		// Time 0 is the epoch: a newest window that ended at 0 is as old
		// as the evaluation time.
		{"ChatguardBatchStale", "no window published for four hours",
			"load 1m\n chatguard_batch_last_success_window_end_timestamp_seconds{" + ns + "} 0+0x300",
			300 * time.Minute, true},
		{"ChatguardBatchStale", "hourly windows published",
			"load 1m\n chatguard_batch_last_success_window_end_timestamp_seconds{" + ns + "} " + hourly(300),
			300 * time.Minute, false},
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
	require.Equal(t, "critical", ruleOf(t, "ChatguardFallbackShareHigh").Labels["severity"], "fallback calls cost money: the share alert pages")
}

// hourly gives, for each minute 0..n, the end of the newest window a healthy
// batch has published by then: the run at HH:00 publishes [HH-1, HH) within
// 45 minutes, say 20.
func hourly(n int) string {
	out := make([]string, n+1)
	for m := 0; m <= n; m++ {
		end := ((m - 20) / 60) * 60 // the hour whose run has finished
		if m < 20 {
			end = 0
		}
		out[m] = fmt.Sprint(end * 60)
	}
	return strings.Join(out, " ")
}
