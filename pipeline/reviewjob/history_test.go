package reviewjob

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// TestVerdictEventCarriesTheRecordedHistory: the verdict event carries the
// account history the first stage's stored output records, and the copy a
// redelivery sends again from the stored verdict carries the same; a
// verdict whose stages were shown none sends none.
func TestVerdictEventCarriesTheRecordedHistory(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	r.rev.review = func(context.Context, pipeline.ReviewEvent, []pipeline.ChatMessage, int) (pipeline.Verdict, error) {
		v := abusive()
		v.Stages[0].Output = []byte(`{"risk":"high","account_history":{"status":"ok","days":30,"lines":[{"role":"seller","label":"abusive","category":"external_payment","rooms":3}]}}`)
		return v, nil
	}
	require.Equal(t, "done", r.h.Handle(context.Background(), msg(r.body(t), 1, 5)).Label)
	r.clk.Advance(2 * time.Hour)
	require.Equal(t, "duplicate", r.h.Handle(context.Background(), msg(r.body(t), 2, 5)).Label)
	evs := append(r.outboxEvents(t), r.sink.events()...)
	require.Len(t, evs, 2)
	want := &pipeline.HistorySeen{Status: pipeline.HistoryOK, Days: 30, Lines: []pipeline.HistoryCount{
		{Role: pipeline.RoleSeller, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Rooms: 3},
	}}
	for _, ev := range evs {
		require.Equal(t, want, ev.Payload.(pipeline.VerdictEvent).AccountHistory)
	}

	none := setupReview(t)
	require.Equal(t, "done", none.h.Handle(context.Background(), msg(none.body(t), 1, 5)).Label)
	require.Nil(t, none.outboxEvents(t)[0].Payload.(pipeline.VerdictEvent).AccountHistory)
}
