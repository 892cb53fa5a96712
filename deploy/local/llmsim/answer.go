package llmsim

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/stages"
)

// stageAnswer renders the answer to one stage request as the JSON the
// stage's schema asks for. The prompt is every text of the request joined;
// imageURLs are the request's image_url parts in order.
func stageAnswer(stage pipeline.StageName, prompt string, imageURLs []string) string {
	return renderStage(stage, applyHistory(analyzePrompt(transcriptBlock(prompt), imageURLs), stages.ParseHistoryBlock(prompt)))
}

// transcriptBlock returns the transcript block of a prompt, delimiters
// included, and the context block before it when there is one, or ""
// when there is no transcript. The rules read nothing else, so these
// blocks (with the image URLs) are what answers are cached by.
func transcriptBlock(prompt string) string {
	start := strings.Index(prompt, stages.TranscriptOpen)
	if start < 0 {
		return ""
	}
	if c := strings.Index(prompt, stages.ContextOpen); c >= 0 && c < start {
		start = c
	}
	end := strings.Index(prompt[start:], stages.TranscriptClose)
	if end < 0 {
		return ""
	}
	return prompt[start : start+end+len(stages.TranscriptClose)]
}

// analyzePrompt parses a transcript block and applies the rules. A prompt
// without a transcript is analysed as an empty chat, as a model would answer
// something anyway.
func analyzePrompt(block string, imageURLs []string) Analysis {
	lines, err := stages.ParseTranscript(block)
	if err != nil {
		lines = nil
	}
	// A prompt without a context block (or with one that does not parse)
	// is the window alone.
	before, _ := stages.ParseContext(block)
	for _, ls := range [][]stages.TranscriptLine{lines, before} {
		for i := range ls {
			// A datamarked transcript reads as the chat without its markers.
			ls[i].Text = stages.UnmarkData(ls[i].Text)
		}
	}
	return AnalyzeWithContext(before, attachImageParts(lines, imageURLs))
}

// renderStage renders an analysis as one stage's JSON answer.
func renderStage(stage pipeline.StageName, a Analysis) string {
	var v any
	switch stage {
	case pipeline.StageTriage:
		v = triageAnswer(a)
	case pipeline.StageExtract:
		v = extractAnswer(a)
	case pipeline.StageVision:
		v = visionAnswer(a)
	case pipeline.StageJudge:
		v = judgeAnswer(a)
	default:
		return "{}"
	}
	// Marshal cannot fail: the outputs hold only strings, numbers and slices.
	b, _ := json.Marshal(v)
	return string(b)
}

// attachImageParts fills in the URL of image lines that came without one
// from the request's image_url parts, in order: the vision request carries
// the pictures as parts and the transcript names the messages.
func attachImageParts(lines []stages.TranscriptLine, urls []string) []stages.TranscriptLine {
	if len(urls) == 0 {
		return lines
	}
	out := slices.Clone(lines)
	next := 0
	for i, l := range out {
		if l.Kind != string(pipeline.KindImage) && l.ImageURL == "" {
			continue
		}
		if l.ImageURL == "" && next < len(urls) {
			out[i].ImageURL = urls[next]
		}
		next++
	}
	return out
}

func triageAnswer(a Analysis) stages.TriageOutput {
	out := stages.TriageOutput{Risk: stages.RiskNone, Categories: []pipeline.Category{}}
	textMax, images := 0, false
	seen := map[pipeline.Category]bool{}
	for _, s := range a.Signals {
		seen[s.Category] = true
		if s.Image {
			images = true
		} else {
			textMax = max(textMax, s.Severity)
		}
	}
	for _, c := range pipeline.AbuseCategories {
		if seen[c] {
			out.Categories = append(out.Categories, c)
		}
	}
	switch {
	case textMax >= 3:
		out.Risk = stages.RiskHigh
	case textMax >= 1 || images:
		// A text-only look cannot see an image, only its name: low, so
		// that vision gets a look.
		out.Risk = stages.RiskLow
	}
	r := newRationale(300)
	if len(a.Signals) == 0 {
		r.add("rule-based stand-in: no rule matched")
	} else {
		r.add("rule-based stand-in: matched ")
		r.signals(a.Signals, 1)
	}
	r.history(a.HistoryNote)
	r.injections(a.Injections)
	out.Reason = r.String()
	return out
}

func extractAnswer(a Analysis) stages.ExtractOutput {
	out := stages.ExtractOutput{Evidence: []stages.Evidence{}}
	for _, s := range a.Signals {
		if s.Image || s.Severity < 2 {
			continue
		}
		if len(out.Evidence) == 20 {
			break
		}
		out.Evidence = append(out.Evidence, stages.Evidence{MessageID: s.MessageID, Category: s.Category, Quote: s.Quote})
	}
	return out
}

func visionAnswer(a Analysis) stages.VisionOutput {
	out := stages.VisionOutput{Images: []stages.ImageFinding{}}
	for _, f := range a.Images {
		if len(out.Images) == 16 {
			break
		}
		out.Images = append(out.Images, f)
	}
	return out
}

func judgeAnswer(a Analysis) stages.JudgeOutput {
	var strong []Signal
	for _, s := range a.Signals {
		if s.Severity >= 2 {
			strong = append(strong, s)
		}
	}
	if len(strong) == 0 {
		out := stages.JudgeOutput{Label: pipeline.LabelClean, Category: pipeline.CategoryClean, Severity: 1,
			Confidence: 0.9, Action: pipeline.ActionNone, EvidenceIDs: []string{}, OffenderRole: stages.OffenderNone}
		r := newRationale(500)
		r.add("Rule-based stand-in (llmsim), not a model: clean")
		if len(a.Signals) > 0 {
			out.Confidence = 0.75
			r.add("; weak signals only: ")
			r.signals(a.Signals, 1)
		}
		r.injections(a.Injections)
		out.Rationale = r.String()
		return out
	}
	primary := strong[0]
	for _, s := range strong[1:] {
		if s.Severity > primary.Severity ||
			s.Severity == primary.Severity && priority(s.Category) < priority(primary.Category) {
			primary = s
		}
	}
	support := 0
	for _, s := range strong {
		if s.Category == primary.Category {
			support++
		}
	}
	out := stages.JudgeOutput{
		Label:       pipeline.LabelSuspicious,
		Category:    primary.Category,
		Severity:    primary.Severity,
		Confidence:  math.Round((0.6+0.08*float64(min(support, 4)))*100) / 100,
		Action:      pipeline.ActionWarn,
		EvidenceIDs: []string{},
		// The offender is the sender of the deciding signal's message;
		// a system line or an unknown role names no one.
		OffenderRole: stages.OffenderNone,
	}
	if primary.Role == pipeline.RoleBuyer || primary.Role == pipeline.RoleSeller {
		out.OffenderRole = primary.Role
	}
	if out.Severity >= 3 || out.Category == pipeline.CategorySpam {
		out.Label = pipeline.LabelAbusive
	}
	switch out.Severity {
	case 5:
		out.Action = pipeline.ActionBan
	case 4:
		out.Action = pipeline.ActionRestrict
	}
	// Evidence for the verdict's category first, then the rest.
	for _, first := range []bool{true, false} {
		for _, s := range strong {
			if (s.Category == primary.Category) != first || slices.Contains(out.EvidenceIDs, s.MessageID) || len(out.EvidenceIDs) == 20 {
				continue
			}
			out.EvidenceIDs = append(out.EvidenceIDs, s.MessageID)
		}
	}
	r := newRationale(500)
	r.add(fmt.Sprintf("Rule-based stand-in (llmsim), not a model: %s %s, severity %d. Rules: ", out.Label, out.Category, out.Severity))
	r.signals(strong, 2)
	r.history(a.HistoryNote)
	r.injections(a.Injections)
	out.Rationale = r.String()
	return out
}

func priority(c pipeline.Category) int {
	if i := slices.Index(categoryPriority, c); i >= 0 {
		return i
	}
	return len(categoryPriority)
}

// rationale builds a text of at most limit runes (the schemas' maxLength).
type rationale struct {
	b     strings.Builder
	runes int
	limit int
}

func newRationale(limit int) *rationale { return &rationale{limit: limit} }

func (r *rationale) add(s string) {
	for _, c := range s {
		if r.runes == r.limit {
			return
		}
		r.b.WriteRune(c)
		r.runes++
	}
}

func (r *rationale) signals(sigs []Signal, minSev int) {
	n := 0
	for _, s := range sigs {
		if s.Severity < minSev {
			continue
		}
		if n > 0 {
			r.add(", ")
		}
		r.add(fmt.Sprintf("%s/%s in %s", s.Rule, s.Category, s.MessageID))
		n++
	}
	r.add(".")
}

func (r *rationale) history(note string) {
	if note != "" {
		r.add(" " + note)
	}
}

func (r *rationale) injections(ids []string) {
	if len(ids) == 0 {
		return
	}
	r.add(" Text addressed to the reviewer (prompt injection) in " + strings.Join(ids, ", ") + " was treated as data and ignored.")
}

func (r *rationale) String() string { return r.b.String() }
