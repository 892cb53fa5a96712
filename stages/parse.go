package stages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/chatguard/chatguard/pipeline"
)

// ErrCanary is returned (wrapped) by the parsers when an answer contains
// the system prompt's Canary: the chat manipulated the model.
var ErrCanary = errors.New("stages: answer repeats the confidential reference code (prompt injection)")

// InvalidAnswerError reports an answer that is not usable: not JSON, not
// the schema's shape, or referring to messages that are not in the chat.
// Problem is our own text (no chat content, no model-supplied ids), fit for
// a repair prompt and for logs.
type InvalidAnswerError struct {
	Stage   pipeline.StageName
	Problem string
	Err     error
}

// Error implements error.
func (e *InvalidAnswerError) Error() string {
	return fmt.Sprintf("stages: invalid %s answer: %s", e.Stage, e.Problem)
}

// Unwrap returns the underlying cause, ErrCanary among them.
func (e *InvalidAnswerError) Unwrap() error { return e.Err }

// IDSet answers whether a message id is known.
type IDSet func(id string) bool

type problems struct {
	stage pipeline.StageName
	list  []string
}

func (p *problems) add(format string, args ...any) {
	if len(p.list) < 8 {
		p.list = append(p.list, fmt.Sprintf(format, args...))
	}
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &InvalidAnswerError{Stage: p.stage, Problem: strings.Join(p.list, "; ")}
}

// decode checks the canary, then decodes b strictly into v (a pointer):
// every object key exactly a schema field name and given once (checkKeys),
// no trailing data, no missing required keys, and the types right. The
// caller validates and redacts the value decoded here, never the bytes.
func decode(stage pipeline.StageName, b []byte, v any, required ...string) error {
	if bytes.Contains(b, []byte(Canary)) {
		return &InvalidAnswerError{Stage: stage, Problem: "the answer repeats confidential instructions", Err: ErrCanary}
	}
	keys, err := checkKeys(b, reflect.TypeOf(v))
	var kp *keyProblem
	switch {
	case errors.As(err, &kp):
		return &InvalidAnswerError{Stage: stage, Problem: "does not match the schema: " + kp.text, Err: err}
	case err != nil:
		return &InvalidAnswerError{Stage: stage, Problem: "not a JSON object: " + jsonProblem(err), Err: err}
	}
	for _, k := range required {
		if !keys[k] {
			return &InvalidAnswerError{Stage: stage, Problem: fmt.Sprintf("required field %q is missing", k)}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &InvalidAnswerError{Stage: stage, Problem: "does not match the schema: " + jsonProblem(err), Err: err}
	}
	return nil
}

// jsonProblem describes a decode error without echoing the input.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q must be %s, not %s", te.Field, te.Type, te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + shown(strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`))
	case strings.Contains(err.Error(), "unexpected end of JSON input"), strings.Contains(err.Error(), "unexpected EOF"):
		return "the JSON is cut off"
	default:
		return pipeline.ClipRunes(err.Error(), 120)
	}
}

// shownValue is what a model-supplied value may look like to be echoed in
// a problem: a short lower-case identifier, as every enum of the schemas is.
var shownValue = regexp.MustCompile(`^[a-z_]{0,32}$`)

// shown quotes a model-supplied value for a problem text when it looks
// like an enum, and otherwise only says how long it is: the value is model
// output, possibly chat text with phone numbers, and problems go to logs,
// repair prompts and MySQL.
func shown(v string) string {
	if shownValue.MatchString(v) {
		return strconv.Quote(v)
	}
	return fmt.Sprintf("(a %d-character value)", utf8.RuneCountInString(v))
}

func tooLong(s string, n int) bool { return utf8.RuneCountInString(s) > n }

func validRisk(r Risk) bool { return r == RiskNone || r == RiskLow || r == RiskHigh }

func abuseCategory(c pipeline.Category) bool { return c != pipeline.CategoryClean && c.Valid() }

// ParseTriage decodes and validates a triage answer.
func ParseTriage(b []byte) (TriageOutput, error) {
	var o TriageOutput
	if err := decode(pipeline.StageTriage, b, &o, "risk", "categories", "reason"); err != nil {
		return o, err
	}
	p := problems{stage: pipeline.StageTriage}
	if !validRisk(o.Risk) {
		p.add("risk %s is not none, low or high", shown(string(o.Risk)))
	}
	if len(o.Categories) > 9 {
		p.add("%d categories, at most 9", len(o.Categories))
	}
	for _, c := range o.Categories {
		if !abuseCategory(c) {
			p.add("category %s is not an abuse category", shown(string(c)))
		}
	}
	if tooLong(o.Reason, 300) {
		p.add("reason is longer than 300 characters")
	}
	return o, p.err()
}

// ParseExtract decodes and validates an extract answer; every evidence
// message id must be in known.
func ParseExtract(b []byte, known IDSet) (ExtractOutput, error) {
	var o ExtractOutput
	if err := decode(pipeline.StageExtract, b, &o, "evidence"); err != nil {
		return o, err
	}
	p := problems{stage: pipeline.StageExtract}
	if len(o.Evidence) > 20 {
		p.add("%d evidence items, at most 20", len(o.Evidence))
	}
	for i, e := range o.Evidence {
		if !known(e.MessageID) {
			p.add("evidence %d names a message id that is not in the chat", i)
		}
		if !abuseCategory(e.Category) {
			p.add("evidence %d: category %s is not an abuse category", i, shown(string(e.Category)))
		}
		if tooLong(e.Quote, 200) {
			p.add("evidence %d: quote is longer than 200 characters", i)
		}
	}
	return o, p.err()
}

var imageFlags = []ImageFlag{FlagForgedPayment, FlagQRCode, FlagContactDetails, FlagIDCard}

// ParseVision decodes and validates a vision answer; every message id must
// be one of the images sent.
func ParseVision(b []byte, images IDSet) (VisionOutput, error) {
	var o VisionOutput
	if err := decode(pipeline.StageVision, b, &o, "images"); err != nil {
		return o, err
	}
	p := problems{stage: pipeline.StageVision}
	if len(o.Images) > 16 {
		p.add("%d images, at most 16", len(o.Images))
	}
	for i, im := range o.Images {
		if !images(im.MessageID) {
			p.add("image %d names a message id that is not one of the images sent", i)
		}
		if !validRisk(im.Risk) {
			p.add("image %d: risk %s is not none, low or high", i, shown(string(im.Risk)))
		}
		if len(im.Flags) > 4 {
			p.add("image %d: %d flags, at most 4", i, len(im.Flags))
		}
		for _, f := range im.Flags {
			if !slices.Contains(imageFlags, f) {
				p.add("image %d: flag %s is unknown", i, shown(string(f)))
			}
		}
		if tooLong(im.Description, 200) {
			p.add("image %d: description is longer than 200 characters", i)
		}
	}
	return o, p.err()
}

// ParseJudge decodes and validates a judge answer; every evidence id must
// be in known, and the label and category must agree about "clean".
func ParseJudge(b []byte, known IDSet) (JudgeOutput, error) {
	var o JudgeOutput
	if err := decode(pipeline.StageJudge, b, &o, "label", "category", "severity", "confidence", "action", "rationale", "evidence_ids"); err != nil {
		return o, err
	}
	p := problems{stage: pipeline.StageJudge}
	switch o.Label {
	case pipeline.LabelAbusive, pipeline.LabelSuspicious, pipeline.LabelClean:
	default:
		p.add("label %s is not abusive, suspicious or clean", shown(string(o.Label)))
	}
	if !o.Category.Valid() {
		p.add("category %s is unknown", shown(string(o.Category)))
	}
	if (o.Label == pipeline.LabelClean) != (o.Category == pipeline.CategoryClean) {
		p.add("label %s and category %s disagree: category is clean exactly when the label is", shown(string(o.Label)), shown(string(o.Category)))
	}
	if o.Severity < 1 || o.Severity > 5 {
		p.add("severity %d is outside 1..5", o.Severity)
	}
	if math.IsNaN(o.Confidence) || o.Confidence < 0 || o.Confidence > 1 {
		p.add("confidence %v is outside 0..1", o.Confidence)
	}
	switch o.Action {
	case pipeline.ActionNone, pipeline.ActionWarn, pipeline.ActionRestrict, pipeline.ActionBan:
	default:
		p.add("action %s is not none, warn, restrict or ban", shown(string(o.Action)))
	}
	if tooLong(o.Rationale, 500) {
		p.add("rationale is longer than 500 characters")
	}
	if len(o.EvidenceIDs) > 20 {
		p.add("%d evidence ids, at most 20", len(o.EvidenceIDs))
	}
	for i, id := range o.EvidenceIDs {
		if !known(id) {
			p.add("evidence id %d is not a message id of the chat", i)
		}
	}
	switch o.OffenderRole {
	case "", pipeline.RoleBuyer, pipeline.RoleSeller, OffenderNone:
	default:
		p.add("offender_role %s is not buyer, seller or none", shown(string(o.OffenderRole)))
	}
	if o.Label == pipeline.LabelClean && (o.OffenderRole == pipeline.RoleBuyer || o.OffenderRole == pipeline.RoleSeller) {
		p.add("offender_role %s on a clean verdict: a clean verdict is about no one", o.OffenderRole)
	}
	return o, p.err()
}

// OffenderNone is the judge's offender_role when the verdict is about no
// one participant.
const OffenderNone pipeline.SenderRole = "none"
