package consumer

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
)

type metrics struct {
	events        *prometheus.CounterVec
	flushes       *prometheus.CounterVec
	queueErrors   *prometheus.CounterVec
	extended      prometheus.Counter
	errorsWritten prometheus.Counter
	objectBytes   prometheus.Histogram
	flushSeconds  prometheus.Histogram
	all           []prometheus.Collector
}

func newMetrics(buf *buffer) *metrics {
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_consumer_events_total",
			Help: "Feedback-queue messages by event type (unknown when it could not be read) and outcome: received, invalid, duplicate (redelivered while buffered), written.",
		}, []string{"event_type", "outcome"}),
		flushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_consumer_flushes_total",
			Help: "Object writes by outcome: ok, retry (a failed attempt), abandoned (drain deadline passed), rerouted (could not encode; sent to errors).",
		}, []string{"outcome"}),
		queueErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_consumer_queue_errors_total",
			Help: "Failed queue operations by op: receive (calls), delete, extend and release (messages).",
		}, []string{"op"}),
		extended: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_consumer_visibility_extended_total",
			Help: "Visibility renewals of held messages that the queue accepted (one per message renewed).",
		}),
		errorsWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_consumer_errors_written_total",
			Help: "Invalid messages written under the errors prefix.",
		}),
		objectBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chatguard_consumer_object_bytes",
			Help:    "Size of written lake objects.",
			Buckets: prometheus.ExponentialBuckets(1<<10, 4, 11), // 1 KiB .. 1 GiB
		}),
		flushSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chatguard_consumer_flush_duration_seconds",
			Help:    "Time to encode and write one object, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 10),
		}),
	}
	for _, t := range pipeline.LakeEventTypes {
		for _, o := range []string{"received", "invalid", "duplicate", "written"} {
			m.events.WithLabelValues(string(t), o)
		}
	}
	m.events.WithLabelValues("unknown", "invalid")
	for _, o := range []string{"ok", "retry", "abandoned", "rerouted"} {
		m.flushes.WithLabelValues(o)
	}
	for _, o := range []string{"receive", "delete", "extend", "release"} {
		m.queueErrors.WithLabelValues(o)
	}
	m.all = []prometheus.Collector{
		m.events, m.flushes, m.queueErrors, m.extended, m.errorsWritten, m.objectBytes, m.flushSeconds,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chatguard_consumer_buffered_bytes",
			Help: "Body bytes of messages received and not yet deleted (buffered or being written).",
		}, func() float64 { b, _ := buf.size(); return float64(b) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chatguard_consumer_buffered_events",
			Help: "Messages received and not yet deleted (buffered or being written).",
		}, func() float64 { _, n := buf.size(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chatguard_consumer_oldest_buffered_age_seconds",
			Help: "Age of the oldest message received and not yet deleted.",
		}, func() float64 { return buf.oldestAge().Seconds() }),
	}
	return m
}

func (m *metrics) register(r prometheus.Registerer) error {
	var errs []error
	for _, col := range m.all {
		if err := r.Register(col); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
