package review

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// A review run again (a redelivery, a second pod) emits the same event
// ids, so the lake's _dedup views keep one row per stage attempt.
func TestRetriedReviewEmitsTheSameEventIDs(t *testing.T) {
	t.Parallel()
	e := setup(t, envOpts{})
	ids := func(receiveCount int) []string {
		before := len(e.sink.all())
		_, err := e.rev.Review(t.Context(), event("r-retried"), externalPaymentChat, receiveCount)
		require.NoError(t, err)
		var out []string
		for _, ev := range e.sink.all()[before:] {
			p := ev.Payload.(pipeline.InferenceLog)
			require.Equal(t, pipeline.InferenceLogEventID(event("r-retried").Key(e.rev.PipelineVersion()), p.Stage, p.Attempt), ev.EventID)
			out = append(out, ev.EventID)
		}
		return out
	}
	first := ids(1)
	require.NotEmpty(t, first)
	require.ElementsMatch(t, first, ids(2), "a retry emits the ids of the first run")

	_, err := e.rev.Review(t.Context(), event("r-other"), externalPaymentChat, 1)
	require.NoError(t, err)
	for _, ev := range e.sink.all()[2*len(first):] {
		require.NotContains(t, first, ev.EventID, "another room has ids of its own")
	}
}
