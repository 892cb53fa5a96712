// Package telemetry sets up a binary's OpenTelemetry tracing in one place:
// the SDK's tracer provider, an OTLP/HTTP exporter and the W3C propagators,
// configured by the standard OTEL_* environment variables rather than
// CHATGUARD_* flags (the one exception to that convention: every trace
// store, collector and platform team already speaks them; docs/tracing.md).
//
// Tracing is off unless an OTLP endpoint is set: the global tracer provider
// stays OpenTelemetry's no-op, so instrumented code costs a context lookup
// and no allocation. When on, the default sampler is parent-based with a
// 1 % ratio for new traces, so a message that arrives with a sampled
// traceparent is traced wherever it goes, and the default stays cheap.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"

	"github.com/chatguard/chatguard/pipeline"
)

// DefaultRatio is the share of new traces sampled when OTEL_TRACES_SAMPLER
// is not set: a trace started by a message that carries no sampled parent.
const DefaultRatio = 0.01

// shutdownTimeout bounds the flush of the spans still buffered at exit.
const shutdownTimeout = 5 * time.Second

// Enabled reports whether getenv sets an OTLP endpoint for traces and does
// not switch the SDK or the traces exporter off.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// Setup installs the global tracer provider and propagator for the binary
// called service (its service.name; OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES add to or override it) when Enabled, and
// returns the function that flushes and stops it. Off, it installs only
// the W3C propagators (a traceparent received is passed on unchanged) and
// returns a no-op.
func Setup(ctx context.Context, service string, getenv func(string) string) (shutdown func(), err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if !Enabled(getenv) {
		return func() {}, nil
	}
	tp, err := NewProvider(ctx, service, getenv)
	if err != nil {
		return nil, err
	}
	otel.SetTracerProvider(tp)
	pipeline.EnableTracing()
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		// A collector that is down at exit loses the last batch: nothing
		// to do about it but not hang the shutdown.
		_ = tp.Shutdown(sctx)
	}, nil
}

// NewProvider builds the tracer provider Setup installs: the OTLP/HTTP
// exporter (OTEL_EXPORTER_OTLP_* read by the exporter itself), batched,
// and the default sampler unless OTEL_TRACES_SAMPLER names one.
func NewProvider(ctx context.Context, service string, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	if p := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); p != "" && p != "http/protobuf" {
		return nil, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL %q: only http/protobuf is built in", p)
	}
	if p := getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" && p != "http/protobuf" && getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") == "" {
		return nil, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_PROTOCOL %q: only http/protobuf is built in", p)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("telemetry: otlp exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if getenv("OTEL_TRACES_SAMPLER") == "" {
		opts = append(opts, sdktrace.WithSampler(DefaultSampler()))
	}
	return sdktrace.NewTracerProvider(opts...), nil
}

// DefaultSampler follows the parent's decision and samples DefaultRatio of
// the traces it starts.
func DefaultSampler() sdktrace.Sampler {
	return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(DefaultRatio))
}

// LogHandler wraps h so that a record logged with a context holding a
// sampled span carries trace_id and span_id, and a log line leads to its
// trace.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && sc.IsSampled() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(as)}
}

func (h logHandler) WithGroup(name string) slog.Handler {
	return logHandler{h.Handler.WithGroup(name)}
}

// ChildSpansOnly returns tp restricted to spans under a recording parent:
// a tracer of it starts nothing (a no-op span, ctx unchanged) when ctx
// holds no sampled span. Instrumentation that would otherwise start a
// trace of its own for every background call (a Redis poll, a lease
// renewal) adds to the traces that asked for it, and to no other.
func ChildSpansOnly(tp trace.TracerProvider) trace.TracerProvider { return childOnlyProvider{tp: tp} }

type childOnlyProvider struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

func (p childOnlyProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childOnlyTracer{t: p.tp.Tracer(name, opts...)}
}

type childOnlyTracer struct {
	embedded.Tracer
	t trace.Tracer
}

// noSpan records nothing; ending it ends nothing.
var noSpan = trace.SpanFromContext(context.Background())

func (t childOnlyTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, noSpan
	}
	return t.t.Start(ctx, name, opts...)
}
