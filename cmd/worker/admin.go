package main

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// adminHandler serves the probes and the metrics, nothing that changes
// state or shows the process (the operator API and pprof have listeners of
// their own, see operator.go).
//
//   - /healthz: the process is alive (always 200 while it serves).
//   - /readyz: 200 only while polling, MySQL answers within a second and no
//     dependency's breaker is open (the body names the one that is down);
//     503 while draining, so the endpoint leaves the Service during shutdown.
//   - /metrics: the worker's private registry in Prometheus text format.
func adminHandler(reg *prometheus.Registry, loop interface{ Draining() bool }, db interface{ Ping(context.Context) error }) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if loop.Draining() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := db.Ping(ctx); err != nil {
			// The error names the dependency that is down (see readiness).
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	// OpenMetrics when asked for: the only format that carries the latency
	// histograms' exemplars (a sampled trace's id).
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: true}))
	return mux
}
