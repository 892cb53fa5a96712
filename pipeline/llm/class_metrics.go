package llm

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
)

// Why a class's call was refused, as chatguard_llm_class_refused_total
// labels it.
const (
	// refusedFull: every pool was full, cooling down or open, and the
	// class does not wait (interactive).
	refusedFull = "full"
	// refusedDeadline: no pool could take the call before the caller's
	// deadline.
	refusedDeadline = "deadline"
)

// classMetrics are the router's series by traffic class. The class label
// takes the four values of pipeline.Classes; pool and reason are the
// router's own fixed sets.
type classMetrics struct {
	inFlight *prometheus.GaugeVec
	waiting  *prometheus.GaugeVec
	refused  *prometheus.CounterVec
	ttft     *prometheus.HistogramVec
}

func newClassMetrics(buckets []float64) classMetrics {
	return classMetrics{
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "chatguard_llm_class_in_flight",
			Help: "Calls in flight from this process by traffic class (interactive, realtime, batch, shadow) and pool.",
		}, []string{"class", "pool"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "chatguard_llm_class_waiting",
			Help: "Calls of this process looking for a pool slot or fleet lease, by traffic class.",
		}, []string{"class"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_llm_class_refused_total",
			Help: "Calls refused without a model call by traffic class and reason (full: no pool could take an interactive call at once; deadline: none before the caller's deadline).",
		}, []string{"class", "reason"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chatguard_llm_class_ttft_seconds",
			Help:    "Time to the first streamed token of an attempt by traffic class and pool.",
			Buckets: buckets,
		}, []string{"class", "pool"}),
	}
}

func (m classMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.inFlight, m.waiting, m.refused, m.ttft}
}

// init makes every class's series exist from the start, so a dashboard
// shows zero rather than nothing for a class that has not called yet.
func (m classMetrics) init(pools []pipeline.Pool) {
	for _, c := range pipeline.Classes {
		m.waiting.WithLabelValues(c.String())
		m.refused.WithLabelValues(c.String(), refusedFull)
		m.refused.WithLabelValues(c.String(), refusedDeadline)
		for _, p := range pools {
			m.inFlight.WithLabelValues(c.String(), string(p))
		}
	}
}
