package llmsim

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the vLLM metrics that the worker's adaptive concurrency and
// dashboards read, under vLLM's own names (colons included), plus the
// simulator's request counter. They live in a private registry so that two
// simulators in one test process do not collide.
type metrics struct {
	reg          *prometheus.Registry
	ttft         prometheus.Histogram
	e2e          prometheus.Histogram
	queue        prometheus.Histogram
	promptTokens prometheus.Counter
	genTokens    prometheus.Counter
	// prefixQueries and prefixHits are vLLM's prefix-cache counters, in
	// tokens.
	prefixQueries prometheus.Counter
	prefixHits    prometheus.Counter
	success       *prometheus.CounterVec
	requests      *prometheus.CounterVec
}

func newMetrics(model string, sched *scheduler) *metrics {
	labels := prometheus.Labels{"model_name": model}
	m := &metrics{
		reg: prometheus.NewRegistry(),
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "vllm:time_to_first_token_seconds", Help: "Histogram of time to first token in seconds.", ConstLabels: labels,
			Buckets: []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10},
		}),
		e2e: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "vllm:e2e_request_latency_seconds", Help: "Histogram of end to end request latency in seconds.", ConstLabels: labels,
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60},
		}),
		queue: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "vllm:request_queue_time_seconds", Help: "Histogram of time spent in the waiting queue in seconds.", ConstLabels: labels,
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}),
		promptTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vllm:prompt_tokens_total", Help: "Number of prefill tokens processed.", ConstLabels: labels,
		}),
		genTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vllm:generation_tokens_total", Help: "Number of generation tokens processed.", ConstLabels: labels,
		}),
		prefixQueries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vllm:prefix_cache_queries_total", Help: "Prefix cache queries, in terms of number of queried tokens.", ConstLabels: labels,
		}),
		prefixHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vllm:prefix_cache_hits_total", Help: "Prefix cache hits, in terms of number of cached tokens.", ConstLabels: labels,
		}),
		success: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm:request_success_total", Help: "Count of successfully processed requests.", ConstLabels: labels,
		}, []string{"finished_reason"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_llmsim_requests_total", Help: "Chat-completion requests by outcome (ok, length, fault_429, ..., canceled).",
		}, []string{"outcome"}),
	}
	m.reg.MustRegister(m.ttft, m.e2e, m.queue, m.promptTokens, m.genTokens, m.prefixQueries, m.prefixHits, m.success, m.requests,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "vllm:num_requests_running", Help: "Number of requests in model execution batches.", ConstLabels: labels,
		}, func() float64 { return float64(sched.nRunning.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "vllm:num_requests_waiting", Help: "Number of requests waiting to be processed.", ConstLabels: labels,
		}, func() float64 { return float64(sched.nWaiting.Load()) }),
	)
	return m
}
