package review

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/stages"
)

// Context across windows: the messages of a review marked Context are the
// room's messages from before its window (the job fetched them with the
// window, pipeline.Reviewer). chatprep.Prepare keeps them apart from the
// window, the prompts show them in their own block before the transcript,
// and here every answer is held to the window: a context id an answer
// cites is dropped (and counted) before the answer is used, so a verdict's
// evidence, its subjects and its injection floor come from the window only.

// contextMetrics count what context a review was shown and what answers
// tried to cite from it.
type contextMetrics struct {
	shown   prometheus.Counter
	cut     prometheus.Counter
	dropped *prometheus.CounterVec
}

func newContextMetrics(reg prometheus.Registerer) (*contextMetrics, error) {
	m := &contextMetrics{
		shown: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_review_context_messages_total",
			Help: "Messages from before a review's window shown to the models as context (already reviewed, never evidence).",
		}),
		cut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_review_context_cut_total",
			Help: "Context messages left out by the token budget (context is cut before any window message).",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_review_context_evidence_dropped_total",
			Help: "Message ids of the context that a stage's answer cited as evidence, dropped: only the window's messages may be cited.",
		}, []string{"stage"}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.shown, m.cut, m.dropped} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("review: register context metrics: %w", err)
	}
	return m, nil
}

func (m *contextMetrics) observe(w chatprep.Window) {
	m.shown.Add(float64(len(w.Context)))
	m.cut.Add(float64(w.ContextCut))
}

// prepare builds the models' view of the review's messages under the
// run's budget: the window, and before it what is left of the context.
func (rn *run) prepare() chatprep.Window {
	return chatprep.Prepare(rn.msgs, rn.prep)
}

// contextBlock is the context block as the models see it ("" without
// context), datamarked as the transcript is.
func (rn *run) contextBlock() string {
	if len(rn.w.Context) == 0 {
		return ""
	}
	if rn.r.cfg.Defence.NoDatamark {
		return stages.FormatContext(rn.w.Context)
	}
	return stages.FormatMarkedContext(rn.w.Context)
}

// chatTokens is the estimated size of the chat the models see: window and
// context.
func (rn *run) chatTokens() int { return rn.w.Tokens + rn.w.ContextTokens }

// withContext puts the context block and its counts on a prompt input.
func (rn *run) withContext(in *stages.PromptInput) {
	in.Context, in.ContextMessages, in.ContextOmitted = rn.contextBlock(), len(rn.w.Context), rn.w.ContextCut
}

// windowEvidence parses an extract answer against every message the
// models saw and drops the evidence that cites the context.
func (rn *run) windowEvidence(b []byte) (stages.ExtractOutput, error) {
	o, err := stages.ParseExtract(b, rn.w.Seen)
	if err != nil {
		return o, err
	}
	kept := make([]stages.Evidence, 0, len(o.Evidence))
	for _, e := range o.Evidence {
		if rn.w.InContext(e.MessageID) {
			rn.r.cm.dropped.WithLabelValues(string(pipeline.StageExtract)).Inc()
			continue
		}
		kept = append(kept, e)
	}
	o.Evidence = kept
	return o, nil
}

// windowJudge parses a judge answer against every message the models saw
// and drops the evidence ids of the context.
func (rn *run) windowJudge(b []byte) (stages.JudgeOutput, error) {
	o, err := stages.ParseJudge(b, rn.w.Seen)
	if err != nil {
		return o, err
	}
	kept := make([]string, 0, len(o.EvidenceIDs))
	for _, id := range o.EvidenceIDs {
		if rn.w.InContext(id) {
			rn.r.cm.dropped.WithLabelValues(string(pipeline.StageJudge)).Inc()
			continue
		}
		kept = append(kept, id)
	}
	o.EvidenceIDs = kept
	return o, nil
}
