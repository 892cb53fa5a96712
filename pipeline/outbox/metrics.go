package outbox

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the relay's Prometheus series, labelled by destination (a
// small fixed set: the queue roles).
type Metrics struct {
	pending, oldest *prometheus.GaugeVec
	sent            *prometheus.CounterVec
	failed          *prometheus.CounterVec
	storeErrors     *prometheus.CounterVec
	purged          prometheus.Counter
}

// NewMetrics registers the relay's metrics with reg (nil: unregistered).
// The backlog gauges are the outbox's over every pod (each relay reads
// the same table), so a dashboard takes their max, not their sum.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "chatguard_outbox_pending", Help: "Outbox messages not yet accepted by their queue, over every pod (refreshed every 15 s).",
		}, []string{"destination"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "chatguard_outbox_oldest_age_seconds", Help: "Age of the oldest pending outbox message, 0 when none (refreshed every 15 s).",
		}, []string{"destination"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_outbox_sent_total", Help: "Outbox messages this relay sent and its queue accepted.",
		}, []string{"destination"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_outbox_failed_total", Help: "Outbox message sends that failed, by reason (retryable, permanent); the message stays pending.",
		}, []string{"destination", "reason"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_outbox_store_errors_total", Help: "Outbox store calls that failed, by operation (claim, mark_sent, follow_up, mark_failed, backlog, purge).",
		}, []string{"op"}),
		purged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_outbox_purged_total", Help: "Sent outbox messages deleted after the retention.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.pending, m.oldest, m.sent, m.failed, m.storeErrors, m.purged)
	}
	return m
}
