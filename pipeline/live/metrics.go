package live

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	streams    prometheus.Gauge
	events     *prometheus.CounterVec
	dropped    prometheus.Counter
	logDropped prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "chatguard_console_live_streams",
			Help: "On-demand review streams open in this process."}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_console_live_events_total",
			Help: "Events emitted by on-demand reviews, by type."}, []string{"type"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_console_live_clients_dropped_total",
			Help: "SSE clients dropped because their buffer was full."}),
		logDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_console_live_log_dropped_total",
			Help: "Events not kept for resume (log buffer full or the log failed)."}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.streams, m.events, m.dropped, m.logDropped} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
