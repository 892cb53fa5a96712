package reviewjob

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// A review recorded done twice (a second pod, a redelivery racing the first
// delete) emits one verdict event id, derived from the key and the status.
func TestVerdictEventIDIsDerivedFromKeyAndStatus(t *testing.T) {
	t.Parallel()
	var ids []string
	for range 2 {
		r := setupReview(t)
		out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
		require.Equal(t, "done", out.Label)
		evs := r.outboxEvents(t)
		require.Len(t, evs, 1)
		require.Equal(t, pipeline.VerdictEventID(r.key(), pipeline.StatusDone), evs[0].EventID)
		ids = append(ids, evs[0].EventID)
	}
	require.Equal(t, ids[0], ids[1])
}
