package trigger

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/internal/spantest"
	"github.com/chatguard/chatguard/pipeline"
)

// TestEachFiredWindowStartsATrace fires two rooms' windows with every
// trace sampled: each review event carries the traceparent of a trace of
// its own, rooted at the window's span, which names no room.
func TestEachFiredWindowStartsATrace(t *testing.T) {
	rec := recorder(t)
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

// TestWindowSpanLinksTheChatEventsTraces sends one room's chat events as
// a chat service that traces them would (two sampled traceparents, one
// unsampled, one sent twice) and a malformed event in a trace: the
// window's span links the two sampled events' spans, once each, and the
// malformed event's DLQ copy keeps its traceparent.
func TestWindowSpanLinksTheChatEventsTraces(t *testing.T) {
	rec := recorder(t)
	h := setup(t)
	tp := func(span byte, flags string) map[string]pipeline.Attribute {
		return map[string]pipeline.Attribute{pipeline.TraceParentAttribute: pipeline.StringAttribute(
			fmt.Sprintf("00-0af7651916cd43dd8448eb211c80319c-%016x-%s", span, flags))}
	}
	ctx := context.Background()
	require.NoError(t, h.events.Send(ctx, []pipeline.OutMessage{
		{Body: chatBody("linked-room", "m1", t0), Attributes: tp(1, "01")},
		{Body: chatBody("linked-room", "m2", t0.Add(time.Second)), Attributes: tp(2, "01")},
		{Body: chatBody("linked-room", "m2", t0.Add(time.Second)), Attributes: tp(2, "01")},
		{Body: chatBody("linked-room", "m3", t0.Add(2*time.Second)), Attributes: tp(3, "00")},
		{Body: []byte("not json"), Attributes: tp(4, "01")},
	}))
	h.drain(t)
	h.clk.Advance(time.Minute)
	require.Equal(t, 1, h.e.FireDue(ctx))

	var fires []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "window fire" && len(s.Links()) > 0 {
			fires = append(fires, s)
		}
	}
	require.Len(t, fires, 1)
	var linked []uint64
	for _, l := range fires[0].Links() {
		require.Equal(t, "0af7651916cd43dd8448eb211c80319c", l.SpanContext.TraceID().String())
		id := l.SpanContext.SpanID()
		linked = append(linked, uint64(id[7]))
	}
	require.ElementsMatch(t, []uint64{1, 2}, linked, "the sampled events' spans, once each")
	require.NotEqual(t, "0af7651916cd43dd8448eb211c80319c", fires[0].SpanContext().TraceID().String(), "the window starts a trace of its own")

	dead := h.dlq.Messages()
	require.Len(t, dead, 1)
	require.Equal(t, tp(4, "01")[pipeline.TraceParentAttribute], dead[0].Attributes[pipeline.TraceParentAttribute], "the DLQ copy keeps the trace")
	require.Contains(t, dead[0].Attributes[AttrErrorReason].Value, "invalid chat event")
}

// recorder records the spans the test ends, every trace sampled.
func recorder(t *testing.T) *tracetest.SpanRecorder {
	return spantest.Recorder(t, sdktrace.AlwaysSample())
}
