package reviewjob

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// The event's source sets the class every model call of its review runs
// under: realtime for source realtime, batch for the rest.
func TestReviewCarriesTheEventsClass(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		source pipeline.ReviewSource
		want   pipeline.Class
	}{{"realtime", pipeline.ClassRealtime}, {"", pipeline.ClassBatch}, {"sweep", pipeline.ClassBatch}, {"batch", pipeline.ClassBatch}} {
		r := setupReview(t)
		got := make(chan pipeline.Class, 1)
		r.rev.review = func(ctx context.Context, _ pipeline.ReviewEvent, _ []pipeline.ChatMessage, _ int) (pipeline.Verdict, error) {
			got <- pipeline.ClassFrom(ctx, pipeline.ClassShadow)
			return abusive(), nil
		}
		out := r.h.Handle(context.Background(), msg(r.body(t, func(ev *pipeline.ReviewEvent) { ev.Source = tc.source }), 1, 5))
		require.Equal(t, jobloop.Delete, out.Action)
		require.Equal(t, tc.want, <-got, "source %q", tc.source)
	}
}
