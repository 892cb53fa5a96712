package trigger

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
)

type metrics struct {
	events          *prometheus.CounterVec
	queueAge        prometheus.Histogram
	pending         prometheus.Gauge
	fires           *prometheus.CounterVec
	republished     prometheus.Counter
	doubleCovered   prometheus.Counter
	publishFailures prometheus.Counter
	publishes       prometheus.Counter
	ownWindows      prometheus.Counter
	skewClamped     prometheus.Counter
	redis           *prometheus.HistogramVec
	redisErrors     *prometheus.CounterVec
	receiveErrors   prometheus.Counter
	settleErrors    *prometheus.CounterVec
	stateLost       *prometheus.CounterVec
}

// newMetrics registers the trigger's metrics on reg (nil: none).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_trigger_chat_events_total",
			Help: "Chat events by outcome: new, duplicate, pending (inside a window being published), late (sent before what its room's windows covered; a window of its own), stale (too old for its room's window; a window of its own), invalid (dead-lettered), notice (a protective action's notice, which never opens a window)."}, []string{"outcome"}),
		queueAge: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chatguard_trigger_chat_event_age_seconds",
			Help: "Time chat events spent in the chat-events queue before they were received.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 14)}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "chatguard_trigger_rooms_pending",
			Help: "Rooms with unreviewed messages or a window being published."}),
		fires: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_trigger_fires_total",
			Help: "Windows published and acknowledged, by reason (quiet, max_delay)."}, []string{"reason"}),
		republished: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_trigger_republished_total",
			Help: "Windows published again unchanged after a claim lapsed (a crash or a failed publish)."}),
		doubleCovered: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_trigger_messages_double_covered_total",
			Help: "Messages an earlier window covered that a published window covers again, because a late message pulled it back over them; counted from the messages the room state remembers, once per window."}),
		publishFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_trigger_publish_failures_total",
			Help: "Review events the review-realtime queue did not accept; they are published again."}),
		publishes: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_trigger_publishes_total",
			Help: "Review events sent to the review-realtime queue, accepted or not: the denominator of the publish failure ratio."}),
		ownWindows: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_trigger_own_windows_total",
			Help: "Windows of their own published for a late or a stale chat event (one instant wide, read with the context before it), so that no earlier window is reviewed again."}),
		skewClamped: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_trigger_clock_skew_clamped_total",
			Help: "Chat events whose sent_at lay more than --max-clock-skew after their arrival in the chat-events queue; taken as sent at their arrival."}),
		redis: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "chatguard_trigger_redis_seconds",
			Help: "Latency of room-state calls by operation.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}, []string{"op"}),
		redisErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_trigger_redis_errors_total",
			Help: "Failed room-state calls by operation."}, []string{"op"}),
		receiveErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_trigger_receive_errors_total",
			Help: "Failed receives from the chat-events queue."}),
		settleErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_trigger_settle_errors_total",
			Help: "Failed deletes, visibility changes and DLQ copies of chat events."}, []string{"op"}),
		stateLost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_trigger_state_lost_total",
			Help: "Rooms whose state a claim or an ack (op) found gone: evicted, or lost in a Redis failover; only the sweep covers their messages."}, []string{"op"}),
	}
	// Every label value exists from the start, so a rate over a counter
	// that has not moved yet is 0, not absent.
	for _, o := range []pipeline.RecordOutcome{pipeline.RecordNew, pipeline.RecordDuplicate, pipeline.RecordPending, pipeline.RecordLate, outcomeStale, "invalid", outcomeNotice} {
		m.events.WithLabelValues(string(o))
	}
	for _, r := range []pipeline.FireReason{pipeline.FireQuiet, pipeline.FireMaxDelay} {
		m.fires.WithLabelValues(string(r))
	}
	for _, op := range []string{"claim", "ack"} {
		m.stateLost.WithLabelValues(op)
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.events, m.queueAge, m.pending, m.fires, m.republished, m.doubleCovered, m.publishFailures, m.publishes, m.ownWindows, m.skewClamped, m.redis,
		m.redisErrors, m.receiveErrors, m.settleErrors, m.stateLost} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}

// observeRedis records a room-state call; a room found gone is counted as
// lost state, not as a failed call (Redis answered).
func (m *metrics) observeRedis(op string, start, end time.Time, err error) {
	m.redis.WithLabelValues(op).Observe(end.Sub(start).Seconds())
	switch {
	case errors.Is(err, pipeline.ErrRoomStateLost):
		m.stateLost.WithLabelValues(op).Inc()
	case err != nil:
		m.redisErrors.WithLabelValues(op).Inc()
	}
}
