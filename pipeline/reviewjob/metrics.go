package reviewjob

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// Metrics are the review job's Prometheus metrics, named
// chatguard_worker_* like the loop's; a job's phases, panics and lost
// claims are counted on the loop's metrics it shares.
type Metrics struct {
	loop         *jobloop.Metrics
	eventAge     prometheus.Histogram
	stageLatency *prometheus.HistogramVec
	stageTTFT    *prometheus.HistogramVec
	tokens       *prometheus.CounterVec
	admissions   *prometheus.CounterVec
	// contextFetches counts the fetches of a window's context (context.go).
	contextFetches *prometheus.CounterVec
}

// NewMetrics creates the metrics beside the loop's (nil: a private set,
// not exported) and registers them on reg when it is not nil. Registering
// twice on one registry panics: use one Metrics per registry.
func NewMetrics(reg prometheus.Registerer, loop *jobloop.Metrics) *Metrics {
	if loop == nil {
		loop = jobloop.NewMetrics(nil)
	}
	m := &Metrics{
		loop: loop,
		eventAge: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chatguard_worker_event_age_seconds",
			Help:    "Age of a review event at pickup, from its published_at.",
			Buckets: []float64{1, 5, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 86400},
		}),
		stageLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "chatguard_worker_stage_latency_seconds", Help: "Latency of the stages of saved verdicts by stage and answering pool.", Buckets: jobloop.LatencyBuckets(),
		}, []string{"stage", "pool"}),
		stageTTFT: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "chatguard_worker_stage_ttft_seconds", Help: "Time to first token of the stages of saved verdicts.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2, 4, 8},
		}, []string{"stage", "pool"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_worker_tokens_total", Help: "Tokens of the stages of saved verdicts by stage and direction (in, out).",
		}, []string{"stage", "direction"}),
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_worker_admission_total", Help: "Admission decisions before any model call (admitted, duplicate, busy, expired, invalid).",
		}, []string{"decision"}),
	}
	m.contextFetches = newContextFetches(reg)
	if reg != nil {
		reg.MustRegister(m.eventAge, m.stageLatency, m.stageTTFT, m.tokens, m.admissions)
	}
	return m
}
