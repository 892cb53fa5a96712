package stages

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// TestStagePromptsShareTheChatPrefix pins the layout that lets a serving
// engine's prefix cache reuse a review's chat across its stages: one
// system prompt for all, and every user prompt identical up to the end of
// the chat and its rule signals.
func TestStagePromptsShareTheChatPrefix(t *testing.T) {
	t.Parallel()
	in := sampleInput(t)
	shared := ""
	for i, st := range pipeline.Stages {
		require.Equal(t, SystemPrompt(pipeline.StageTriage), SystemPrompt(st))
		sin := in
		if st == pipeline.StageTriage {
			sin.Findings = nil // triage has no earlier findings
		}
		if st != pipeline.StageVision {
			sin.ImageIDs = nil
		}
		user, err := UserPrompt(st, sin)
		require.NoError(t, err)
		end := strings.Index(user, "</rule_signals>") + len("</rule_signals>")
		require.Greater(t, end, strings.Index(user, TranscriptClose))
		if i == 0 {
			shared = user[:end]
			continue
		}
		require.Equal(t, shared, user[:end], "%s diverges from triage before the end of the chat", st)
	}
}

func TestUserPromptRefusesUnknownStage(t *testing.T) {
	t.Parallel()
	_, err := UserPrompt("summarize", PromptInput{})
	require.ErrorContains(t, err, "summarize")
}
