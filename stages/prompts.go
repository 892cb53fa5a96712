package stages

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"text/template"

	"github.com/chatguard/chatguard/pipeline"
)

//go:embed prompts/*.tmpl
var promptFS embed.FS

// Canary is a confidential marker in every system prompt. The model is told
// never to repeat it, so an answer that contains it means the chat talked
// the model into echoing its instructions: a prompt injection.
const Canary = "CGX-7Q2F-K9VD-41RM"

func jsonFunc(v any) (string, error) {
	// encoding/json escapes <, > and &, so no value can close a block.
	b, err := json.Marshal(v)
	return string(b), err
}

var (
	funcs      = template.FuncMap{"json": jsonFunc}
	repairTmpl = template.Must(template.New("repair.tmpl").Funcs(funcs).ParseFS(promptFS, "prompts/repair.tmpl"))
	// systemPrompt is one text for every stage, with every stage's task
	// in it: the stages' prompts share their longest possible prefix
	// (system prompt, then the chat and its rule signals), so a serving
	// engine's prefix cache computes the system prompt once for all
	// reviews and the chat once per review. What differs per stage (its
	// name, the earlier findings, the images) comes after the chat.
	systemPrompt = func() string {
		type task struct {
			Stage pipeline.StageName
			Text  string
		}
		var tasks []task
		for _, st := range pipeline.Stages {
			t := template.Must(template.New(string(st)+".tmpl").Funcs(funcs).ParseFS(promptFS, "prompts/"+string(st)+".tmpl"))
			var b strings.Builder
			if err := t.ExecuteTemplate(&b, "task", nil); err != nil {
				panic(fmt.Sprintf("stages: render the %s task: %v", st, err))
			}
			tasks = append(tasks, task{st, strings.TrimSpace(b.String())})
		}
		t := template.Must(template.New("system.tmpl").Funcs(funcs).ParseFS(promptFS, "prompts/system.tmpl"))
		var b strings.Builder
		if err := t.Execute(&b, map[string]any{"Canary": Canary, "Marker": string(DataMarker), "Tasks": tasks}); err != nil {
			panic(fmt.Sprintf("stages: render system prompt: %v", err))
		}
		return b.String()
	}()
	userTmpl = template.Must(template.New("user.tmpl").Funcs(funcs).ParseFS(promptFS, "prompts/user.tmpl", "prompts/context.tmpl"))
)

// SystemPrompt returns the system prompt of a stage (rendered once at
// start-up). Every stage gets the same text, so that the stages' prompts
// share a prefix; the stage is named in the user message, after the chat.
// It panics on an unknown stage: the set is fixed.
func SystemPrompt(stage pipeline.StageName) string {
	if !slices.Contains(pipeline.Stages, stage) {
		panic(fmt.Sprintf("stages: no system prompt for stage %q", stage))
	}
	return systemPrompt
}

// SignalLine is one rule signal as the models see it; Value is masked.
// Cut marks a match in text the models do not see (a message left out for
// length, or the cut middle of a long message): only the signal says it is
// there.
type SignalLine struct {
	Kind      string `json:"kind"`
	MessageID string `json:"message_id"`
	Value     string `json:"value"`
	Cut       bool   `json:"cut,omitempty"`
}

// Findings are the earlier stages' answers passed to a later stage.
type Findings struct {
	Triage   *TriageOutput `json:"triage,omitempty"`
	Evidence []Evidence    `json:"evidence,omitempty"`
	Vision   *VisionOutput `json:"vision,omitempty"`
}

// PromptInput is what a stage's user message carries.
type PromptInput struct {
	// Context is the FormatContext block of the room's messages before
	// the window ("" when the review has none): read, never cited.
	// ContextMessages counts its messages, ContextOmitted the older ones
	// the token budget left out (context is cut before the window).
	Context         string
	ContextMessages int
	ContextOmitted  int
	// Transcript is the FormatTranscript block of the window's messages.
	Transcript string
	// Messages is how many messages the transcript holds.
	Messages int
	// Omitted, OmittedFrom and OmittedTo describe the run of messages the
	// token budget cut.
	Omitted                int
	OmittedFrom, OmittedTo string
	// Shortened counts long messages that keep only their start and end
	// around a "[… N characters cut …]" mark.
	Shortened int
	// Flooded counts messages an oversized history lost before the
	// window was built (FloodUnread: and more were never read); their
	// rule signals are among Signals, marked cut.
	Flooded     int
	FloodUnread bool
	Signals     []SignalLine
	// SignalsOmitted counts rule signals left off a long list.
	SignalsOmitted int
	// History is the account-history block (HistoryBlock), or empty.
	History string
	// Findings are passed to extract (triage) and judge (all).
	Findings *Findings
	// ImageIDs name the image parts of a vision request, in order.
	ImageIDs []string
}

// UserPrompt renders a stage's user message. It starts with what every
// stage of a review shares (the context block, if any, the window's
// description, the transcript and the rule signals) and ends with what is the stage's own (its name, the
// earlier findings, the attached images), so the four prompts of
// a review share the longest prefix a prefix cache can reuse. The
// transcript is the only chat_transcript block in the prompt; every other
// chat-derived value is JSON-encoded so it cannot open or close a block.
// It fails only for an unknown stage.
func UserPrompt(stage pipeline.StageName, in PromptInput) (string, error) {
	if !slices.Contains(pipeline.Stages, stage) {
		return "", fmt.Errorf("stages: no prompt for stage %q", stage)
	}
	var b strings.Builder
	data := struct {
		PromptInput
		Stage pipeline.StageName
	}{in, stage}
	if err := userTmpl.Execute(&b, data); err != nil {
		return "", fmt.Errorf("stages: render %s prompt: %w", stage, err)
	}
	return b.String(), nil
}

// RepairPrompt renders the follow-up message of a repair try. problem is
// our own validation error text, never chat text.
func RepairPrompt(problem string, truncated bool) string {
	var b strings.Builder
	// Execute cannot fail on this fixed template with plain fields.
	_ = repairTmpl.Execute(&b, map[string]any{"Problem": problem, "Truncated": truncated})
	return strings.TrimSpace(b.String())
}

// Fingerprint returns the pipeline version: a short hex SHA-256 over every
// prompt template, every output schema, the canary and the given model
// names. Any change to what the models are asked, or by whom, changes it.
func Fingerprint(models ...string) string {
	h := sha256.New()
	for _, fsys := range []embed.FS{promptFS, schemaFS} {
		var names []string
		_ = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				names = append(names, p)
			}
			return nil
		})
		slices.Sort(names)
		for _, n := range names {
			b, _ := fsys.ReadFile(n)
			fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
			h.Write(b)
		}
	}
	h.Write([]byte(Canary))
	for _, m := range models {
		fmt.Fprintf(h, "\x00model:%s", m)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
