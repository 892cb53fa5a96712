package k8s_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
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
	y, err := yaml.Marshal(pr.Spec)
	require.NoError(t, err)
	groups, errs := rulefmt.Parse(y, false, model.UTF8Validation, promParser, slog.New(slog.DiscardHandler))
	require.Empty(t, errs, "rulefmt: %v", errs)
	inv := exported(t)
	heads := map[string]map[string]bool{}
	seen := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "%s: only alerts here", g.Name)
			require.False(t, seen[r.Alert], "alert %s defined twice", r.Alert)
			seen[r.Alert] = true
			where := "console/" + r.Alert
			for _, sel := range checkExpr(t, where, r.Expr, inv) {
				require.True(t, sel.name == "up" || strings.HasPrefix(sel.name, "chatguard_console_"),
					"%s: %s is not a console metric (the worker exports the same llm/live names; scope it by job)", where, sel.name)
				for _, lm := range sel.matchers {
					if lm.Name == "job" {
						require.True(t, lm.Matches(job), "%s: %s does not match the console's job %q", where, lm, job)
					}
				}
			}
			require.Contains(t, []string{"warning", "critical"}, r.Labels["severity"], where)
			for _, a := range []string{"summary", "description", "runbook_url"} {
				require.NotEmpty(t, r.Annotations[a], "%s: annotation %s", where, a)
			}
			checkRunbook(t, where, r.Alert, r.Annotations["runbook_url"], heads)
		}
	}
	for _, a := range consoleAlerts {
		require.True(t, seen[a], "alert %s missing", a)
	}
}
