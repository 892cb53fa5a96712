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

	"github.com/chatguard/chatguard/deploy/k8s/manifest"
)

// requiredAlerts are the conditions docs/runbooks.md covers, by alert
// name.
var requiredAlerts = []string{
	"ChatguardReviewBacklogOld", "ChatguardReviewBacklogCritical", "ChatguardFeedbackBacklogOld",
	"ChatguardDeadLetterQueueNotEmpty", "ChatguardWorkerDown", "ChatguardNoVerdicts",
	"ChatguardJobFailureRateHigh", "ChatguardFallbackShareHigh", "ChatguardLLMBreakerOpen",
	"ChatguardStopSubscriberDown", "ChatguardRedisMemoryHigh", "ChatguardRedisEvicting", "ChatguardRedisRejectingWrites", "ChatguardLakeEventsDropped", "ChatguardConsumerDown",
	"ChatguardConsumerBufferStale", "ChatguardDependencyDown",
	"ChatguardBatchStale", "ChatguardBatchFreshnessUnknown", "ChatguardAutoscalerErrors", "ChatguardOutboxStuck",
	"ChatguardSpendBurnFast", "ChatguardSpendBurnSlow",
}

// docsBase is the address on GitHub of docs/, which every alert's
// runbook_url points into: docsBase + PAGE.md#alertname.
const docsBase = "https://github.com/chatguard/chatguard/blob/main/docs/"

// docsDir is docs/ relative to this directory.
const docsDir = "../../docs/"

// checkRunbook fails unless url is a runbook section of a docs page: the
// page exists, the anchor is the alert's name in lower case (anchors stay
// stable when a runbook moves between pages) and the page has a heading
// of that anchor. heads caches each page's anchors.
func checkRunbook(t *testing.T, where, alert, url string, heads map[string]map[string]bool) {
	t.Helper()
	rest, ok := strings.CutPrefix(url, docsBase)
	require.True(t, ok, "%s: runbook_url %q must point into docs/ (%s…)", where, url, docsBase)
	page, anchor, _ := strings.Cut(rest, "#")
	require.True(t, strings.HasSuffix(page, ".md") && !strings.Contains(page, ".."), "%s: runbook_url %q names no docs page", where, url)
	require.Equal(t, strings.ToLower(alert), anchor, "%s: the anchor is the alert's name in lower case", where)
	if heads[page] == nil {
		heads[page] = anchors(t, docsDir+page)
	}
	require.True(t, heads[page][anchor], "%s: docs/%s has no runbook heading for #%s", where, page, anchor)
}

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
	for _, o := range overlays {
		t.Run(o, func(t *testing.T) {
			pr, ok := render(t, o).PrometheusRules["chatguard"]
			require.True(t, ok)
			seen := checkAlerts(t, o, pr, func(where string, sels []selector) { checkQueueMatchers(t, where, sels) })
			for _, a := range requiredAlerts {
				require.True(t, seen[a], "alert %s missing", a)
			}
		})
	}
}

// checkAlerts holds what every PrometheusRule's alerts must be, so each
// rule's test adds only its own: Prometheus' own loader reads it; it holds
// only alerts, each defined once; every selector names a metric a binary
// exports with the labels it has (more checks on them in sels, when not
// nil); each alert has a severity, a summary, a description and a
// runbook_url whose anchor is a heading of its docs page. It returns the
// alerts seen; where prefixes the failures.
func checkAlerts(t *testing.T, where string, pr *manifest.PrometheusRule, sels func(where string, s []selector)) map[string]bool {
	t.Helper()
	y, err := yaml.Marshal(pr.Spec)
	require.NoError(t, err)
	groups, errs := rulefmt.Parse(y, false, model.UTF8Validation, promParser, slog.New(slog.DiscardHandler))
	require.Empty(t, errs, "rulefmt: %v", errs)
	inv := exported(t)
	heads := map[string]map[string]bool{}
	seen := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "%s: only alerts here (a recording rule needs a metric test of its own)", g.Name)
			require.False(t, seen[r.Alert], "alert %s defined twice", r.Alert)
			seen[r.Alert] = true
			at := where + "/" + r.Alert
			s := checkExpr(t, at, r.Expr, inv)
			if sels != nil {
				sels(at, s)
			}
			require.Contains(t, []string{"warning", "critical"}, r.Labels["severity"], at)
			for _, a := range []string{"summary", "description", "runbook_url"} {
				require.NotEmpty(t, r.Annotations[a], "%s: annotation %s", at, a)
			}
			checkRunbook(t, at, r.Alert, r.Annotations["runbook_url"], heads)
		}
	}
	return seen
}
