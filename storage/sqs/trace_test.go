package sqs

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/internal/spantest"
	"github.com/chatguard/chatguard/pipeline"
)

// TestSendCarriesTheTraceContext checks that a message sent inside a span
// carries its W3C traceparent as a String attribute (Send and a Stream
// alike), that a message passed on keeps the traceparent it has, and that
// one sent outside a trace carries none.
func TestSendCarriesTheTraceContext(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	q, _ := testQueue(t, api, nil)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xa, 1}, SpanID: trace.SpanID{0xb, 2}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	kept := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	caller := map[string]pipeline.Attribute{"run_id": pipeline.StringAttribute("r")}
	require.NoError(t, q.Send(ctx, []pipeline.OutMessage{
		{Body: []byte("traced"), Attributes: caller},
		{Body: []byte("passed-on"), Attributes: map[string]pipeline.Attribute{pipeline.TraceParentAttribute: pipeline.StringAttribute(kept)}},
	}))
	require.NoError(t, q.Send(context.Background(), []pipeline.OutMessage{{Body: []byte("untraced")}}))
	st := q.NewStream(StreamConfig{}, nil)
	require.NoError(t, st.Put(ctx, pipeline.OutMessage{Body: []byte("streamed")}))
	require.NoError(t, st.Close(context.Background()))

	require.Equal(t, want, aws.ToString(api.attrs["traced"][pipeline.TraceParentAttribute].StringValue))
	require.Equal(t, "String", aws.ToString(api.attrs["traced"][pipeline.TraceParentAttribute].DataType))
	require.Equal(t, "r", aws.ToString(api.attrs["traced"]["run_id"].StringValue))
	require.NotContains(t, caller, pipeline.TraceParentAttribute, "the caller's map is not changed")
	require.Equal(t, kept, aws.ToString(api.attrs["passed-on"][pipeline.TraceParentAttribute].StringValue))
	require.NotContains(t, api.attrs["untraced"], pipeline.TraceParentAttribute)
	require.Equal(t, want, aws.ToString(api.attrs["streamed"][pipeline.TraceParentAttribute].StringValue))

	// The receiving side continues the sender's trace.
	got := pipeline.TraceContext(map[string]pipeline.Attribute{pipeline.TraceParentAttribute: pipeline.StringAttribute(want)})
	require.Equal(t, sc.TraceID(), got.TraceID())
	require.Equal(t, sc.SpanID(), got.SpanID())
	require.True(t, got.IsRemote())
	require.False(t, pipeline.TraceContext(map[string]pipeline.Attribute{pipeline.TraceParentAttribute: pipeline.StringAttribute("00-garbage")}).IsValid())
}

// TestReviewPublisherStartsATracePerEvent publishes review events with
// every trace sampled: each message carries the traceparent of a root
// span of its own.
func TestReviewPublisherStartsATracePerEvent(t *testing.T) {
	spantest.Recorder(t, sdktrace.AlwaysSample())
	api := newScriptAPI()
	p := reviewPublisher(t, api, nil)
	require.NoError(t, p.Run(context.Background(), reviewEvents(12)))
	require.Len(t, api.accepted, 12)
	traces := map[trace.TraceID]bool{}
	for body := range api.accepted {
		tp := aws.ToString(api.attrs[body][pipeline.TraceParentAttribute].StringValue)
		sc := pipeline.TraceContext(map[string]pipeline.Attribute{pipeline.TraceParentAttribute: pipeline.StringAttribute(tp)})
		require.True(t, sc.IsValid(), "every review event carries a traceparent")
		require.True(t, sc.IsSampled())
		traces[sc.TraceID()] = true
	}
	require.Len(t, traces, 12, "one trace per review event")
}

// TestLakeEventsCarryTheirTrace publishes a lake event produced inside a
// span and one produced outside any: the first message carries the
// event's traceparent (not the publisher's, which has no span), the
// second none, and neither body holds the trace.
func TestLakeEventsCarryTheirTrace(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	p := lakePublisher(t, api, nil)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xc, 3}, SpanID: trace.SpanID{0xd, 4}, TraceFlags: trace.FlagsSampled})
	traced, untraced := lakeEvent(1), lakeEvent(2)
	traced.Trace = sc
	require.True(t, p.Publish(traced))
	require.True(t, p.Publish(untraced))
	require.Eventually(t, func() bool { return api.sent() == 2 }, 5*time.Second, 5*time.Millisecond)
	api.mu.Lock()
	defer api.mu.Unlock()
	seen := 0
	for body, attrs := range api.attrs {
		var ev pipeline.LakeEvent
		require.NoError(t, json.Unmarshal([]byte(body), &ev))
		require.NotContains(t, body, sc.TraceID().String(), "the trace travels as an attribute, not in the body")
		switch ev.EventID {
		case traced.EventID:
			seen++
			require.Equal(t, "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01", aws.ToString(attrs[pipeline.TraceParentAttribute].StringValue))
		case untraced.EventID:
			seen++
			require.NotContains(t, attrs, pipeline.TraceParentAttribute)
		}
	}
	require.Equal(t, 2, seen)
}
