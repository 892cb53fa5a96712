// Package stages holds the four review stages of chatguard (triage, extract,
// vision, judge): their output types, the JSON schemas sent as
// response_format json_schema, the transcript format that carries chat text
// to a model as data, and (with the worker) prompts and validation.
//
// The schemas and the transcript format are contracts shared by the worker
// and the local LLM simulator, so both are defined here once.
package stages

import (
	"embed"
	"encoding/json"
	"fmt"

	"github.com/chatguard/chatguard/pipeline"
)

//go:embed schemas/*.json
var schemaFS embed.FS

// Schema returns the JSON schema of a stage's output, exactly as sent in
// response_format.json_schema.schema. The schema name sent alongside is the
// stage name. It panics on an unknown stage: the set is fixed at compile time.
func Schema(stage pipeline.StageName) json.RawMessage {
	b, err := schemaFS.ReadFile("schemas/" + string(stage) + ".json")
	if err != nil {
		panic(fmt.Sprintf("stages: no schema for stage %q", stage))
	}
	return json.RawMessage(b)
}

// Risk is triage's and vision's coarse risk level.
type Risk string

// The risk levels.
const (
	RiskNone Risk = "none"
	RiskLow  Risk = "low"
	RiskHigh Risk = "high"
)

// TriageOutput is the triage stage's answer: a text-only first look.
type TriageOutput struct {
	Risk       Risk                `json:"risk"`
	Categories []pipeline.Category `json:"categories"`
	Reason     string              `json:"reason"`
}

// Evidence is one quoted span that supports a category.
type Evidence struct {
	MessageID string            `json:"message_id"`
	Category  pipeline.Category `json:"category"`
	Quote     string            `json:"quote"`
}

// ExtractOutput is the extract stage's answer: evidence spans.
type ExtractOutput struct {
	Evidence []Evidence `json:"evidence"`
}

// ImageFlag is a risk flag the vision stage can raise for an image.
type ImageFlag string

// The image risk flags.
const (
	FlagForgedPayment  ImageFlag = "forged_payment_screenshot"
	FlagQRCode         ImageFlag = "qr_code"
	FlagContactDetails ImageFlag = "contact_details"
	FlagIDCard         ImageFlag = "id_card"
)

// ImageFinding is what the vision stage saw in one image message.
type ImageFinding struct {
	MessageID   string      `json:"message_id"`
	Description string      `json:"description"`
	Flags       []ImageFlag `json:"flags"`
	Risk        Risk        `json:"risk"`
}

// VisionOutput is the vision stage's answer, one finding per image.
type VisionOutput struct {
	Images []ImageFinding `json:"images"`
}

// JudgeOutput is the judge stage's final verdict.
type JudgeOutput struct {
	Label       pipeline.Label    `json:"label"`
	Category    pipeline.Category `json:"category"`
	Severity    int               `json:"severity"`
	Confidence  float64           `json:"confidence"`
	Action      pipeline.Action   `json:"action"`
	Rationale   string            `json:"rationale"`
	EvidenceIDs []string          `json:"evidence_ids"`
	// OffenderRole is the role of the participant the verdict is about
	// (buyer or seller; none for a clean verdict or when no one side is at
	// fault). It is never the victim: the verdict's subjects are that
	// role's senders of the evidence. An answer without it (an older
	// model or simulator) is taken as none: the verdict has no subjects.
	OffenderRole pipeline.SenderRole `json:"offender_role,omitempty"`
}
