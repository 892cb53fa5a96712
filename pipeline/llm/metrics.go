package llm

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
)

// metrics are the router's Prometheus series. Label values come from small
// fixed sets: stage names, pool names, outcomes and reasons defined here.
type metrics struct {
	requests  *prometheus.CounterVec
	attempts  *prometheus.CounterVec
	ttft      *prometheus.HistogramVec
	latency   *prometheus.HistogramVec
	tokens    *prometheus.CounterVec
	fallbacks *prometheus.CounterVec
	// cost is what the attempts cost at their pool's Price, by stage,
	// pool and class: the same figure each inference-log row carries.
	cost *prometheus.CounterVec
	// scrapeErrors counts failed scrapes of a pool's /metrics (adaptive.go).
	scrapeErrors *prometheus.CounterVec
	// class are the series by traffic class (class_metrics.go).
	class classMetrics
}

func newMetrics(reg prometheus.Registerer, r *Router) (*metrics, error) {
	latencyBuckets := []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_llm_requests_total",
			Help: "Stage calls through the router by the pool that answered (none when every attempt failed) and outcome (ok, invalid: no usable answer in any attempt, failed, canceled, rejected).",
		}, []string{"stage", "pool", "outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_llm_attempts_total",
			Help: "Single calls to a pool by outcome (ok, invalid, truncated, throttled, timeout, server_error, dropped, transport, rejected, canceled).",
		}, []string{"stage", "pool", "outcome"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chatguard_llm_ttft_seconds",
			Help:    "Time to the first streamed token of an attempt.",
			Buckets: latencyBuckets,
		}, []string{"stage", "pool"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chatguard_llm_latency_seconds",
			Help:    "Duration of an attempt, stream included.",
			Buckets: latencyBuckets,
		}, []string{"stage", "pool"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_llm_tokens_total",
			Help: "Tokens by direction (in, out) as the pool reported them; cached is the part of in the pool's prefix cache served.",
		}, []string{"stage", "pool", "direction"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_llm_fallbacks_total",
			Help: "Attempts sent to the fallback pool by why the primary was passed over (cooldown, breaker_open, gate_full, last_attempt).",
		}, []string{"stage", "reason"}),
	}
	m.cost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chatguard_llm_cost_dollars_total",
		Help: "USD the attempts cost at their pool's configured price (tokens at the token prices, busy time at the GPU-hour price), by stage, pool and traffic class; zero while no price is set.",
	}, []string{"stage", "pool", "class"})
	m.class = newClassMetrics(latencyBuckets)
	names := make([]pipeline.Pool, 0, 2)
	for _, p := range r.pools() {
		names = append(names, p.cfg.Name)
	}
	m.class.init(names)
	m.scrapeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chatguard_llm_scrape_errors_total", Help: "Failed scrapes of a pool's /metrics for its adaptive limit.",
	}, []string{"pool"})
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.requests, m.attempts, m.ttft, m.latency, m.tokens, m.fallbacks, m.cost, m.scrapeErrors}
	cs = append(cs, m.class.collectors()...)
	cs = append(cs, capacityCollectors(r)...)
	cs = append(cs, routerGauges(r)...)
	var errs []error
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("llm: register metrics: %w", err)
	}
	return m, nil
}

// routerGauges are the budget's gauge and each pool's cooldown, breaker
// and gate gauges, read when scraped.
func routerGauges(r *Router) []prometheus.Collector {
	budget := r.cfg.DailyBudget
	cs := []prometheus.Collector{prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chatguard_llm_daily_budget_dollars", Help: "The configured daily budget for model calls in USD (--daily-budget); 0: none set.",
	}, func() float64 { return budget })}
	for _, p := range r.pools() {
		labels := prometheus.Labels{"pool": string(p.cfg.Name)}
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "chatguard_llm_cooldown_active", Help: "1 while the pool is cooling down after a 429/503.", ConstLabels: labels,
			}, func() float64 {
				if p.cooldown.active(r.now()) {
					return 1
				}
				return 0
			}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "chatguard_llm_breaker_state", Help: "The pool's circuit breaker: 0 closed, 1 half-open, 2 open.", ConstLabels: labels,
			}, func() float64 { return float64(p.breaker.current(r.now())) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "chatguard_llm_gate_in_use", Help: "Calls in flight to the pool from this process.", ConstLabels: labels,
			}, func() float64 { return float64(p.gate.used()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "chatguard_llm_gate_capacity", Help: "The pool's concurrency limit in this process.", ConstLabels: labels,
			}, func() float64 { return float64(p.cfg.MaxConcurrency) }),
		)
	}
	return cs
}
