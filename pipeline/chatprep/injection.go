package chatprep

import "strings"

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
	p         anchored
}{
	{InjectionRoleTag, anchor(`<\|?\s*/?\s*(?:im_start|im_end|system|assistant|endoftext|eot_id|start_header_id|end_header_id)\s*\|?>`, 8, 40, "<")},
	{InjectionRoleTag, anchor(`\[/?(?:inst|sys)\]|<<\s*/?sys\s*>>`, 4, 12, "[inst", "[/inst", "[sys", "[/sys", "<<")},
	// A role turn after the end of a sentence ("… 네. system: …"); at the
	// start of a line, roleLine finds it.
	{InjectionRoleTag, anchor(`[.!?。]\s+(?:system|assistant|developer|시스템|어시스턴트)\s*(?:message|prompt|메시지)?\s*:`, 8, 30, "system", "assistant", "developer", "시스템", "어시스턴트")},
	{InjectionSystemNotice, anchor(`\[\s*(?:system|시스템|관리자|운영자|운영팀|admin|administrator|moderator)[^\]\n]{0,24}\]`, 4, 60, "[")},
	{InjectionSystemNotice, anchor(`(?:system|admin|moderator|관리자|운영자|운영팀|검수팀|번개장터|당근마켓|중고나라)\s*(?:notice|message|override|알림|공지|메시지|안내)\s*:`, 40, 20, "notice", "message", "override", "알림", "공지", "메시지", "안내")},
	{InjectionSystemNotice, anchor(`(?:verified|approved|whitelisted)\s+(?:safe|clean|seller|by)|this (?:chat|conversation|room|seller) (?:has been|was|is) (?:reviewed|verified|approved|whitelisted)`, 40, 40, "verified", "approved", "whitelisted", "reviewed")},
	{InjectionIgnoreRules, anchor(`(?:ignore|disregard|forget|override|bypass)\s+(?:(?:all|any|the|your|of)\s+)*(?:(?:previous|prior|above|earlier|preceding|system|safety|original)\s+)?(?:instructions?|prompts?|rules?|directions?|guidelines?|policies)`, 4, 80, "ignore", "disregard", "forget", "override", "bypass")},
	{InjectionIgnoreRules, anchor(`(?:지시|지침|명령|규칙|프롬프트|규정)\S{0,3}\s*(?:사항\S{0,2}\s*)?(?:은|는|을|를)?\s*(?:모두|전부|다)?\s*(?:무시|잊)|new instructions?\s*:|새로운\s*지시`, 40, 40, "무시", "잊", "new instruction", "새로운")},
	{InjectionAddressesModel, anchor(`\bai\s*(?:reviewer|moderator|assistant|model|검수자|검수|심사관|심사|모델|리뷰어)|(?:dear|attention|note to (?:the )?)\s*(?:reviewer|moderator|model|classifier)|검수자\s*(?:님|분)|모델\s*(?:님|에게)`, 20, 20, "reviewer", "moderator", "assistant", "model", "classifier", "검수", "심사", "모델", "리뷰어")},
	{InjectionAddressesModel, anchor(`as an ai\b|you are (?:an? )?(?:ai|language model|moderator|classifier)\b`, 12, 30, "as an ai", "you are")},
	{InjectionAddressesModel, anchor(`(?:classify|label|mark|rate|judge|flag|report)\s+(?:this|the)\s+(?:chat|conversation|room|seller|user|transcript)\s+as\s+(?:safe|clean|normal|benign|not abusive|legit)`, 60, 30, " as safe", " as clean", " as normal", " as benign", " as not abusive", " as legit")},
	{InjectionAddressesModel, anchor(`(?:정상|안전|클린|clean|무혐의)\s*(?:으로|로)\s*(?:판정|분류|판단)`, 40, 8, "판정", "분류", "판단")},
	{InjectionAddressesModel, anchor(`(?:answer|respond|reply|output|return)\s+(?:only\s+)?(?:with\s+)?["']?(?:clean|safe|none)\b`, 40, 12, "clean", "safe", "none")},
	{InjectionVerdictJSON, anchor(`\{\s*\\?["']?(?:label|risk|verdict|category|severity|action|evidence_ids|confidence)\\?["']?\s*:`, 12, 30, "{")},
	{InjectionVerdictJSON, anchor(`\b(?:label|verdict|risk)\s*[=:]\s*\\?["']?(?:clean|none|safe)\b`, 12, 20, "label", "verdict", "risk")},
	{InjectionDelimiter, anchor(`</?\s*(?:chat_transcript|rule_signals|stage_findings|transcript|instructions?|user_message|system_prompt|data)\s*>`, 4, 30, "<")},
	{InjectionDelimiter, anchor("\x60\x60\x60|end of (?:the )?(?:chat|transcript|conversation|data)\\b|(?:-{3,}|={3,})\\s*(?:end|system|instructions?)", 12, 30, "\x60\x60\x60", "end of", "---", "===")},
	{InjectionPromptLeak, anchor(`reference code|system prompt|시스템 프롬프트|(?:repeat|print|reveal|show|output)\s+(?:your|the|all)\s+(?:instructions|prompt|rules|system)|(?:지시사항|프롬프트)\S{0,2}\s*(?:출력|보여|알려)`, 30, 30, "reference code", "system prompt", "시스템 프롬프트", "instructions", "prompt", "rules", "system", "지시사항", "프롬프트")},
}

// findInjections returns one match per technique found in s.
func findInjections(s string) []match {
	var out []match
	done := map[string]bool{}
	for _, r := range injectionRules {
		if done[r.technique] {
			continue
		}
		if loc := r.p.find(s); loc != nil {
			done[r.technique] = true
			out = append(out, match{kind: SignalInjection, start: loc[0], end: loc[1], value: r.technique})
		}
	}
	if loc := roleLine(s); loc != nil && !done[InjectionRoleTag] {
		out = append(out, match{kind: SignalInjection, start: loc[0], end: loc[1], value: InjectionRoleTag})
	}
	return out
}

// roleNames open a line that pretends to be a chat-template role.
var roleNames = []string{"system", "assistant", "developer", "시스템", "어시스턴트"}

// roleLine finds a line that starts like a role turn ("system: …",
// "### System message: …") and returns its span.
func roleLine(s string) []int {
	for start := 0; start < len(s); {
		end := strings.IndexByte(s[start:], '\n')
		if end < 0 {
			end = len(s)
		} else {
			end += start
		}
		line := strings.TrimLeft(s[start:end], " \t#")
		for _, r := range roleNames {
			rest, ok := strings.CutPrefix(line, r)
			if !ok {
				continue
			}
			rest = strings.TrimLeft(rest, " ")
			for _, w := range []string{"message", "prompt", "메시지"} {
				rest = strings.TrimLeft(strings.TrimPrefix(rest, w), " ")
			}
			if strings.HasPrefix(rest, ":") {
				return []int{end - len(line), end}
			}
		}
		start = end + 1
	}
	return nil
}
