package jobloop

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the job loop's and the review handler's Prometheus metrics,
// named chatguard_worker_*. One Metrics is shared by a Loop and its
// ReviewHandler.
type Metrics struct {
	jobs        *prometheus.CounterVec
	inflight    prometheus.Gauge
	calls       *prometheus.CounterVec
	callTime    *prometheus.HistogramVec
	received    prometheus.Counter
	deleted     prometheus.Counter
	extended    prometheus.Counter
	poison      prometheus.Counter
	panics      prometheus.Counter
	leaseLost   prometheus.Counter
	held        prometheus.Gauge
	holdRetries prometheus.Counter
	messageAge  prometheus.Histogram
	duration    prometheus.Histogram
	phase       *prometheus.HistogramVec

	eventAge     prometheus.Histogram
	stageLatency *prometheus.HistogramVec
	stageTTFT    *prometheus.HistogramVec
	tokens       *prometheus.CounterVec
	admissions   *prometheus.CounterVec
}

// jobOutcomes are every outcome label a job can end with: the handler's
// (done, duplicate, ...), the loop's own (released, lease_lost, panic,
// hold_timeout) and the defaults by action (deleted, retry, poison,
// released, held). NewMetrics creates each series at zero, so that an
// alert on a rate of one of them (no verdicts in an hour) sees a series
// that is still 0 on a fleet that never produced one, rather than none.
var jobOutcomes = []string{
	"done", "duplicate", "busy", "expired", "failed", "failed_final", "stopped", "retry",
	"released", "poison", "panic", "held", "hold_timeout", "lease_lost", "deleted",
}

// NewMetrics creates the metrics and registers them on reg when it is not
// nil. Registering twice on one registry panics: use one Metrics per
// registry.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	latency := []float64{.05, .1, .25, .5, 1, 2, 4, 8, 15, 30, 60, 120}
	m := &Metrics{
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_worker_jobs_total",
			Help: "Review jobs by outcome (done, duplicate, busy, expired, failed, failed_final, stopped, retry, released, poison, panic, held, hold_timeout, lease_lost, deleted).",
		}, []string{"outcome"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chatguard_worker_inflight_jobs", Help: "Jobs running now.",
		}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_worker_sqs_calls_total",
			Help: "Queue operations of the loop by operation (receive, delete, heartbeat, change_visibility, send_dlq) and outcome (ok, partial, error); the queue adapter may share one SQS batch call between several.",
		}, []string{"op", "outcome"}),
		callTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chatguard_worker_sqs_call_duration_seconds",
			Help:    "Duration of queue operations by operation (receive, delete, heartbeat), the adapter's batching and retries included; receive includes the long-poll wait.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20},
		}, []string{"op"}),
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_worker_messages_received_total", Help: "Review messages received.",
		}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_worker_messages_deleted_total", Help: "Review messages deleted.",
		}),
		extended: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_worker_visibility_extensions_total", Help: "Visibility extensions made by the heartbeat.",
		}),
		poison: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_worker_poison_messages_total", Help: "Messages copied to the DLQ as never processable and deleted.",
		}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_worker_job_panics_total", Help: "Jobs that panicked (each counts as a failed attempt).",
		}),
		leaseLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_worker_leases_lost_total", Help: "Jobs cancelled because their visibility or review claim could not be kept; their messages were left alone.",
		}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chatguard_worker_jobs_held", Help: "Jobs held, their messages kept invisible, while a dependency they need is down.",
		}),
		holdRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_worker_hold_retries_total", Help: "Held jobs run again once their dependency could be probed (no receive count spent).",
		}),
		messageAge: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chatguard_worker_message_age_seconds",
			Help:    "Time from SQS send to pickup.",
			Buckets: []float64{.1, 1, 5, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 86400},
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "chatguard_worker_job_duration_seconds", Help: "Wall time of one job, settle included.", Buckets: latency,
		}),
		phase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chatguard_worker_job_phase_seconds",
			Help:    "Where a job's wall time goes, by phase: admit (claim and duplicate lookup), chat (history fetch), review (the model stages), save (verdict upsert), release (claim release), settle (the message's delete or visibility change).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"phase"}),
		eventAge: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chatguard_worker_event_age_seconds",
			Help:    "Age of a review event at pickup, from its published_at.",
			Buckets: []float64{1, 5, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 86400},
		}),
		stageLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "chatguard_worker_stage_latency_seconds", Help: "Latency of the stages of saved verdicts by stage and answering pool.", Buckets: latency,
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
	for _, o := range jobOutcomes {
		m.jobs.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(m.jobs, m.inflight, m.calls, m.callTime, m.received, m.deleted, m.extended, m.poison, m.panics, m.leaseLost, m.held, m.holdRetries,
			m.messageAge, m.duration, m.phase, m.eventAge, m.stageLatency, m.stageTTFT, m.tokens, m.admissions)
	}
	return m
}
