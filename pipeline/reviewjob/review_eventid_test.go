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

// A redelivery of a window that a moderator re-reviewed is acknowledged
// without a model call, and the verdict event it sends again is the
// current revision's: its revision and an event id of its own, so the
// lake keeps it beside revision 1's.
func TestDuplicateOfAReReviewedWindowSendsTheCurrentRevision(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	require.Equal(t, "done", r.h.Handle(context.Background(), msg(r.body(t), 1, 5)).Label)
	v, err := r.store.Get(context.Background(), r.key())
	require.NoError(t, err)
	v.RunID, v.Label = "ondemand:mod-1:x", pipeline.LabelSuspicious
	rev, committed, err := r.store.Revise(context.Background(), v)
	require.NoError(t, err)
	require.True(t, committed)
	require.Equal(t, 2, rev)

	require.Equal(t, "duplicate", r.h.Handle(context.Background(), msg(r.body(t), 2, 5)).Label)
	require.Equal(t, int32(1), r.rev.calls.Load(), "no model call for the redelivery")
	// Revision 1's event went through the outbox with its save; the
	// redelivery sends the stored current revision's again, best effort.
	first := r.outboxEvents(t)
	require.Len(t, first, 1)
	require.Equal(t, pipeline.VerdictEventID(r.key(), pipeline.StatusDone), first[0].EventID)
	require.Zero(t, first[0].Payload.(pipeline.VerdictEvent).Revision, "revision 1 is sent without the field")
	evs := r.sink.events()
	require.Len(t, evs, 1)
	require.Equal(t, pipeline.VerdictRevisionEventID(r.key(), pipeline.StatusDone, 2), evs[0].EventID)
	require.NotEqual(t, first[0].EventID, evs[0].EventID)
	got := evs[0].Payload.(pipeline.VerdictEvent)
	require.Equal(t, 2, got.Revision)
	require.Equal(t, pipeline.LabelSuspicious, got.Label)
}
