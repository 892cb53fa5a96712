package chatapi

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/pipeline"
)

// tracer names the chat-history fetch's spans. They are written here
// rather than by otelhttp: otelhttp records the request's url.full, and
// the path names the room (a raw id never goes on a span).
var tracer = otel.Tracer("github.com/chatguard/chatguard/storage/chatapi")

// startFetchSpan starts the span of one chat-history attempt (kind
// client), or none under an unsampled parent.
func startFetchSpan(ctx context.Context, host string) (context.Context, trace.Span) {
	if parent := trace.SpanFromContext(ctx); parent.SpanContext().IsValid() && !parent.IsRecording() {
		return ctx, parent
	}
	return tracer.Start(ctx, "GET chat history", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("http.request.method", "GET"),
		attribute.String("server.address", host),
	))
}

// endFetchSpan records how many messages came back, or the failure's kind
// (never its text: it can name the room), and ends the span.
func endFetchSpan(span trace.Span, messages int, err error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.Int("chatguard.chatapi.messages", messages))
	if err != nil {
		kind := "retryable"
		if errors.As(err, new(*pipeline.PermanentError)) {
			kind = "permanent"
		}
		span.SetAttributes(attribute.String("error.type", kind))
		span.SetStatus(codes.Error, kind)
	}
	span.End()
}
