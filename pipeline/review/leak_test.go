package review

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/stages"
)

// parrot is the worst model for privacy: it copies the chat's last
// message into every free-text field of every answer.
type parrot struct{}

func (parrot) Models() (string, string) { return "parrot", "" }

func (parrot) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	lines, err := stages.ParseTranscript(req.Messages[1].Text)
	if err != nil || len(lines) == 0 {
		return llm.Response{}, fmt.Errorf("parrot: %v", err)
	}
	last := lines[len(lines)-1]
	text := stages.UnmarkData(last.Text)
	clip := func(n int) string { return pipeline.ClipRunes(text, n) }
	var v any
	switch req.Stage {
	case pipeline.StageTriage:
		v = stages.TriageOutput{Risk: stages.RiskHigh, Categories: []pipeline.Category{pipeline.CategoryPersonalInfo}, Reason: clip(300)}
	case pipeline.StageExtract:
		v = stages.ExtractOutput{Evidence: []stages.Evidence{{MessageID: last.ID, Category: pipeline.CategoryPersonalInfo, Quote: clip(200)}}}
	case pipeline.StageJudge:
		v = stages.JudgeOutput{Label: pipeline.LabelAbusive, Category: pipeline.CategoryPersonalInfo, Severity: 4, Confidence: 0.9,
			Action: pipeline.ActionRestrict, Rationale: clip(500), EvidenceIDs: []string{last.ID}}
	default:
		v = stages.VisionOutput{Images: []stages.ImageFinding{}}
	}
	b, _ := json.Marshal(v)
	a := llm.Attempt{N: 1, Pool: pipeline.PoolPrimary, Model: "parrot", Outcome: llm.OutcomeOK, Content: b}
	if err := req.Validate(b); err != nil {
		return llm.Response{}, err
	}
	req.OnAttempt(a)
	return llm.Response{Content: b, Pool: pipeline.PoolPrimary, Model: "parrot", Attempts: 1}, nil
}

// TestNoCorpusCaseLeavesUnmasked runs every case of the signal corpus
// through a review whose model repeats the chat in every answer, and
// checks that no secret of any case reaches what is stored in MySQL (the
// verdict row and its stage outputs) or sent to the lake (the events).
func TestNoCorpusCaseLeavesUnmasked(t *testing.T) {
	t.Parallel()
	type signalCase struct {
		ID, Technique, Text, Secret string
	}
	cases := readCorpus[signalCase](t, "../chatprep/testdata/signals.jsonl")
	require.GreaterOrEqual(t, len(cases), 200)
	checked := 0
	for _, c := range cases {
		if c.Secret == "" {
			continue
		}
		sink := &outputSink{}
		rev, err := New(Config{}, parrot{}, sink, nil, nil)
		require.NoError(t, err)
		v, err := rev.Review(context.Background(), event("leak-"+c.ID), chat("buyer: 안녕하세요", "seller: "+c.Text), 1)
		require.NoError(t, err, c.ID)
		require.Equal(t, pipeline.StatusDone, v.Status)
		secret := digitsAndLetters(c.Secret)
		for _, s := range leaving(v, nil, sink) {
			require.NotContains(t, digitsAndLetters(s), secret, "%s (%s): %q left unmasked in %q", c.ID, c.Technique, c.Secret, s)
		}
		checked++
	}
	t.Logf("%d corpus cases reviewed by a parroting model; no secret left unmasked", checked)
}
