package consumer

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// tracer names the consumer's spans.
var tracer = otel.Tracer("github.com/chatguard/chatguard/consumer")

// noSpan is a span that records nothing.
var noSpan = trace.SpanFromContext(context.Background())

// maxFlushLinks bounds the links of one object's span (the SDK's default
// limit is 128; an object holds up to thousands of events).
const maxFlushLinks = 128

// startFlushSpan starts the span of one object's write. An object is
// written for many messages (a fan-in): the span is a child of the first
// message whose trace was sampled, so that trace reaches its lake write and
// the parent-based sampler keeps the span, and it links the other sampled
// messages' spans. Without a sampled message there is no span: a write
// that no review trace asked for is not worth a trace of its own.
func startFlushSpan(ctx context.Context, b *batch) (context.Context, trace.Span) {
	var parent trace.SpanContext
	var links []trace.Link
	for _, it := range b.items {
		if !it.trace.IsSampled() {
			continue
		}
		if !parent.IsValid() {
			parent = it.trace
			continue
		}
		if len(links) < maxFlushLinks {
			links = append(links, trace.Link{SpanContext: it.trace})
		}
	}
	if !parent.IsValid() {
		return ctx, noSpan
	}
	return tracer.Start(trace.ContextWithRemoteSpanContext(ctx, parent), "lake write", trace.WithLinks(links...),
		trace.WithAttributes(
			attribute.String("chatguard.lake.event_type", string(b.key.Type)),
			attribute.Int("chatguard.lake.events", len(b.items)),
		))
}
