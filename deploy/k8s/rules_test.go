package k8s_test

import (
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// requiredAlerts are the conditions docs/operations.md's runbook covers,
// by alert name.
var requiredAlerts = []string{
	"ChatguardReviewBacklogOld", "ChatguardReviewBacklogCritical", "ChatguardFeedbackBacklogOld",
	"ChatguardDeadLetterQueueNotEmpty", "ChatguardWorkerDown", "ChatguardNoVerdicts",
	"ChatguardJobFailureRateHigh", "ChatguardFallbackShareHigh", "ChatguardLLMBreakerOpen",
	"ChatguardStopSubscriberDown", "ChatguardRedisMemoryHigh", "ChatguardRedisEvicting", "ChatguardRedisRejectingWrites", "ChatguardLakeEventsDropped", "ChatguardConsumerDown",
	"ChatguardConsumerBufferStale", "ChatguardDependencyDown",
	"ChatguardBatchStale", "ChatguardBatchFreshnessUnknown", "ChatguardAutoscalerErrors", "ChatguardOutboxStuck",
	"ChatguardSpendBurnFast", "ChatguardSpendBurnSlow",
}

// runbookDoc is the page every alert's runbook_url points into, and
// runbookBase its address on GitHub.
const (
	runbookDoc  = "../../docs/operations.md"
	runbookBase = "https://github.com/chatguard/chatguard/blob/main/docs/operations.md#"
)

// anchors returns the GitHub anchors of the headings of a Markdown file.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		out[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
	}
	return out
}

// TestAlertRules loads every overlay's PrometheusRule with Prometheus' own
// rule loader (unknown fields fail, every expression and template is
// parsed), and checks each alert's metrics, labels and runbook.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	inv := exported(t)
	heads := anchors(t, runbookDoc)
	for _, o := range overlays {
		t.Run(o, func(t *testing.T) {
			s := render(t, o)
			pr, ok := s.PrometheusRules["chatguard"]
			require.True(t, ok)
			y, err := yaml.Marshal(pr.Spec)
			require.NoError(t, err)
			groups, errs := rulefmt.Parse(y, false, model.UTF8Validation, promParser, slog.New(slog.DiscardHandler))
			require.Empty(t, errs, "rulefmt: %v", errs)

			seen := map[string]bool{}
			for _, g := range groups.Groups {
				for _, r := range g.Rules {
					require.NotEmpty(t, r.Alert, "%s: only alerts here (a recording rule needs a metric test of its own)", g.Name)
					require.False(t, seen[r.Alert], "alert %s defined twice", r.Alert)
					seen[r.Alert] = true
					where := o + "/" + r.Alert
					sels := checkExpr(t, where, r.Expr, inv)
					checkQueueMatchers(t, where, sels)
					require.Contains(t, []string{"warning", "critical"}, r.Labels["severity"], where)
					for _, a := range []string{"summary", "description", "runbook_url"} {
						require.NotEmpty(t, r.Annotations[a], "%s: annotation %s", where, a)
					}
					anchor := strings.TrimPrefix(r.Annotations["runbook_url"], runbookBase)
					require.NotEqual(t, r.Annotations["runbook_url"], anchor, "%s: runbook_url must point into docs/operations.md", where)
					require.Equal(t, strings.ToLower(r.Alert), anchor, where)
					require.True(t, heads[anchor], "%s: docs/operations.md has no runbook heading for #%s", where, anchor)
				}
			}
			for _, a := range requiredAlerts {
				require.True(t, seen[a], "alert %s missing", a)
			}
		})
	}
}
