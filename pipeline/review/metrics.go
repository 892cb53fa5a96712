package review

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline/chatprep"
)

type metrics struct {
	reviews       *prometheus.CounterVec
	injections    prometheus.Counter
	eventsDropped prometheus.Counter
	signals       *prometheus.CounterVec
	cutMessages   prometheus.Counter
	noise         prometheus.Counter
	tokenCounts   *prometheus.CounterVec
	shrinks       prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_review_reviews_total",
			Help: "Reviews by outcome (done, early_exit, failed, canceled).",
		}, []string{"outcome"}),
		injections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_review_injections_flagged_total",
			Help: "Reviews where the chat tried to instruct the models (an injection rule signal, or an answer that repeated the canary).",
		}),
		eventsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_review_inference_events_dropped_total",
			Help: "Inference-log events the sink refused because its buffer was full.",
		}),
		signals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_review_rule_signals_total",
			Help: "Rule signals found by preprocessing, by kind.",
		}, []string{"kind"}),
		cutMessages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_review_messages_cut_total",
			Help: "Messages left out of transcripts by the token budget.",
		}),
		noise: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_review_noise_dropped_total",
			Help: "System notices, empty and duplicate messages dropped by preprocessing.",
		}),
		tokenCounts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_review_token_counts_total",
			Help: "Transcript sizes taken from the serving model's tokenizer or, when it could not be asked, the estimate.",
		}, []string{"source"}),
		shrinks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_review_prompt_shrinks_total",
			Help: "Prompts shrunk and retried after a pool refused them for the context length.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.reviews, m.injections, m.eventsDropped, m.signals, m.cutMessages, m.noise, m.tokenCounts, m.shrinks} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("review: register metrics: %w", err)
	}
	return m, nil
}

func (m *metrics) observePrep(w chatprep.Window) {
	for _, s := range w.Signals {
		m.signals.WithLabelValues(string(s.Kind)).Inc()
	}
	m.cutMessages.Add(float64(w.Cut.Messages))
	m.noise.Add(float64(w.NoiseDropped))
}
