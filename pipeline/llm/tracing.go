package llm

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/pipeline"
)

// tracer names the router's spans: one per model attempt, with the
// OpenTelemetry GenAI semantic conventions' attributes.
var tracer = otel.Tracer("github.com/chatguard/chatguard/pipeline/llm")

// providerName is gen_ai.provider.name for a pool: the self-hosted pool is
// a vLLM server, the fallback an OpenAI-compatible managed API.
func providerName(pool pipeline.Pool) string {
	if pool == pipeline.PoolPrimary {
		return "vllm"
	}
	return "openai"
}

// startAttemptSpan starts the span of one model call. Nothing of the
// request's text goes on it: the prompt and the answer are chat text and
// model output.
func startAttemptSpan(ctx context.Context, p *pool, req *Request, n int, repair bool) (context.Context, trace.Span) {
	if parent := trace.SpanFromContext(ctx); parent.SpanContext().IsValid() && !parent.IsRecording() {
		// The caller's trace is not sampled: a child would not be
		// either, so skip building its attributes.
		return ctx, parent
	}
	return tracer.Start(ctx, "chat "+p.cfg.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", providerName(p.cfg.Name)),
		attribute.String("gen_ai.request.model", p.cfg.Model),
		attribute.Int("gen_ai.request.max_tokens", req.MaxTokens),
		attribute.String("chatguard.llm.stage", string(req.Stage)),
		attribute.String("chatguard.llm.pool", string(p.cfg.Name)),
		attribute.String("chatguard.llm.class", req.Class.String()),
		attribute.Int("chatguard.llm.attempt", n),
		attribute.Bool("chatguard.llm.retry", n > 1),
		attribute.Bool("chatguard.llm.repair", repair),
		attribute.Bool("chatguard.llm.fallback", p.cfg.Name == pipeline.PoolFallback),
	))
}

// endAttemptSpan records what the attempt reported and ends its span. The
// error is named by the attempt's outcome (a fixed set), never by its
// text, which can quote the server's answer.
func endAttemptSpan(span trace.Span, a *Attempt) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(
		attribute.String("gen_ai.response.model", cmpOr(a.responseModel, a.Model)),
		attribute.Int("gen_ai.usage.input_tokens", a.TokensIn),
		attribute.Int("gen_ai.usage.output_tokens", a.TokensOut),
		attribute.Int("chatguard.llm.usage.cached_tokens", a.TokensCached),
		attribute.Float64("chatguard.llm.ttft_seconds", a.TTFT.Seconds()),
		attribute.Float64("chatguard.llm.cost_usd", a.CostUSD),
		attribute.String("chatguard.llm.outcome", a.Outcome),
	)
	if a.Outcome != OutcomeOK {
		span.SetAttributes(attribute.String("error.type", a.Outcome))
		if !errors.Is(a.Err, context.Canceled) {
			span.SetStatus(codes.Error, a.Outcome)
		}
	}
	span.End()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// observeTraced observes v on h with the trace of ctx's span as an
// exemplar when that trace is sampled, so a latency bucket leads to a
// trace; otherwise (tracing off, unsampled) it is a plain Observe.
func observeTraced(ctx context.Context, h prometheus.Observer, v float64) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		if eo, ok := h.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": sc.TraceID().String()})
			return
		}
	}
	h.Observe(v)
}
