package reviewjob

import (
	"time"

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

// publish hands the verdict event to the sink; a full sink drops it and
// counts the drop itself.
func (h *Handler) publish(v pipeline.Verdict) {
	if h.events == nil {
		return
	}
	fallback := false
	for _, st := range v.Stages {
		fallback = fallback || st.Pool == pipeline.PoolFallback
	}
	// The event is dated by the verdict, at the precision MySQL keeps
	// (DATETIME(6)), so that a copy sent again from the stored verdict
	// (see the duplicate admission) is the same event in the same
	// partition.
	started, finished := v.StartedAt.Truncate(time.Microsecond), v.FinishedAt.Truncate(time.Microsecond)
	var latency float64
	if !started.IsZero() && !finished.IsZero() {
		latency = float64(finished.Sub(started)) / float64(time.Millisecond)
	}
	occurred := finished
	if occurred.IsZero() {
		occurred = h.clk.Now()
	}
	// Revision 1 is sent as no revision: consumers older than the field
	// refuse an event with it, and the lake reads its absence as 1.
	revision := v.Revision
	if revision <= 1 {
		revision = 0
	}
	h.events.Publish(pipeline.LakeEvent{
		EventID: pipeline.VerdictRevisionEventID(v.Key, v.Status, v.Revision), EventType: pipeline.EventVerdict, OccurredAt: occurred.UTC(), SchemaVersion: pipeline.LakeEventSchemaVersion,
		Payload: pipeline.VerdictEvent{
			RoomID: v.Key.RoomID, WindowStart: v.Key.WindowStart, WindowEnd: v.Key.WindowEnd, PipelineVersion: v.Key.PipelineVersion,
			RunID: v.RunID, Status: v.Status, Label: v.Label, Category: v.Category, Severity: v.Severity, Confidence: v.Confidence,
			Action: v.Action, EarlyExit: v.EarlyExit, FallbackUsed: fallback, Attempts: v.Attempts, LatencyMs: latency,
			Subjects: h.subjectPseudonyms(v.Subjects), Campaigns: pipeline.LakeCampaigns(v.Campaigns),
			AccountHistory: pipeline.RecordedHistory(v.Stages), Revision: revision,
		},
	})
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
