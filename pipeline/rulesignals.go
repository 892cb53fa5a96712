package pipeline

import (
	"encoding/json"
	"regexp"
)

// RuleSignalsOutputKey is the member of the first stage's stored output
// that lists the rule-signal kinds the review found in the window
// (pipeline/chatprep's: phone, bank_account, url, …): kinds only, never a
// value. The protective-action policy's signals_any matches them, on a
// live verdict and on a stored one alike.
const RuleSignalsOutputKey = "rule_signals"

// MaxRecordedSignalKinds bounds the kinds read back.
const MaxRecordedSignalKinds = 32

var signalKindForm = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

// RecordedSignalKinds is the rule-signal kinds recorded in a verdict's
// first stage output: nil when there are none (no stage ran, the verdict
// predates the record); anything that is not a short lower-case token is
// left out.
func RecordedSignalKinds(stages []StageResult) []string {
	if len(stages) == 0 || len(stages[0].Output) == 0 {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(stages[0].Output, &obj) != nil {
		return nil
	}
	var kinds []string
	if raw, ok := obj[RuleSignalsOutputKey]; !ok || json.Unmarshal(raw, &kinds) != nil {
		return nil
	}
	var out []string
	for _, k := range kinds {
		if signalKindForm.MatchString(k) && len(out) < MaxRecordedSignalKinds {
			out = append(out, k)
		}
	}
	return out
}
