package k8s_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/k8s/image"
	"github.com/chatguard/chatguard/deploy/k8s/inventory"
	"github.com/chatguard/chatguard/deploy/k8s/manifest"
)

// repoRoot is the product module, two levels up.
const repoRoot = "../.."

// overlays are the deployable kustomizations; each is checked in full.
var overlays = []string{"dev", "prod"}

// stamp is what the test build writes into internal/buildinfo.
var stamp = image.Stamp{Version: "v0.0.0-k8stest", Revision: "0123456789abcdef0123456789abcdef01234567"}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// TestMain removes the binaries built for the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binaries builds the three binaries once for every test that needs them,
// exactly as the image and the Dockerfile do (static, -trimpath, stamped),
// and returns their directory.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "chatguard-k8s-bin-")
		if buildErr != nil {
			return
		}
		// Readable by the nonroot user the image tests run them as.
		if buildErr = os.Chmod(binDir, 0o755); buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		buildErr = image.BuildBinaries(ctx, repoRoot, binDir, runtime.GOARCH, stamp)
	})
	require.NoError(t, buildErr)
	return binDir
}

var (
	helpOnce sync.Once
	helps    map[string]map[string]inventory.Flag
	helpErr  error
)

// flagsOf returns the flags of each command by the command line that runs
// it: "/worker", "/worker migrate", "/consumer", "/batch".
func flagsOf(t *testing.T) map[string]map[string]inventory.Flag {
	t.Helper()
	dir := binaries(t)
	helpOnce.Do(func() {
		helps = map[string]map[string]inventory.Flag{}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, c := range [][]string{{"worker"}, {"worker", "migrate"}, {"worker", "purge"}, {"consumer"}, {"consumer", "compact"}, {"batch"}, {"console"}, {"trigger"}} {
			var f map[string]inventory.Flag
			if f, helpErr = inventory.Help(ctx, filepath.Join(dir, c[0]), c[1:]...); helpErr != nil {
				return
			}
			key := "/" + c[0]
			if len(c) > 1 {
				key += " " + c[1]
			}
			helps[key] = f
		}
	})
	require.NoError(t, helpErr)
	return helps
}

var (
	metricsOnce sync.Once
	metricInv   map[string]inventory.Metric
	metricErr   error
)

// exported returns the product's metrics, read from its source.
func exported(t *testing.T) map[string]inventory.Metric {
	t.Helper()
	metricsOnce.Do(func() { metricInv, metricErr = inventory.Metrics(repoRoot) })
	require.NoError(t, metricErr)
	return metricInv
}

var (
	renderMu sync.Mutex
	rendered = map[string]*manifest.Set{}
)

// sampleValues fill in an overlay's template values.env for the tests: the
// shipped prod values.env is full of placeholders (deploy-verify refuses
// it), so prod is checked as an operator would have filled it.
var sampleValues = map[string]string{"prod": "testdata/prod-values.env"}

// render builds an overlay once (prod with its sample values) and returns
// its objects. "ENV/migrate" is the environment's migration, which reads
// the environment's values. "ENV+realtime" is the overlay with
// components/realtime added last to its components, as docs/realtime.md
// says to turn real time on.
func render(t *testing.T, overlay string) *manifest.Set {
	t.Helper()
	renderMu.Lock()
	defer renderMu.Unlock()
	if s, ok := rendered[overlay]; ok {
		return s
	}
	name, withRealtime := strings.CutSuffix(overlay, realtimeSuffix)
	dir := filepath.Join("overlays", name)
	replace := map[string][]byte{}
	env, _, _ := strings.Cut(name, "/")
	if v, ok := sampleValues[env]; ok {
		b, err := os.ReadFile(v)
		require.NoError(t, err)
		replace[filepath.Join("overlays", env, "values", "values.env")] = b
	}
	if withRealtime {
		k := filepath.Join(dir, "kustomization.yaml")
		b, err := os.ReadFile(k)
		require.NoError(t, err)
		replace[k] = addComponent(t, b, "../../components/realtime")
	}
	s, err := manifest.RenderWith(dir, replace)
	require.NoError(t, err)
	rendered[overlay] = s
	return s
}

// realtimeSuffix names an overlay rendered with real time turned on.
const realtimeSuffix = "+realtime"

// realtimeOverlays are the deployable overlays with real time on.
var realtimeOverlays = []string{"dev" + realtimeSuffix, "prod" + realtimeSuffix}

// allOverlays are the deployable overlays with real time off and on.
var allOverlays = append(overlays[:len(overlays):len(overlays)], realtimeOverlays...)

// running returns names less the trigger's objects where overlay o does
// not list components/realtime, which alone runs the trigger.
func running(o string, names ...string) []string {
	if strings.HasSuffix(o, realtimeSuffix) {
		return names
	}
	var out []string
	for _, n := range names {
		if !strings.Contains(n, "trigger") && !strings.Contains(n, "realtime") {
			out = append(out, n)
		}
	}
	return out
}

// addComponent appends component to the components list of a
// kustomization.yaml, after every component already there.
func addComponent(t *testing.T, kustomization []byte, component string) []byte {
	t.Helper()
	lines := strings.SplitAfter(string(kustomization), "\n")
	in, last := false, -1
	for i, l := range lines {
		switch {
		case strings.TrimSpace(l) == "components:":
			in = true
		case in && strings.HasPrefix(l, "  - "):
			last = i
		case in && strings.TrimSpace(l) != "" && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "#"):
			in = false
		}
	}
	require.GreaterOrEqual(t, last, 0, "the kustomization lists components")
	out := append(lines[:last+1:last+1], "  - "+component+"\n")
	return []byte(strings.Join(append(out, lines[last+1:]...), ""))
}
