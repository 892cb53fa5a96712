package consumer_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/consumer"
	"github.com/chatguard/chatguard/internal/spantest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

// TestLakeWriteJoinsTheSampledTraces sends three events, two from sampled
// traces and one from an unsampled one: each object's write is a span in
// the trace of a sampled message it holds, linking the other sampled
// messages it holds (a fan-in), and the unsampled trace appears nowhere.
func TestLakeWriteJoinsTheSampledTraces(t *testing.T) {
	rec := spantest.Recorder(t, sdktrace.ParentBased(sdktrace.NeverSample()))
	e := setup(t, func(c *consumer.Config) { c.FlushAge = time.Hour })
	parents := []string{
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-1af7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01",
		"00-2af7651916cd43dd8448eb211c80319c-d7ad6b7169203331-00",
	}
	var msgs []pipeline.OutMessage
	for i, ev := range s3laketest.Events(3, 5, t0, 1) {
		msgs = append(msgs, pipeline.OutMessage{Body: s3laketest.Body(t, ev),
			Attributes: map[string]pipeline.Attribute{pipeline.TraceParentAttribute: pipeline.StringAttribute(parents[i])}})
	}
	require.NoError(t, e.q.Send(context.Background(), msgs))
	waitFor(t, "every message to be received", func() bool { return received(e.q) == 3 })
	require.NoError(t, e.stop(), "the shutdown flushes every partition")

	joined := map[trace.TraceID]bool{}
	writes := 0
	for _, s := range rec.Ended() {
		if s.Name() != "lake write" {
			continue
		}
		writes++
		require.True(t, s.Parent().IsRemote(), "a write is a child of a message's span")
		joined[s.Parent().TraceID()] = true
		require.Equal(t, s.Parent().TraceID(), s.SpanContext().TraceID())
		for _, l := range s.Links() {
			joined[l.SpanContext.TraceID()] = true
		}
	}
	require.Positive(t, writes)
	want := map[trace.TraceID]bool{}
	for _, p := range parents[:2] {
		want[pipeline.TraceContext(map[string]pipeline.Attribute{pipeline.TraceParentAttribute: pipeline.StringAttribute(p)}).TraceID()] = true
	}
	require.Equal(t, want, joined, "both sampled traces reach their lake write; the unsampled one does not")
}
