// Package buildinfo holds the version and revision stamped into a chatguard
// binary at link time, prints them for --version and exports them as the
// chatguard_build_info metric, so that a dashboard shows which build every
// pod runs and an alert can be read against a rollout.
//
// A release build stamps both with the linker (the Dockerfile and the
// daemonless image builder in deploy/k8s do this):
//
//	go build -trimpath -ldflags "\
//	  -X github.com/chatguard/chatguard/internal/buildinfo.version=v1.4.0 \
//	  -X github.com/chatguard/chatguard/internal/buildinfo.revision=$(git rev-parse HEAD)" ./cmd/worker
//
// An unstamped build (go run, go test) reports version "dev" and the VCS
// revision the Go toolchain recorded, or "unknown" when it recorded none
// (as with -buildvcs=false or a build outside a checkout).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Set by the linker with -X; see the package comment. They are unexported
// so that nothing changes them at run time.
var (
	version  string
	revision string
)

// MetricName is the name of the build-info gauge.
const MetricName = "chatguard_build_info"

// Info is what a binary knows about its own build.
type Info struct {
	// Version is the release version ("v1.4.0"), or "dev" when unstamped.
	Version string
	// Revision is the source revision (a git commit), or "unknown".
	Revision string
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Get returns this binary's build information. It never fails: missing
// values fall back to "dev" and "unknown".
func Get() Info {
	return resolve(version, revision, debug.ReadBuildInfo)
}

// resolve is Get with its inputs passed in, for tests.
func resolve(v, rev string, read func() (*debug.BuildInfo, bool)) Info {
	info := Info{Version: v, Revision: rev, GoVersion: runtime.Version()}
	if info.Version == "" {
		info.Version = "dev"
	}
	if info.Revision == "" {
		info.Revision = "unknown"
		if bi, ok := read(); ok {
			var modified bool
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					info.Revision = s.Value
				case "vcs.modified":
					modified = s.Value == "true"
				}
			}
			if modified && info.Revision != "unknown" {
				info.Revision += "-dirty"
			}
		}
	}
	return info
}

// String is the line --version prints after the command's name.
func (i Info) String() string {
	return fmt.Sprintf("version %s, revision %s, %s", i.Version, i.Revision, i.GoVersion)
}

// Collector returns the chatguard_build_info gauge: always 1, labelled with
// the version and revision, so that `max by (version) (chatguard_build_info)`
// shows a rollout's progress. Register it once per registry.
func Collector() prometheus.Collector {
	i := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        MetricName,
		Help:        "Always 1; the labels say which build this process runs.",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": i.Revision},
	})
	g.Set(1)
	return g
}
