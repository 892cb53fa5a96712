package chatprep

import "regexp"

// Injection techniques, the Value of a SignalInjection.
const (
	InjectionRoleTag        = "role_tag"
	InjectionSystemNotice   = "fake_system_notice"
	InjectionIgnoreRules    = "ignore_instructions"
	InjectionAddressesModel = "addresses_reviewer"
	InjectionVerdictJSON    = "verdict_json"
	InjectionDelimiter      = "delimiter_break"
	InjectionPromptLeak     = "prompt_leak"
)

// injectionRules find chat text written at the reviewing model. They run on
// normalized, lower-cased text, so zero-width characters and full-width
// letters do not hide them. Each is specific enough that an ordinary trade
// chat does not match: a buyer says "system error", not "system:" at the
// start of a line.
var injectionRules = []struct {
	technique string
	re        *regexp.Regexp
}{
	{InjectionRoleTag, regexp.MustCompile(`<\|?\s*/?\s*(?:im_start|im_end|system|assistant|endoftext|eot_id|start_header_id|end_header_id)\s*\|?>|\[/?(?:inst|sys)\]|<<\s*/?sys\s*>>|(?m)^\s*(?:#{1,4}\s*)?(?:system|assistant|developer|시스템|어시스턴트)\s*(?:message|prompt|메시지)?\s*:`)},
	{InjectionSystemNotice, regexp.MustCompile(`\[\s*(?:system|시스템|관리자|운영자|운영팀|admin|administrator|moderator)[^\]\n]{0,24}\]|(?:system|admin|moderator|관리자|운영자|운영팀|검수팀|번개장터|당근마켓|중고나라)\s*(?:notice|message|override|알림|공지|메시지|안내)\s*:|(?:verified|approved|whitelisted)\s+(?:safe|clean|seller|by)|this (?:chat|conversation|room|seller) (?:has been|was|is) (?:reviewed|verified|approved|whitelisted)`)},
	{InjectionIgnoreRules, regexp.MustCompile(`(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|the\s+|your\s+|of\s+)*(?:previous|prior|above|earlier|preceding|system|safety|original)?\s*(?:instructions?|prompts?|rules?|directions?|guidelines?|policies)|(?:이전|위의?|앞의?|기존|모든|시스템)\s*(?:지시|지침|명령|규칙|프롬프트|규정)\S{0,3}\s*(?:사항\S{0,2}\s*)?(?:은|는|을|를)?\s*(?:모두|전부|다)?\s*(?:무시|잊)|(?:지시|지침|명령|규칙)\S{0,2}\s*(?:모두|전부|다)?\s*무시\s*(?:하고|해)|new instructions?\s*:|새로운\s*지시`)},
	{InjectionAddressesModel, regexp.MustCompile(`\bai\s*(?:reviewer|moderator|assistant|model|검수자|검수|심사관|심사|모델|리뷰어)|(?:dear|attention|note to (?:the)?)\s*(?:reviewer|moderator|model|classifier)|as an ai\b|you are (?:an? )?(?:ai|language model|moderator|classifier)\b|(?:classify|label|mark|rate|judge|flag|report)\s+(?:this|the)\s+(?:chat|conversation|room|seller|user|transcript)\s+as\s+(?:safe|clean|normal|benign|not abusive|legit)|(?:정상|안전|클린|clean|무혐의)\s*(?:으로|로)\s*(?:판정|분류|판단)|(?:answer|respond|reply|output|return)\s+(?:only\s+)?(?:with\s+)?["']?(?:clean|safe|none)\b|검수자\s*(?:님|분)|모델\s*(?:님|에게)`)},
	{InjectionVerdictJSON, regexp.MustCompile(`\{\s*\\?["']?(?:label|risk|verdict|category|severity|action|evidence_ids|confidence)\\?["']?\s*:|\b(?:label|verdict|risk)\s*[=:]\s*\\?["']?(?:clean|none|safe)\b`)},
	{InjectionDelimiter, regexp.MustCompile(`</?\s*(?:chat_transcript|rule_signals|stage_findings|transcript|instructions?|user_message|system_prompt|data)\s*>|\x60\x60\x60|end of (?:the )?(?:chat|transcript|conversation|data)\b|(?:-{3,}|={3,})\s*(?:end|system|instructions?)`)},
	{InjectionPromptLeak, regexp.MustCompile(`reference code|system prompt|시스템 프롬프트|(?:repeat|print|reveal|show|output)\s+(?:your|the|all)\s+(?:instructions|prompt|rules|system)|(?:지시사항|프롬프트)\S{0,2}\s*(?:출력|보여|알려)`)},
}

// findInjections returns one match per technique found in s.
func findInjections(s string) []match {
	var out []match
	for _, r := range injectionRules {
		if loc := r.re.FindStringIndex(s); loc != nil {
			out = append(out, match{kind: SignalInjection, start: loc[0], end: loc[1], value: r.technique})
		}
	}
	return out
}
