package pipeline

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// ShadowVerdict is the payload of one shadow review: a candidate endpoint's
// answer on the window of a live review, written beside the live verdict so
// that the two can be compared over real traffic. It carries no chat text.
// It is keyed by the live review key, so it joins the verdict table.
type ShadowVerdict struct {
	RoomID      string    `json:"room_id"`
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	// PipelineVersion is the live side's, the one in the review key.
	PipelineVersion string `json:"pipeline_version"`
	RunID           string `json:"run_id"`
	// Candidate names the candidate endpoint as its operator configured
	// it; CandidateModel is the model it was asked for, and
	// CandidatePipelineVersion the version the candidate's reviewer
	// stamps on its verdicts (prompts and schemas included).
	Candidate                string `json:"candidate"`
	CandidateModel           string `json:"candidate_model,omitempty"`
	CandidatePipelineVersion string `json:"candidate_pipeline_version"`
	// Outcome is ok (the candidate gave a verdict), error (it failed) or
	// canceled (a drain cut it short).
	Outcome   string `json:"outcome"`
	ErrorKind string `json:"error_kind,omitempty"`
	// LiveLabel and LiveCategory are the committed live verdict's, so a
	// comparison needs no join.
	LiveLabel    Label    `json:"live_label,omitempty"`
	LiveCategory Category `json:"live_category,omitempty"`
	// The candidate's verdict; empty unless Outcome is ok.
	Label      Label    `json:"label,omitempty"`
	Category   Category `json:"category,omitempty"`
	Severity   int      `json:"severity"`
	Confidence float64  `json:"confidence"`
	Action     Action   `json:"action,omitempty"`
	EarlyExit  bool     `json:"early_exit"`
	// TextDiffers says that the candidate saw other text than the live
	// path (a third-party candidate gets pseudonymised text where the live
	// primary got the original), which a disagreement may come from.
	TextDiffers bool    `json:"text_differs"`
	LatencyMs   float64 `json:"latency_ms"`
	CostUSD     float64 `json:"cost_usd,omitempty"`
	// Stages lists the stages the candidate ran, each at most once.
	Stages []ShadowStage `json:"stages,omitempty"`
}

// ShadowStage is what one stage of a shadow review cost.
type ShadowStage struct {
	Stage     StageName `json:"stage"`
	TokensIn  int       `json:"tokens_in"`
	TokensOut int       `json:"tokens_out"`
	LatencyMs float64   `json:"latency_ms"`
}

// The outcomes of a shadow review.
const (
	ShadowOK       = "ok"
	ShadowError    = "error"
	ShadowCanceled = "canceled"
)

// Bounds of the shadow payload's free strings, in runes: they are operator
// configuration or error classes, never text, so anything longer is a bug.
const (
	maxShadowName      = 200
	maxShadowErrorKind = 64
)

// ShadowVerdictEventID is the event id of the shadow review of a live
// review by a candidate: one per (review key, candidate), so that a shadow
// review sent twice is one row in shadow_verdict_dedup, while two
// candidates on one review stay two.
func ShadowVerdictEventID(k ReviewKey, candidate string) string {
	return derivedID(string(EventShadowVerdict), k, candidate)
}

// decodeShadowVerdict decodes a shadow_verdict payload and lists its
// problems; err is set when it does not decode at all.
func decodeShadowVerdict(raw json.RawMessage) (ShadowVerdict, []string, error) {
	var p ShadowVerdict
	if err := strictUnmarshal(raw, &p); err != nil {
		return p, nil, fmt.Errorf("payload is not a shadow_verdict: %s", err)
	}
	probs := identity(p.RoomID, p.WindowStart, p.WindowEnd, p.PipelineVersion)
	probs = append(probs, checkName("payload.candidate", p.Candidate, maxShadowName, true)...)
	probs = append(probs, checkName("payload.candidate_model", p.CandidateModel, maxShadowName, false)...)
	probs = append(probs, checkName("payload.candidate_pipeline_version", p.CandidatePipelineVersion, maxShadowName, true)...)
	probs = append(probs, checkName("payload.error_kind", p.ErrorKind, maxShadowErrorKind, false)...)
	switch p.Outcome {
	case ShadowOK, ShadowError, ShadowCanceled:
	default:
		probs = append(probs, fmt.Sprintf("payload.outcome %q is unknown", clip(p.Outcome)))
	}
	probs = append(probs, checkVerdictFields(p.Label, p.Outcome == ShadowOK, p.Category, p.Action, p.Severity, p.Confidence)...)
	probs = append(probs, checkLabel("payload.live_label", p.LiveLabel, false)...)
	probs = append(probs, checkCategory("payload.live_category", p.LiveCategory)...)
	if p.LatencyMs < 0 || p.CostUSD < 0 {
		probs = append(probs, "payload has a negative latency or cost")
	}
	probs = append(probs, checkShadowStages(p.Stages)...)
	p.WindowStart, p.WindowEnd = p.WindowStart.UTC(), p.WindowEnd.UTC()
	return p, probs, nil
}

// checkShadowStages checks that each stage is known, listed once and has
// no negative count: the lake keeps one column set per stage.
func checkShadowStages(stages []ShadowStage) []string {
	var probs []string
	seen := map[StageName]bool{}
	for _, s := range stages {
		switch {
		case !slices.Contains(Stages, s.Stage):
			probs = append(probs, fmt.Sprintf("payload.stages: stage %q is unknown", clip(string(s.Stage))))
		case seen[s.Stage]:
			probs = append(probs, fmt.Sprintf("payload.stages: stage %s is listed twice", s.Stage))
		}
		seen[s.Stage] = true
		if s.TokensIn < 0 || s.TokensOut < 0 || s.LatencyMs < 0 {
			probs = append(probs, fmt.Sprintf("payload.stages: stage %s has a negative count or latency", clip(string(s.Stage))))
		}
	}
	return probs
}

// checkName checks a bounded free string of a payload.
func checkName(field, v string, max int, required bool) []string {
	switch {
	case v == "" && required:
		return []string{field + " is missing"}
	case utf8.RuneCountInString(v) > max:
		return []string{fmt.Sprintf("%s is longer than %d characters", field, max)}
	}
	return nil
}
