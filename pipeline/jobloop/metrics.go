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
	all := append(m.newCounters(), m.newGauges()...)
	all = append(all, m.newHistograms()...)
	all = append(all, m.newVecs()...)
	for _, o := range jobOutcomes {
		m.jobs.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(all...)
	}
	return m
}

// Each kind of metric is a table, so that a metric is one row (a field, a
// name, a help text) and every one created is registered.

// newCounters creates the unlabelled counters.
func (m *Metrics) newCounters() []prometheus.Collector {
	var all []prometheus.Collector
	for _, c := range []struct {
		to         *prometheus.Counter
		name, help string
	}{
		{&m.received, "chatguard_worker_messages_received_total", "Review messages received."},
		{&m.deleted, "chatguard_worker_messages_deleted_total", "Review messages deleted."},
		{&m.extended, "chatguard_worker_visibility_extensions_total", "Visibility extensions made by the heartbeat."},
		{&m.poison, "chatguard_worker_poison_messages_total", "Messages copied to the DLQ as never processable and deleted."},
		{&m.panics, "chatguard_worker_job_panics_total", "Jobs that panicked (each counts as a failed attempt)."},
		{&m.leaseLost, "chatguard_worker_leases_lost_total", "Jobs cancelled because their visibility or review claim could not be kept; their messages were left alone."},
		{&m.holdRetries, "chatguard_worker_hold_retries_total", "Held jobs run again once their dependency could be probed (no receive count spent)."},
	} {
		*c.to = prometheus.NewCounter(prometheus.CounterOpts{Name: c.name, Help: c.help})
		all = append(all, *c.to)
	}
	return all
}

// newGauges creates the unlabelled gauges.
func (m *Metrics) newGauges() []prometheus.Collector {
	var all []prometheus.Collector
	for _, g := range []struct {
		to         *prometheus.Gauge
		name, help string
	}{
		{&m.inflight, "chatguard_worker_inflight_jobs", "Jobs running now."},
		{&m.held, "chatguard_worker_jobs_held", "Jobs held, their messages kept invisible, while a dependency they need is down."},
	} {
		*g.to = prometheus.NewGauge(prometheus.GaugeOpts{Name: g.name, Help: g.help})
		all = append(all, *g.to)
	}
	return all
}

// newHistograms creates the unlabelled histograms.
func (m *Metrics) newHistograms() []prometheus.Collector {
	var all []prometheus.Collector
	for _, h := range []struct {
		to         *prometheus.Histogram
		name, help string
		buckets    []float64
	}{
		{&m.messageAge, "chatguard_worker_message_age_seconds", "Time from SQS send to pickup.",
			[]float64{.1, 1, 5, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 86400}},
		{&m.duration, "chatguard_worker_job_duration_seconds", "Wall time of one job, settle included.", LatencyBuckets()},
	} {
		*h.to = prometheus.NewHistogram(prometheus.HistogramOpts{Name: h.name, Help: h.help, Buckets: h.buckets})
		all = append(all, *h.to)
	}
	return all
}

// newVecs creates the labelled metrics.
func (m *Metrics) newVecs() []prometheus.Collector {
	m.jobs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chatguard_worker_jobs_total",
		Help: "Review jobs by outcome (done, duplicate, busy, expired, failed, failed_final, stopped, retry, released, poison, panic, held, hold_timeout, lease_lost, deleted).",
	}, []string{"outcome"})
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chatguard_worker_sqs_calls_total",
		Help: "Queue operations of the loop by operation (receive, delete, heartbeat, change_visibility, send_dlq) and outcome (ok, partial, error); the queue adapter may share one SQS batch call between several.",
	}, []string{"op", "outcome"})
	m.callTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "chatguard_worker_sqs_call_duration_seconds",
		Help:    "Duration of queue operations by operation (receive, delete, heartbeat), the adapter's batching and retries included; receive includes the long-poll wait.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20},
	}, []string{"op"})
	m.phase = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "chatguard_worker_job_phase_seconds",
		Help:    "Where a job's wall time goes, by phase: admit (claim and duplicate lookup), chat (history fetch), review (the model stages), save (verdict upsert), release (claim release), settle (the message's delete or visibility change).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"phase"})
	return []prometheus.Collector{m.jobs, m.calls, m.callTime, m.phase}
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
