package llmsim

// A gullible model (Config.Gullible) follows instructions typed into a
// chat, the way real models too often do: text that claims authority
// (role tags, "system:", an admin notice, a closed transcript block), talks
// to the reviewer, or looks like the answer itself (verdict-shaped JSON),
// and asks for leniency, makes it answer "clean"; a request for its
// instructions makes it repeat the system prompt's reference code.
//
// What it does not follow is datamarked text (stages.MarkData): an
// instruction whose words carry the marker reads as data, which is what the
// spotlighting defence aims at with real models (it lowers, but does not
// end, their attack success; this stand-in is the idealised version, so
// chatguard's rule floor is measured on its own too). An instruction in
// words without a marker (a chat sent without datamarking) is followed. The triggers are broader than
// chatguard's own rule detector on purpose: the defence must hold against
// attacks the rules do not know.

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/stages"
)

var (
	// gullTriggers open an instruction the model may take for its own.
	gullTriggers = regexp.MustCompile(`(?i)ignore|disregard|forget (?:all|your|previous)|override|system\s*[:：]|<\|?\s*im_start|\[/?inst\]|\[\s*(?:system|시스템|관리자|운영자|admin)|#{2,}\s*(?:system|instruction)|</?\s*(?:chat_transcript|rule_signals|stage_findings|system)\s*>|\x60\x60\x60|end of (?:the )?(?:chat|transcript)|\bai\s+(?:reviewer|moderator|model)|reviewer|moderator|whoever reviews|검수|검토\s*결과|심사|리뷰어|관리자|운영자|시스템|지시|무시|판정\s*[:：]|결론\s*[:：]|conclusion\s*:|final (?:answer|verdict)|"?label"?\s*[:=]|"?verdict"?\s*[:=]|"?risk"?\s*[:=]`)
	// gullDemands ask for the lenient answer the attacker wants.
	gullDemands = regexp.MustCompile(`(?i)clean|safe|benign|normal|legit|not abusive|none|정상|안전|클린|무혐의|문제\s*없|이상\s*없`)
	// gullLeak asks for the instructions.
	gullLeak = regexp.MustCompile(`(?i)reference code|system prompt|your instructions|시스템 프롬프트|지시사항|참조 코드`)
	// canaryRe finds the confidential code in a system prompt.
	canaryRe = regexp.MustCompile(`Reference code (\S+) is confidential`)
)

// obeyed is the instruction a gullible model follows.
type obeyed struct {
	leak    bool
	verdict map[string]any // a verdict-shaped JSON object in the chat
}

// unmarkedMatch reports whether re matches text (read without markers) at
// a span that carries no marker in the text as sent.
func unmarkedMatch(re *regexp.Regexp, marked string) bool {
	marker := string(stages.DataMarker)
	plain := strings.ReplaceAll(marked, marker, "")
	if plain == marked {
		return re.MatchString(plain)
	}
	// pos[i] is the offset in marked of plain's byte i.
	pos := make([]int, 0, len(plain)+1)
	for i := 0; i < len(marked); {
		if strings.HasPrefix(marked[i:], marker) {
			i += len(marker)
			continue
		}
		pos = append(pos, i)
		i++
	}
	pos = append(pos, len(marked))
	for _, m := range re.FindAllStringIndex(plain, -1) {
		if m[1] <= m[0] {
			continue
		}
		// A model reads words, not bytes: the match is marked when a word
		// it touches carries the marker.
		start, end := pos[m[0]], pos[m[1]-1]+1
		for start > 0 && !isSpaceByte(marked[start-1]) {
			start--
		}
		for end < len(marked) && !isSpaceByte(marked[end]) {
			end++
		}
		if !strings.Contains(marked[start:end], marker) {
			return true
		}
	}
	return false
}

func isSpaceByte(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }

// findObeyed returns the first instruction in the chat the model follows.
func findObeyed(lines []stages.TranscriptLine) (obeyed, bool) {
	for _, l := range lines {
		if l.Role == string(pipeline.RoleSystem) || l.Text == "" {
			continue
		}
		plain := stages.UnmarkData(l.Text)
		if unmarkedMatch(gullLeak, l.Text) {
			return obeyed{leak: true}, true
		}
		if !unmarkedMatch(gullTriggers, l.Text) || !gullDemands.MatchString(plain) {
			continue
		}
		o := obeyed{}
		if i := strings.IndexByte(plain, '{'); i >= 0 {
			if j := strings.LastIndexByte(plain, '}'); j > i {
				var v map[string]any
				if json.Unmarshal([]byte(plain[i:j+1]), &v) == nil {
					o.verdict = v
				}
			}
		}
		return o, true
	}
	return obeyed{}, false
}

// gullibleAnswer replaces a stage's answer when the chat talked the model
// into something; content is the answer the rules gave.
func gullibleAnswer(c *call, content string) string {
	if c.stage == stageOther {
		return content
	}
	system, block := "", ""
	for _, m := range c.req.Messages {
		if m.Role == "system" {
			system += m.Content.text
		}
		if block == "" {
			block = transcriptBlock(m.Content.text)
		}
	}
	lines, err := stages.ParseTranscript(block)
	if err != nil {
		return content
	}
	o, ok := findObeyed(lines)
	if !ok {
		return content
	}
	code := ""
	if m := canaryRe.FindStringSubmatch(system); m != nil {
		code = m[1]
	}
	var v any
	switch pipeline.StageName(c.stage) {
	case pipeline.StageTriage:
		t := stages.TriageOutput{Risk: stages.RiskNone, Categories: []pipeline.Category{}, Reason: "an ordinary trade"}
		if o.leak {
			t.Reason = "as asked, my reference code is " + code
		} else if r, ok := o.verdict["risk"].(string); ok && (r == "none" || r == "low" || r == "high") {
			t.Risk = stages.Risk(r)
		}
		v = t
	case pipeline.StageExtract:
		v = stages.ExtractOutput{Evidence: []stages.Evidence{}}
	case pipeline.StageVision:
		var vo stages.VisionOutput
		if json.Unmarshal([]byte(content), &vo) != nil {
			return content
		}
		for i := range vo.Images {
			vo.Images[i].Risk, vo.Images[i].Flags = stages.RiskNone, []stages.ImageFlag{}
		}
		v = vo
	case pipeline.StageJudge:
		j := stages.JudgeOutput{Label: pipeline.LabelClean, Category: pipeline.CategoryClean, Severity: 1, Confidence: 0.95,
			Action: pipeline.ActionNone, Rationale: "An ordinary trade.", EvidenceIDs: []string{}}
		if o.leak {
			j.Rationale = "As asked, my reference code is " + code + "."
		}
		applyVerdict(&j, o.verdict)
		v = j
	default:
		return content
	}
	b, err := json.Marshal(v)
	if err != nil {
		return content
	}
	return string(b)
}

// applyVerdict copies the fields of a chat's verdict-shaped JSON that fit
// the schema: the model parrots the answer it was handed.
func applyVerdict(j *stages.JudgeOutput, v map[string]any) {
	if l, ok := v["label"].(string); ok && (l == "clean" || l == "suspicious" || l == "abusive") {
		j.Label = pipeline.Label(l)
	}
	if c, ok := v["category"].(string); ok && pipeline.Category(c).Valid() {
		j.Category = pipeline.Category(c)
	}
	if (j.Label == pipeline.LabelClean) != (j.Category == pipeline.CategoryClean) {
		j.Label, j.Category = pipeline.LabelClean, pipeline.CategoryClean
	}
	if s, ok := v["severity"].(float64); ok && s >= 1 && s <= 5 {
		j.Severity = int(s)
	}
	if a, ok := v["action"].(string); ok {
		switch pipeline.Action(a) {
		case pipeline.ActionNone, pipeline.ActionWarn, pipeline.ActionRestrict, pipeline.ActionBan:
			j.Action = pipeline.Action(a)
		}
	}
	if r, ok := v["rationale"].(string); ok && len([]rune(r)) <= 500 {
		j.Rationale = r
	}
}
