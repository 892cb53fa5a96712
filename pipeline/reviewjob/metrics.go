package reviewjob

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
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
	// freshness and freshnessOldest are the real-time figure, named
	// chatguard_review_* because they measure the review service end to
	// end (publisher, queue and worker), not the worker alone.
	freshness, freshnessOldest *prometheus.HistogramVec
	// covered counts the window messages of committed done verdicts: what
	// the coverage-lag alert sets against the messages the trigger took.
	covered *prometheus.CounterVec
}

// FreshnessBuckets are the freshness histograms' buckets (seconds): fine
// around the real-time SLO's threshold (180 s, an exact bound so the
// SLO's ratio reads one bucket), coarse out to the hourly batch's hours.
func FreshnessBuckets() []float64 {
	return []float64{10, 30, 60, 90, 120, 150, 180, 240, 300, 450, 600, 900, 1800, 3600, 5400, 7200, 10800, 21600}
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
		freshness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chatguard_review_freshness_seconds",
			Help:    "For each committed done verdict, its commit time minus the sent_at of its window's newest message, by the review's source (batch, sweep, realtime, campaign).",
			Buckets: FreshnessBuckets(),
		}, []string{"source"}),
		freshnessOldest: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chatguard_review_freshness_oldest_seconds",
			Help:    "For each committed done verdict, its commit time minus the sent_at of its window's oldest message, by the review's source (batch, sweep, realtime, campaign).",
			Buckets: FreshnessBuckets(),
		}, []string{"source"}),
	}
	m.covered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chatguard_review_messages_covered_total",
		Help: "Window messages (not the context before the window) of committed done verdicts, by the review's source (batch, sweep, realtime, campaign): set against chatguard_trigger_messages_accepted_total, the messages real time owes a review.",
	}, []string{"source"})
	for _, s := range []pipeline.ReviewSource{pipeline.SourceBatch, pipeline.SourceSweep, pipeline.SourceRealtime, pipeline.SourceCampaign} {
		m.covered.WithLabelValues(string(s)) // 0, not absent, before the first
	}
	m.contextFetches = newContextFetches(reg)
	if reg != nil {
		reg.MustRegister(m.eventAge, m.stageLatency, m.stageTTFT, m.tokens, m.admissions, m.freshness, m.freshnessOldest, m.covered)
	}
	return m
}
