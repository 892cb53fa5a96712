package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	vcs := func(settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) { return &debug.BuildInfo{Settings: settings}, true }
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	tests := []struct {
		name          string
		version, rev  string
		read          func() (*debug.BuildInfo, bool)
		wantV, wantRv string
	}{
		{"stamped wins over vcs", "v1.4.0", "abc123", vcs(debug.BuildSetting{Key: "vcs.revision", Value: "fff"}), "v1.4.0", "abc123"},
		{"unstamped, no build info", "", "", none, "dev", "unknown"},
		{"unstamped, vcs revision", "", "", vcs(debug.BuildSetting{Key: "vcs.revision", Value: "fff"}), "dev", "fff"},
		{"unstamped, modified tree", "", "", vcs(debug.BuildSetting{Key: "vcs.revision", Value: "fff"}, debug.BuildSetting{Key: "vcs.modified", Value: "true"}), "dev", "fff-dirty"},
		{"unstamped, no vcs settings", "", "", vcs(debug.BuildSetting{Key: "vcs.modified", Value: "true"}), "dev", "unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := resolve(tc.version, tc.rev, tc.read)
			require.Equal(t, Info{Version: tc.wantV, Revision: tc.wantRv, GoVersion: runtime.Version()}, got)
		})
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	s := Info{Version: "v1.4.0", Revision: "abc123", GoVersion: "go1.26.8"}.String()
	require.Equal(t, "version v1.4.0, revision abc123, go1.26.8", s)
}

func TestCollectorExportsVersionAndRevision(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector())
	i := Get()
	want := "# HELP chatguard_build_info Always 1; the labels say which build this process runs.\n" +
		"# TYPE chatguard_build_info gauge\n" +
		`chatguard_build_info{revision="` + i.Revision + `",version="` + i.Version + `"} 1` + "\n"
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), MetricName))
}
