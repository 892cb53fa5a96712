package trigger

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/pipeline"
)

// TestEachFiredWindowStartsATrace fires two rooms' windows with every
// trace sampled: each review event carries the traceparent of a trace of
// its own, rooted at the window's span, which names no room.
// (The only test here that installs a global tracer provider.)
func TestEachFiredWindowStartsATrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample())))
	h := setup(t)
	for r := range 2 {
		h.events.Enqueue(chatBody(fmt.Sprintf("traced-room-%d", r), "m1", t0))
	}
	h.drain(t)
	h.clk.Advance(time.Minute)
	require.Equal(t, 2, h.e.FireDue(context.Background()))

	spans := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if s.Name() == "window fire" {
			spans[s.SpanContext().SpanID()] = s
		}
	}
	traces := map[trace.TraceID]bool{}
	for _, m := range h.reviews.Messages() {
		sc := pipeline.TraceContext(m.Attributes)
		require.True(t, sc.IsValid(), "a fired window's review event carries a traceparent")
		require.True(t, sc.IsSampled())
		traces[sc.TraceID()] = true
		s, ok := spans[sc.SpanID()]
		require.True(t, ok, "the traceparent is the window span's")
		require.False(t, s.Parent().IsValid(), "the window's span is the trace's root")
		require.Equal(t, trace.SpanKindProducer, s.SpanKind())
		for _, kv := range s.Attributes() {
			require.False(t, strings.Contains(kv.Value.String(), "traced-room"), "attribute %s names the room", kv.Key)
		}
	}
	require.Len(t, traces, 2, "one trace per window")
}
