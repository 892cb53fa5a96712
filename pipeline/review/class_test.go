package review

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// The class the review's context carries reaches every model call; the
// reviewer's own class (batch here) applies only when it carries none.
func TestReviewCallsRunUnderTheContextsClass(t *testing.T) {
	t.Parallel()
	e := setup(t, envOpts{})
	_, err := e.rev.Review(pipeline.WithClass(t.Context(), pipeline.ClassRealtime), event("r1"), externalPaymentChat, 1)
	require.NoError(t, err)
	got := ttftCounts(t, e)
	require.Positive(t, got["realtime"], "every stage ran as realtime")
	require.Zero(t, got["batch"], "no call fell back to the reviewer's class")

	_, err = e.rev.Review(t.Context(), event("r2"), externalPaymentChat, 1)
	require.NoError(t, err)
	require.Positive(t, ttftCounts(t, e)["batch"], "no class in the context: the reviewer's")
}

// ttftCounts sums the class TTFT histogram's observations by class.
func ttftCounts(t *testing.T, e *env) map[string]uint64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	require.NoError(t, err)
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "chatguard_llm_class_ttft_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "class" {
					out[l.GetValue()] += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return out
}
