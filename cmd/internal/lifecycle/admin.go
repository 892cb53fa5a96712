package lifecycle

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminHandler serves the probes and the metrics of a binary whose
// readiness is one engine's:
//
//   - /healthz: the process is alive: 200 while it serves, unless ready
//     also has a Live() error method (a loop that can get stuck) that
//     answers an error: then 503 with it, so the liveness probe restarts
//     the pod.
//   - /readyz: 200 while ready.Ready(); 503 with notReady otherwise.
//   - /metrics: the binary's private registry.
func AdminHandler(reg *prometheus.Registry, ready interface{ Ready() bool }, notReady string) http.Handler {
	mux := http.NewServeMux()
	live, _ := ready.(interface{ Live() error })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if live != nil {
			if err := live.Live(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Ready() {
			http.Error(w, notReady, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	// OpenMetrics when asked for: the only format that carries the latency
	// histograms' exemplars (a sampled trace's id).
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: true}))
	return mux
}
