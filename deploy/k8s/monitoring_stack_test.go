package k8s_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestMonitoringIsSelectedByAStockOperator: kube-prometheus-stack's
// Prometheus selects PodMonitors and PrometheusRules by its release label,
// and Grafana's sidecar loads ConfigMaps labelled grafana_dashboard=1. Every
// overlay sets one release label on all of them.
func TestMonitoringIsSelectedByAStockOperator(t *testing.T) {
	t.Parallel()
	for _, o := range overlays {
		t.Run(o, func(t *testing.T) {
			s := render(t, o)
			release := map[string]bool{}
			for name, pm := range s.PodMonitors {
				require.NotEmpty(t, pm.Labels["release"], "PodMonitor %s has no release label", name)
				release[pm.Labels["release"]] = true
			}
			for name, pr := range s.PrometheusRules {
				require.NotEmpty(t, pr.Labels["release"], "PrometheusRule %s has no release label", name)
				release[pr.Labels["release"]] = true
			}
			require.Len(t, release, 1, "one release label for every monitor and rule: %v", release)
			require.Equal(t, "1", s.ConfigMaps["chatguard-dashboard"].Labels["grafana_dashboard"])
		})
	}
}

// collector is the part of an sql-exporter collector file the rules rely on.
type collector struct {
	CollectorName string `json:"collector_name"`
	Metrics       []struct {
		MetricName string   `json:"metric_name"`
		Type       string   `json:"type"`
		Help       string   `json:"help"`
		Values     []string `json:"values"`
		Query      string   `json:"query"`
	} `json:"metrics"`
}

// sqlExporterMetrics returns the metrics the shipped sql-exporter collector
// defines: the batch's freshness, read from MySQL batch_runs.
func sqlExporterMetrics(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("base/monitoring/sql-exporter/chatguard-batch.collector.yml")
	require.NoError(t, err)
	var c collector
	require.NoError(t, yaml.UnmarshalStrict(b, &c))
	out := map[string]bool{}
	for _, m := range c.Metrics {
		require.Equal(t, "gauge", m.Type, m.MetricName)
		require.Contains(t, m.Query, "batch_runs", m.MetricName)
		require.Contains(t, m.Query, "status = 'succeeded'", "only successful attempts count (pipeline.BatchRunSucceeded)")
		require.Len(t, m.Values, 1)
		require.Contains(t, m.Query, "AS "+m.Values[0])
		out[m.MetricName] = true
	}
	require.True(t, out["chatguard_batch_last_success_window_end_timestamp_seconds"])
	return out
}

// TestAirflowCanStartTheBatchPod: the Role bound to Airflow's
// ServiceAccount lets the KubernetesPodOperator create, follow, read the
// log of and delete the batch pod in the namespace, and nothing on Secrets.
func TestAirflowCanStartTheBatchPod(t *testing.T) {
	t.Parallel()
	for _, o := range overlays {
		t.Run(o, func(t *testing.T) {
			s := render(t, o)
			rb, ok := s.RoleBindings["chatguard-airflow-pod-launcher"]
			require.True(t, ok)
			require.Equal(t, "Role", rb.RoleRef.Kind)
			role, ok := s.Roles[rb.RoleRef.Name]
			require.True(t, ok, "RoleBinding refers to Role %s", rb.RoleRef.Name)
			require.Len(t, rb.Subjects, 1)
			require.Equal(t, rbacv1.ServiceAccountKind, rb.Subjects[0].Kind)
			require.NotEmpty(t, rb.Subjects[0].Namespace, "Airflow's ServiceAccount lives in Airflow's namespace")
			can := map[string]map[string]bool{}
			for _, r := range role.Rules {
				require.Equal(t, []string{""}, r.APIGroups)
				for _, res := range r.Resources {
					require.NotEqual(t, "secrets", res, "Airflow never reads the namespace's Secrets")
					for _, v := range r.Verbs {
						require.NotEqual(t, "*", v)
						if can[res] == nil {
							can[res] = map[string]bool{}
						}
						can[res][v] = true
					}
				}
			}
			for _, v := range []string{"create", "get", "list", "watch", "patch", "delete"} {
				require.True(t, can["pods"][v], "pods: %s", v)
			}
			require.True(t, can["pods/log"]["get"])
			require.True(t, can["events"]["list"], "the operator lists the pod's events when it fails")
			require.False(t, can["pods/exec"]["create"], "no exec: the DAG pushes no XCom")
		})
	}
}
