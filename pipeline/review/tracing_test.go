package review

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

var (
	recorderOnce sync.Once
	recorder     *tracetest.SpanRecorder
	testTracer   trace.Tracer
)

// traced installs, once per test binary (the global provider delegates
// once), a provider that samples everything into an in-memory recorder;
// each test reads its own trace's spans.
func traced() (*tracetest.SpanRecorder, trace.Tracer) {
	recorderOnce.Do(func() {
		recorder = tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder), sdktrace.WithSampler(sdktrace.AlwaysSample()))
		otel.SetTracerProvider(tp)
		testTracer = tp.Tracer("test")
	})
	return recorder, testTracer
}

func spansOf(rec *tracetest.SpanRecorder, id trace.TraceID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() == id {
			out = append(out, s)
		}
	}
	return out
}

// TestReviewSpansCarryGenAIAttributesAndNoChatText reviews a chat inside a
// job span, with the primary failing so that the fallback answers: every
// stage is a child of the job, every model attempt a child of its stage
// with the GenAI attributes, and no attribute holds chat text or a
// contact detail.
func TestReviewSpansCarryGenAIAttributesAndNoChatText(t *testing.T) {
	t.Parallel()
	rec, tr := traced()
	e := setup(t, envOpts{})
	e.prim.Configure(t, `{"faults":{"500":1}}`)
	ctx, job := tr.Start(context.Background(), "job")
	_, err := e.rev.Review(ctx, event("t1"), externalPaymentChat, 1)
	require.NoError(t, err)
	job.End()

	spans := spansOf(rec, job.SpanContext().TraceID())
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
	}
	stagesSeen, models := 0, map[string]int{}
	for _, s := range spans {
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
			for _, secret := range []string{"123456-12-123456", "9876-5432", "010-9876", "선입금", "수수료는 제가", "김민수", "국민은행", "t1"} {
				require.NotContains(t, kv.Value.String(), secret, "%s: attribute %s", s.Name(), kv.Key)
			}
		}
		switch {
		case strings.HasPrefix(s.Name(), "stage "):
			stagesSeen++
			require.Equal(t, job.SpanContext().SpanID(), s.Parent().SpanID(), "a stage is a child of the job")
		case strings.HasPrefix(s.Name(), "chat "):
			parent, ok := byID[s.Parent().SpanID()]
			require.True(t, ok, "a model attempt's parent is in the trace")
			require.True(t, strings.HasPrefix(parent.Name(), "stage "), "a model attempt is a child of its stage")
			for _, k := range []string{"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model",
				"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "chatguard.llm.pool", "chatguard.llm.fallback", "chatguard.llm.retry", "chatguard.llm.ttft_seconds"} {
				require.Contains(t, attrs, k, "%s lacks %s", s.Name(), k)
			}
			require.Equal(t, "chat", attrs["gen_ai.operation.name"])
			models[attrs["chatguard.llm.pool"]]++
			if attrs["chatguard.llm.pool"] == "primary" {
				require.Equal(t, "server_error", attrs["error.type"])
				require.Equal(t, "vllm", attrs["gen_ai.provider.name"])
			} else {
				require.Equal(t, "true", attrs["chatguard.llm.fallback"])
				require.Positive(t, len(attrs["gen_ai.usage.output_tokens"]))
			}
		}
	}
	require.Equal(t, 3, stagesSeen, "triage, extract and judge")
	// Each attempt's inference-log event carries that attempt's span, so
	// the consumer's lake write joins the review's trace.
	evs := e.sink.all()
	require.NotEmpty(t, evs)
	for _, ev := range evs {
		s, ok := byID[ev.Trace.SpanID()]
		require.True(t, ok, "event %s carries a span of the review's trace", ev.EventID)
		require.True(t, strings.HasPrefix(s.Name(), "chat "), "event %s carries its model attempt's span, not %q", ev.EventID, s.Name())
	}

	// The router's latency histogram leads to the trace.
	exemplars := 0
	mfs, err := e.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "chatguard_llm_latency_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, b := range m.GetHistogram().GetBucket() {
				for _, l := range b.GetExemplar().GetLabel() {
					if l.GetName() == "trace_id" && l.GetValue() == job.SpanContext().TraceID().String() {
						exemplars++
					}
				}
			}
		}
	}
	require.Positive(t, exemplars, "a latency bucket carries the review's trace as its exemplar")
	require.Positive(t, models["primary"], "the failing primary's attempts are spans too")
	require.Positive(t, models["fallback"])
}
