package reviewjob

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// The verdict's outbox row keeps the job's trace context, so that the
// relay's send carries the review's trace on to the consumer whenever it
// happens; a job outside a trace writes none.
func TestTheVerdictEventKeepsTheJobsTrace(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xc, 1}, SpanID: trace.SpanID{0xd, 2}, TraceFlags: trace.FlagsSampled})
	out := r.h.Handle(trace.ContextWithSpanContext(context.Background(), sc), msg(r.body(t), 1, 5))
	require.Equal(t, jobloop.Delete, out.Action)
	ms := r.store.OutboxMessages()
	require.Len(t, ms, 1)
	got := pipeline.TraceContext(ms[0].Attributes)
	require.Equal(t, sc.TraceID(), got.TraceID())
	require.Equal(t, sc.SpanID(), got.SpanID())

	r2 := setupReview(t)
	require.Equal(t, jobloop.Delete, r2.h.Handle(context.Background(), msg(r2.body(t), 1, 5)).Action)
	require.NotContains(t, r2.store.OutboxMessages()[0].Attributes, pipeline.TraceParentAttribute)
}
