package console

import "github.com/prometheus/client_golang/prometheus"

// The answers of the on-demand review admission gate (POST /v1/reviews),
// as the result label of chatguard_console_reviews_total.
const (
	admissionAdmitted = "admitted"
	admissionBusy     = "busy"     // every slot taken: 429
	admissionDraining = "draining" // the pod is shutting down: 503
)

// admissionMetrics counts the gate's answers: the refusals are what the
// ChatguardConsoleAdmissionRefusalsHigh alert watches.
type admissionMetrics struct {
	results *prometheus.CounterVec
}

// newAdmissionMetrics registers the counter on reg (nil: unregistered).
func newAdmissionMetrics(reg prometheus.Registerer) *admissionMetrics {
	m := &admissionMetrics{results: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_console_reviews_total",
		Help: "On-demand review requests by admission result (admitted; busy: refused 429, every slot taken; draining: refused 503)."},
		[]string{"result"})}
	for _, r := range []string{admissionAdmitted, admissionBusy, admissionDraining} {
		m.results.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.results)
	}
	return m
}

// count counts one answer; a nil m counts nothing.
func (m *admissionMetrics) count(result string) {
	if m == nil {
		return
	}
	m.results.WithLabelValues(result).Inc()
}
