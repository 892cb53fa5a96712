package accounthistory

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	lookups   *prometheus.CounterVec
	seconds   prometheus.Histogram
	evictions prometheus.Counter
	entries   prometheus.Gauge
}

// lookupOutcomes are the outcome label's values: a cached answer (hit), a
// query (miss), a query given up (timeout) or failed (error), and a room
// with no participant to ask about (none).
var lookupOutcomes = []string{"hit", "miss", "timeout", "error", "none"}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_review_account_history_lookups_total",
			Help: "Account-history lookups by outcome (hit, miss, timeout, error, none); on timeout and error the review went on without history.",
		}, []string{"outcome"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chatguard_review_account_history_query_seconds",
			Help:    "Time of the account-history queries (cache misses), timeouts included.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1},
		}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_review_account_history_evictions_total",
			Help: "Account-history answers evicted from the full cache before their TTL.",
		}),
		entries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chatguard_review_account_history_cache_entries",
			Help: "Account-history answers in the cache (expired ones are dropped when next asked for or evicted).",
		}),
	}
	for _, o := range lookupOutcomes {
		m.lookups.WithLabelValues(o)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.lookups, m.seconds, m.evictions, m.entries} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("account history: register metrics: %w", err)
		}
	}
	return m, nil
}
