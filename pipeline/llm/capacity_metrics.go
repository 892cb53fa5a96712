package llm

import "github.com/prometheus/client_golang/prometheus"

// capacityCollectors are the adaptive and fleet-wide limits' gauges, per
// pool: the limit in force, the scraped waiting queue, and the fleet's
// leases and budget (fleet.go).
func capacityCollectors(r *Router) []prometheus.Collector {
	var cs []prometheus.Collector
	for _, p := range r.pools() {
		labels := prometheus.Labels{"pool": string(p.cfg.Name)}
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "chatguard_llm_concurrency_limit", Help: "The pool's concurrency limit in this process now (adaptive, or the static maximum).", ConstLabels: labels,
			}, func() float64 { return float64(p.gate.capacity()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "chatguard_llm_pool_waiting", Help: "The pool's waiting queue at the last scrape of its /metrics (0 when not scraped).", ConstLabels: labels,
			}, func() float64 { return float64(p.waiting.Load()) }),
		)
	}
	if r.fleet != nil {
		cs = append(cs, r.fleet.collectors()...)
	}
	return cs
}
