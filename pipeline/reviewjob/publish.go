package reviewjob

import (
	"context"
	"slices"

	"github.com/chatguard/chatguard/pipeline"
)

// observeStages records the latency, time to first token and tokens of a
// saved verdict's stages.
func (h *Handler) observeStages(v pipeline.Verdict) {
	for _, st := range v.Stages {
		pool := string(st.Pool)
		if pool == "" {
			pool = "none"
		}
		h.m.stageLatency.WithLabelValues(string(st.Stage), pool).Observe(st.Latency.Seconds())
		if st.TTFT > 0 {
			h.m.stageTTFT.WithLabelValues(string(st.Stage), pool).Observe(st.TTFT.Seconds())
		}
		h.m.tokens.WithLabelValues(string(st.Stage), "in").Add(float64(st.TokensIn))
		h.m.tokens.WithLabelValues(string(st.Stage), "out").Add(float64(st.TokensOut))
	}
}

// withVerdictEvent returns v carrying its verdict event as an outbox
// message (v.Outbox), in place of one an earlier attempt at the same save
// added: the store writes it in the verdict's own transaction when the
// save commits v, and the outbox's relay sends it, so that no kill between
// the commit and a send can lose it. An event that cannot be encoded is
// logged and left out; the verdict is saved all the same. The message
// keeps the job's trace context (pipeline.WithTraceContext), so that the
// relay's send, whenever it happens, carries the review's trace on to the
// consumer.
func (h *Handler) withVerdictEvent(ctx context.Context, v pipeline.Verdict) pipeline.Verdict {
	m, err := pipeline.LakeOutboxMessage(h.verdictEvent(v))
	if err != nil {
		h.log.Error("review: verdict event left out", "room_id", v.Key.RoomID, "err", err.Error())
		return v
	}
	m.Attributes = pipeline.WithTraceContext(ctx, m.Attributes)
	v.Outbox = append(slices.DeleteFunc(slices.Clone(v.Outbox), func(o pipeline.OutboxMessage) bool {
		return o.Destination == m.Destination && o.EventID == m.EventID
	}), m)
	return v
}

// publish hands a stored verdict's event to the sink, best effort; a full
// sink drops it and counts the drop itself.
func (h *Handler) publish(v pipeline.Verdict) {
	if h.events != nil {
		h.events.Publish(h.verdictEvent(v))
	}
}

// verdictEvent is v's lake event, built as every producer of verdict
// events builds it.
func (h *Handler) verdictEvent(v pipeline.Verdict) pipeline.LakeEvent {
	return pipeline.VerdictLakeEvent(v, h.subjectPseudonyms(v.Subjects), h.clk.Now())
}

// subjectPseudonyms are the verdict's subjects as the lake keeps them:
// keyed pseudonyms from the reviewer, or none when it has no key. Raw ids
// never go into an event.
func (h *Handler) subjectPseudonyms(ids []string) []string {
	if p, ok := h.reviewer.(pipeline.SubjectPseudonymizer); ok && len(ids) > 0 {
		return p.SubjectPseudonyms(ids)
	}
	return nil
}
