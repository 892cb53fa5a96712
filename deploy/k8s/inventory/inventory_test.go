package inventory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
}

const header = "package p\n\nimport prom \"github.com/prometheus/client_golang/prometheus\"\n\n"

func TestMetricsReadsEveryConstructorShape(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, map[string]string{
		"a/a.go": header + `const name = "x_const_total"

func f(pool string) {
	labels := prom.Labels{"pool": pool}
	_ = prom.NewCounter(prom.CounterOpts{Name: name, Help: "h"})
	_ = prom.NewHistogramVec(prom.HistogramOpts{Name: "x_seconds", Help: "h"}, []string{"stage", "pool"})
	_ = prom.NewGaugeFunc(prom.GaugeOpts{Name: "x_gauge", ConstLabels: labels}, func() float64 { return 0 })
	_ = prom.NewSummary(prom.SummaryOpts{Name: "x_summary", ConstLabels: prom.Labels{"k": "v"}})
	_ = prom.NewRegistry()
}
`,
		"a/a_test.go":      header + `var _ = prom.NewCounter(prom.CounterOpts{Name: "only_in_tests_total"})` + "\n",
		"deploy/x/x.go":    header + `var _ = prom.NewCounter(prom.CounterOpts{Name: "stand_in_total"})` + "\n",
		"b/no_prom.go":     "package b\n\nfunc NewCounter() {}\n",
		"c/other_alias.go": "package c\n\nimport \"github.com/prometheus/client_golang/prometheus\"\n\nvar _ = prometheus.NewGauge(prometheus.GaugeOpts{Name: \"c_up\"})\n",
	})
	m, err := Metrics(root)
	require.NoError(t, err)
	require.Len(t, m, 5, "%v", m)
	require.Equal(t, Metric{Name: "x_const_total", Type: "counter", Pos: "a/a.go:9"}, m["x_const_total"])
	require.Equal(t, []string{"pool", "stage"}, m["x_seconds"].Labels)
	require.Equal(t, []string{"x_seconds_bucket", "x_seconds_sum", "x_seconds_count"}, m["x_seconds"].Series())
	require.True(t, m["x_seconds"].HasLabel("x_seconds_bucket", "le"))
	require.False(t, m["x_seconds"].HasLabel("x_seconds_sum", "le"))
	require.Equal(t, []string{"pool"}, m["x_gauge"].Labels)
	require.Equal(t, []string{"k"}, m["x_summary"].Labels)
	require.True(t, m["x_summary"].HasLabel("x_summary", "quantile"))
	require.Equal(t, "gauge", m["c_up"].Type)
	require.NotContains(t, m, "only_in_tests_total")
	require.NotContains(t, m, "stand_in_total")
}

func TestMetricsFailsOnWhatItCannotRead(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"options in a variable": `var o = prom.CounterOpts{Name: "a_total"}
var _ = prom.NewCounter(o)`,
		"name built at run time": `func f(s string) { _ = prom.NewCounter(prom.CounterOpts{Name: s + "_total"}) }`,
		"namespace prefix":       `var _ = prom.NewCounter(prom.CounterOpts{Namespace: "chatguard", Name: "a_total"})`,
		"labels in a variable": `var ls = []string{"a"}
var _ = prom.NewCounterVec(prom.CounterOpts{Name: "a_total"}, ls)`,
		"custom collector desc": `var _ = prom.NewDesc("a_total", "h", nil, nil)`,
		"same name, other type": `var _ = prom.NewCounter(prom.CounterOpts{Name: "a"})
var _ = prom.NewGauge(prom.GaugeOpts{Name: "a"})`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			write(t, root, map[string]string{"p/p.go": header + body + "\n"})
			_, err := Metrics(root)
			require.Error(t, err)
			require.Contains(t, err.Error(), "p/p.go:")
		})
	}
}

func TestParseHelp(t *testing.T) {
	t.Parallel()
	help := `Usage: worker [flags]

Summary.

Flags (each also settable by its environment variable; flags win):
  --admin-addr    CHATGUARD_ADMIN_ADDR    default :9090          listen address
  --fallback-key  CHATGUARD_FALLBACK_KEY  default ""             a key
  --max-age       CHATGUARD_MAX_AGE       default 6h0m0s         events older than this
`
	flags, err := ParseHelp(help)
	require.NoError(t, err)
	require.Equal(t, map[string]Flag{
		"CHATGUARD_ADMIN_ADDR":   {Name: "admin-addr", Env: "CHATGUARD_ADMIN_ADDR", Default: ":9090"},
		"CHATGUARD_FALLBACK_KEY": {Name: "fallback-key", Env: "CHATGUARD_FALLBACK_KEY", Default: ""},
		"CHATGUARD_MAX_AGE":      {Name: "max-age", Env: "CHATGUARD_MAX_AGE", Default: "6h0m0s"},
	}, flags)
	_, err = ParseHelp("Usage: x\n  -v  verbose\n")
	require.ErrorContains(t, err, "no flag rows")
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, map[string]string{
		"admin.go": `package main

import "net/http"

func h(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", nil)
	mux.Handle("POST /v1/stop", nil)
	mux.HandleFunc("/debug/pprof/", nil)
}
`,
		"admin_test.go": "package main\n\nimport \"net/http\"\n\nfunc t(mux *http.ServeMux) { mux.HandleFunc(\"GET /test-only\", nil) }\n",
	})
	rs, err := Routes(root)
	require.NoError(t, err)
	require.Equal(t, []Route{{"", "/debug/pprof/"}, {"GET", "/healthz"}, {"POST", "/v1/stop"}}, rs)
	require.True(t, rs[1].Serves("GET", "/healthz"))
	require.False(t, rs[1].Serves("GET", "/readyz"))
	require.False(t, rs[2].Serves("GET", "/v1/stop"))
	require.True(t, rs[0].Serves("GET", "/debug/pprof/heap"))

	write(t, root, map[string]string{"dyn.go": "package main\n\nimport \"net/http\"\n\nfunc d(mux *http.ServeMux, p string) { mux.HandleFunc(p, nil) }\n"})
	_, err = Routes(root)
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "not a literal"), err.Error())
}
