package review

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/pipeline"
)

// tracer names the review's spans: one per stage, the parent of the
// stage's model attempts (pipeline/llm).
var tracer = otel.Tracer("github.com/chatguard/chatguard/pipeline/review")

// startStageSpan starts a stage's span, or none when the review's trace is
// not sampled.
func startStageSpan(ctx context.Context, stage pipeline.StageName) (context.Context, trace.Span) {
	if parent := trace.SpanFromContext(ctx); parent.SpanContext().IsValid() && !parent.IsRecording() {
		return ctx, parent
	}
	return tracer.Start(ctx, "stage "+string(stage), trace.WithAttributes(attribute.String("chatguard.llm.stage", string(stage))))
}

// endStageSpan records the stage's result (pool, attempts, tokens and
// cost; never its output, which is model output about a chat) and ends
// the span. A failed stage's error is not written out: its text can quote
// the model's answer.
func endStageSpan(span trace.Span, res *pipeline.StageResult, err error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(
		attribute.String("chatguard.llm.pool", string(res.Pool)),
		attribute.Int("chatguard.llm.attempts", res.Attempts),
		attribute.Int("gen_ai.usage.input_tokens", res.TokensIn),
		attribute.Int("gen_ai.usage.output_tokens", res.TokensOut),
		attribute.Float64("chatguard.llm.cost_usd", res.CostUSD),
	)
	if err != nil {
		span.SetStatus(codes.Error, "stage failed")
		span.SetAttributes(attribute.String("error.type", "stage_failed"))
	}
	span.End()
}
