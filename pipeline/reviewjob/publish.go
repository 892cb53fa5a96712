package reviewjob

import "github.com/chatguard/chatguard/pipeline"

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

// publish hands the verdict event to the sink; a full sink drops it and
// counts the drop itself.
func (h *Handler) publish(v pipeline.Verdict) {
	if h.events == nil {
		return
	}
	h.events.Publish(pipeline.VerdictLakeEvent(v, h.subjectPseudonyms(v.Subjects), h.clk.Now()))
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
