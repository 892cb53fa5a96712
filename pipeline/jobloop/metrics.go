package jobloop

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the job loop's Prometheus metrics, named chatguard_worker_*.
// One Metrics is shared by a Loop and its handler, which counts a job's
// phases, panics and lost leases on it (ObservePhase, CountPanic,
// CountLeaseLost).
type Metrics struct {
	jobs        *prometheus.CounterVec
	inflight    prometheus.Gauge
	calls       *prometheus.CounterVec
	receives    *prometheus.CounterVec
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

// LatencyBuckets are the buckets of the job's and its stages' latencies,
// in seconds.
func LatencyBuckets() []float64 { return []float64{.05, .1, .25, .5, 1, 2, 4, 8, 15, 30, 60, 120} }

// NewMetrics creates the metrics and registers them on reg when it is not
// nil. Registering twice on one registry panics: use one Metrics per
// registry.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{}
	m.newQueueMetrics()
	m.newJobMetrics()
	for _, o := range jobOutcomes {
		m.jobs.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(m.jobs, m.inflight, m.calls, m.receives, m.callTime, m.received, m.deleted, m.extended, m.poison, m.panics, m.leaseLost, m.held, m.holdRetries,
			m.messageAge, m.duration, m.phase)
	}
	return m
}

// newQueueMetrics creates the metrics of the loop's queue calls.
func (m *Metrics) newQueueMetrics() {
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chatguard_worker_sqs_calls_total",
		Help: "Queue operations of the loop by operation (receive, delete, heartbeat, change_visibility, send_dlq) and outcome (ok, partial, error); the queue adapter may share one SQS batch call between several.",
	}, []string{"op", "outcome"})
	m.callTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "chatguard_worker_sqs_call_duration_seconds",
		Help:    "Duration of queue operations by operation (receive, delete, heartbeat), the adapter's batching and retries included; receive includes the long-poll wait.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20},
	}, []string{"op"})
	m.receives = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chatguard_worker_receives_total",
		Help: "Receive calls by queue (review, review-realtime) and outcome (messages, empty, error). A queue's errors back off its own pollers only; empty receives per second are what an idle worker bills.",
	}, []string{"queue", "outcome"})
	m.received = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chatguard_worker_messages_received_total", Help: "Review messages received.",
	})
	m.deleted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chatguard_worker_messages_deleted_total", Help: "Review messages deleted.",
	})
	m.extended = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chatguard_worker_visibility_extensions_total", Help: "Visibility extensions made by the heartbeat.",
	})
	m.poison = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chatguard_worker_poison_messages_total", Help: "Messages copied to the DLQ as never processable and deleted.",
	})
	m.messageAge = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "chatguard_worker_message_age_seconds",
		Help:    "Time from SQS send to pickup.",
		Buckets: []float64{.1, 1, 5, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 86400},
	})
}

// newJobMetrics creates the metrics of the jobs themselves.
func (m *Metrics) newJobMetrics() {
	m.jobs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chatguard_worker_jobs_total",
		Help: "Review jobs by outcome (done, duplicate, busy, expired, failed, failed_final, stopped, retry, released, poison, panic, held, hold_timeout, lease_lost, deleted).",
	}, []string{"outcome"})
	m.inflight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "chatguard_worker_inflight_jobs", Help: "Jobs running now.",
	})
	m.panics = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chatguard_worker_job_panics_total", Help: "Jobs that panicked (each counts as a failed attempt).",
	})
	m.leaseLost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chatguard_worker_leases_lost_total", Help: "Jobs cancelled because their visibility or review claim could not be kept; their messages were left alone.",
	})
	m.held = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "chatguard_worker_jobs_held", Help: "Jobs held, their messages kept invisible, while a dependency they need is down.",
	})
	m.holdRetries = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chatguard_worker_hold_retries_total", Help: "Held jobs run again once their dependency could be probed (no receive count spent).",
	})
	m.duration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "chatguard_worker_job_duration_seconds", Help: "Wall time of one job, settle included.", Buckets: LatencyBuckets(),
	})
	m.phase = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "chatguard_worker_job_phase_seconds",
		Help:    "Where a job's wall time goes, by phase: admit (claim and duplicate lookup), chat (history fetch), review (the model stages), save (verdict upsert), release (claim release), settle (the message's delete or visibility change).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"phase"})
}

// ObservePhase records d as time a job spent in phase (admit, chat,
// review, save, release; the loop adds settle).
func (m *Metrics) ObservePhase(phase string, d time.Duration) {
	m.phase.WithLabelValues(phase).Observe(d.Seconds())
}

// CountPanic counts a job whose code panicked (a failed attempt).
func (m *Metrics) CountPanic() { m.panics.Inc() }

// CountLeaseLost counts a job cancelled because a lease it needs (its
// visibility, its review claim) could not be kept.
func (m *Metrics) CountLeaseLost() { m.leaseLost.Inc() }

// initQueue creates a queue's receive series at zero, so that a rate of
// its errors is 0, not absent, before the first one.
func (m *Metrics) initQueue(name string) {
	for _, o := range []string{"messages", "empty", "error"} {
		m.receives.WithLabelValues(name, o)
	}
}
