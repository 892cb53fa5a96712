package consoletest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// axeViolation is one rule axe-core found broken on a page.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  int    `json:"nodes"`
	// Where: the first elements' selectors, to find them.
	Where string `json:"where"`
}

// axeSource is axe-core's script from node_modules (package.json pins the
// version; .ci/run installs it with npm ci). Outside CI a missing install
// skips the test; in CI it fails.
func axeSource(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("axe-core is not installed and CI is set (.ci/run runs npm ci in deploy/local/consoletest): %v", err)
		}
		t.Skipf("axe-core is not installed (cd deploy/local/consoletest && npm ci): %v", err)
	}
	return string(b)
}

// requireAccessible runs axe-core on the page b shows now (WCAG 2.x A and
// AA rules) and fails on any serious or critical violation. It logs every
// violation, minor ones included, as "axe: page: …" lines: the console
// guide's table comes from them. The script is evaluated through DevTools,
// which the page's CSP does not govern: nothing is added to the console.
func requireAccessible(t *testing.T, b context.Context, axe, page string) {
	t.Helper()
	_, err := chromedp.Run(b, chromedp.EvaluateAsDevTools[bool](axe+";true"))
	require.NoError(t, err)
	vs, err := chromedp.Run(b, chromedp.EvaluateAsDevTools[[]axeViolation](`axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}, resultTypes: ["violations"]})
		.then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length, where: v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(", ")})))`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	var bad []string
	for _, v := range vs {
		t.Logf("axe: %s: %s (%s, %d elements: %s): %s", page, v.ID, v.Impact, v.Nodes, v.Where, v.Help)
		if v.Impact == "serious" || v.Impact == "critical" {
			bad = append(bad, v.ID+" ("+v.Impact+"): "+v.Help)
		}
	}
	if len(vs) == 0 {
		t.Logf("axe: %s: no violations", page)
	}
	require.Empty(t, bad, "axe-core on %s: %s", page, strings.Join(bad, "; "))
}
