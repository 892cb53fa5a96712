package k8s_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
)

// consoleAlerts are the console's conditions docs/runbooks.md covers.
var consoleAlerts = []string{
	"ChatguardConsoleDown", "ChatguardConsoleFeedbackNotDraining", "ChatguardConsoleFeedbackSweepFailing", "ChatguardConsoleFeedbackRejected",
	"ChatguardConsoleAdmissionRefusalsHigh", "ChatguardConsoleClientsDropped", "ChatguardConsoleLiveEventsNotKept",
}

// TestConsoleMonitoring checks the console's PodMonitor (base/monitoring/console.yaml) (it selects
// the console's pods and scrapes the port that serves /metrics) and its
// PrometheusRule as TestAlertRules checks the workers': Prometheus' own
// rule loader, every chatguard_ metric exported by the binaries with the
// labels matched on, a job matcher that matches the console's PodMonitor,
// and a runbook section per alert.
func TestConsoleMonitoring(t *testing.T) {
	t.Parallel()
	s := render(t, "prod")
	pm, ok := s.PodMonitors["chatguard-console"]
	require.True(t, ok, "PodMonitor chatguard-console")
	d := s.Deployments["chatguard-console"]
	sel := labels.SelectorFromSet(pm.Spec.Selector.MatchLabels)
	require.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "the PodMonitor selects the console's pods")
	require.Len(t, pm.Spec.PodMetricsEndpoints, 1)
	ep := pm.Spec.PodMetricsEndpoints[0]
	require.Equal(t, "/metrics", ep.Path)
	c := container(t, s, "chatguard-console")
	require.Equal(t, "admin", ep.Port)
	require.Equal(t, "admin", c.ReadinessProbe.HTTPGet.Port.String(), "the port of the admin routes (/metrics among them)")
	job := pm.Namespace + "/" + pm.Name

	pr, ok := s.PrometheusRules["chatguard-console"]
	require.True(t, ok, "PrometheusRule chatguard-console")
	seen := checkAlerts(t, "console", pr, func(where string, sels []selector) {
		for _, sel := range sels {
			require.True(t, sel.name == "up" || strings.HasPrefix(sel.name, "chatguard_console_"),
				"%s: %s is not a console metric (the worker exports the same llm/live names; scope it by job)", where, sel.name)
			for _, lm := range sel.matchers {
				if lm.Name == "job" {
					require.True(t, lm.Matches(job), "%s: %s does not match the console's job %q", where, lm, job)
				}
			}
		}
	})
	for _, a := range consoleAlerts {
		require.True(t, seen[a], "alert %s missing", a)
	}
}
