package sqs

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/pipeline"
)

// tracer names the spans the review publisher starts.
var tracer = otel.Tracer("github.com/chatguard/chatguard/storage/sqs")

// startPublishSpan starts the root span of one review event's trace (kind
// producer): batch's and the sweep's windows are traced from their
// publishing as the trigger's are from their fire. The room is not named.
func startPublishSpan(ctx context.Context, ev pipeline.ReviewEvent) (context.Context, trace.Span) {
	return tracer.Start(ctx, "review publish", trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		attribute.String("chatguard.review.source", string(ev.Source)),
		attribute.String("chatguard.review.window_start", ev.WindowStart.UTC().Format(time.RFC3339)),
		attribute.String("chatguard.review.window_end", ev.WindowEnd.UTC().Format(time.RFC3339)),
	))
}
