package pipeline

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TraceParentAttribute is the message attribute that carries the W3C trace
// context (traceparent, and tracestate when there is one) of the span that
// sent a message, so that the receiving side continues its trace across the
// queue. The queue adapters add it to every message sent with a context
// holding a span.
const TraceParentAttribute = "traceparent"

// traceStateAttribute carries the W3C tracestate beside it.
const traceStateAttribute = "tracestate"

// attrCarrier reads and writes a message's attributes as W3C headers.
type attrCarrier map[string]Attribute

func (c attrCarrier) Get(k string) string { return c[k].Value }
func (c attrCarrier) Set(k, v string) {
	if k == TraceParentAttribute || k == traceStateAttribute {
		c[k] = StringAttribute(v)
	}
}
func (c attrCarrier) Keys() []string { return []string{TraceParentAttribute, traceStateAttribute} }

// WithTraceContext returns attrs with the trace context of ctx's span added
// (a copy: attrs is not changed), or attrs itself when ctx holds no valid
// span or attrs already carries a traceparent (a message passed on keeps
// the trace it was sent in).
func WithTraceContext(ctx context.Context, attrs map[string]Attribute) map[string]Attribute {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return attrs
	}
	if _, ok := attrs[TraceParentAttribute]; ok {
		return attrs
	}
	out := make(map[string]Attribute, len(attrs)+2)
	for k, a := range attrs {
		out[k] = a
	}
	// W3C's format whatever the process's global propagator: the
	// attribute is named for it.
	propagation.TraceContext{}.Inject(ctx, attrCarrier(out))
	return out
}

// TraceContext returns the remote span context a message's attributes
// carry (not valid when they carry none or a malformed one).
func TraceContext(attrs map[string]Attribute) trace.SpanContext {
	if _, ok := attrs[TraceParentAttribute]; !ok {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), attrCarrier(attrs)))
}

// ContextWithTrace returns ctx continuing the trace a message's
// attributes carry: spans started from it are children of the sender's.
func ContextWithTrace(ctx context.Context, attrs map[string]Attribute) context.Context {
	sc := TraceContext(attrs)
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// tracingOn records whether this process exports traces.
var tracingOn atomic.Bool

// EnableTracing records that this process exports traces (the binaries'
// telemetry set-up calls it when an OTLP endpoint is set), so that the
// adapters add their per-call instrumentation (Redis commands, MySQL
// calls) only then: with tracing off they cost nothing.
func EnableTracing() { tracingOn.Store(true) }

// TracingEnabled reports whether EnableTracing was called.
func TracingEnabled() bool { return tracingOn.Load() }
