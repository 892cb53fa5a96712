package jobloop

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/internal/spantest"
	"github.com/chatguard/chatguard/pipeline"
)

// TestJobContinuesTheSendersTrace sends a message carrying a traceparent:
// the loop's job span is a child of the sender's span in the same trace,
// the handler runs inside it, and the span says how the job was settled.
func TestJobContinuesTheSendersTrace(t *testing.T) {
	rec := spantest.Recorder(t, sdktrace.ParentBased(sdktrace.NeverSample()))
	got := make(chan trace.SpanContext, 1)
	h := HandlerFunc(func(ctx context.Context, m Message) Outcome {
		got <- trace.SpanContextFromContext(ctx)
		return Outcome{Action: Delete, Label: "done"}
	})
	hs, stop := setup(t, testConfig(), h, nil)
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	require.NoError(t, hs.q.Send(context.Background(), []pipeline.OutMessage{{Body: []byte("m"),
		Attributes: map[string]pipeline.Attribute{pipeline.TraceParentAttribute: pipeline.StringAttribute(parent)}}}))
	sc := <-got
	eventually(t, func() bool { return hs.held() == 0 }, "deleted")
	require.NoError(t, stop())
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", sc.TraceID().String(), "the job continues the sender's trace")
	require.True(t, sc.IsSampled(), "the sender's sampling decision is followed")
	var job sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanContext().SpanID() == sc.SpanID() {
			job = s
		}
	}
	require.NotNil(t, job, "the job's span is exported")
	require.Equal(t, "b7ad6b7169203331", job.Parent().SpanID().String())
	require.Equal(t, trace.SpanKindConsumer, job.SpanKind())
	outcome := ""
	for _, kv := range job.Attributes() {
		if kv.Key == "chatguard.job.outcome" {
			outcome = kv.Value.AsString()
		}
	}
	require.Equal(t, "done", outcome)
}
