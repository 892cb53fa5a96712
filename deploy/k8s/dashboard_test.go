package k8s_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// grafanaVars stand in for the dashboard's variables when its queries are
// parsed.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "${namespace}", "chatguard", "$namespace", "chatguard")

type panel struct {
	ID      int     `json:"id"`
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

func TestDashboard(t *testing.T) {
	t.Parallel()
	inv := exported(t)
	b, err := os.ReadFile(filepath.Join("base", "monitoring", "dashboards", "chatguard.json"))
	require.NoError(t, err)
	var d struct {
		UID        string  `json:"uid"`
		Title      string  `json:"title"`
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(b, &d))
	require.NotEmpty(t, d.UID)
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	require.True(t, vars["datasource"] && vars["namespace"], "the dashboard picks its data source and namespace")

	// The ConfigMap Grafana's sidecar loads carries this very file.
	for _, o := range overlays {
		cm := render(t, o).ConfigMaps["chatguard-dashboard"]
		require.NotNil(t, cm, o)
		require.JSONEq(t, string(b), cm.Data["chatguard.json"], o)
		require.Equal(t, "1", cm.Labels["grafana_dashboard"], o)
	}

	ids := map[int]bool{}
	used := map[string]bool{}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			require.False(t, ids[p.ID], "panel id %d twice", p.ID)
			ids[p.ID] = true
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
			for _, tg := range p.Targets {
				where := "panel " + p.Title + "/" + tg.RefID
				sels := checkExpr(t, where, grafanaVars.Replace(tg.Expr), inv)
				checkQueueMatchers(t, where, sels)
				for _, s := range sels {
					used[s.name] = true
				}
			}
		}
	}
	walk(d.Panels)

	// What the issue asks the dashboard to show, by the metric that shows it.
	for topic, metric := range map[string]string{
		"throughput":               "chatguard_worker_jobs_total",
		"queue":                    "aws_sqs_approximate_number_of_messages_visible_maximum",
		"queue age":                "aws_sqs_approximate_age_of_oldest_message_maximum",
		"stage latency":            "chatguard_worker_stage_latency_seconds_bucket",
		"time to first token":      "chatguard_llm_ttft_seconds_bucket",
		"fallback share":           "chatguard_llm_requests_total",
		"tokens":                   "chatguard_llm_tokens_total",
		"model errors":             "chatguard_llm_attempts_total",
		"consumer lag":             "chatguard_consumer_oldest_buffered_age_seconds",
		"builds running":           "chatguard_build_info",
		"lake events dropped":      "chatguard_worker_events_dropped_total",
		"lake writes":              "chatguard_consumer_events_total",
		"chat api errors":          "chatguard_chatapi_requests_total",
		"breaker state":            "chatguard_llm_breaker_state",
		"model calls in flight":    "chatguard_llm_gate_in_use",
		"message age at pickup":    "chatguard_worker_message_age_seconds_bucket",
		"jobs in flight":           "chatguard_worker_inflight_jobs",
		"consumer buffered data":   "chatguard_consumer_buffered_events",
		"calls in flight by class": "chatguard_llm_class_in_flight",
		"calls waiting by class":   "chatguard_llm_class_waiting",
		"calls refused by class":   "chatguard_llm_class_refused_total",
		"ttft by class":            "chatguard_llm_class_ttft_seconds_bucket",
		"spend":                    "chatguard_llm_cost_dollars_total",
		"daily budget":             "chatguard_llm_daily_budget_dollars",
	} {
		require.True(t, used[metric], "no panel shows %s (%s)", topic, metric)
	}
}
