// Package spantest records, for a test, the spans its code ends through
// OpenTelemetry's global tracer provider.
//
// A tracer taken from the global provider before one is set delegates to
// the first provider set afterwards, and to no later one: a package-level
// tracer is bound for the whole test binary. So a test cannot install a
// provider of its own (a second test, or the same one under -count=N,
// would record nothing). This package installs the binary's one provider
// once and gives each test a recorder and a sampler of its own on it for
// the test's duration.
package spantest

import (
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

var (
	once     sync.Once
	provider *sdktrace.TracerProvider
	current  atomic.Pointer[sdktrace.Sampler]
)

// Recorder returns a recorder of the spans ended from now until t ends,
// sampled by s meanwhile. Tests that record spans must not run in
// parallel with each other: they share the provider and its sampler.
func Recorder(t testing.TB, s sdktrace.Sampler) *tracetest.SpanRecorder {
	t.Helper()
	once.Do(func() {
		provider = sdktrace.NewTracerProvider(sdktrace.WithSampler(switched{}))
		otel.SetTracerProvider(provider)
	})
	rec := tracetest.NewSpanRecorder()
	current.Store(&s)
	provider.RegisterSpanProcessor(rec)
	t.Cleanup(func() {
		provider.UnregisterSpanProcessor(rec)
		never := sdktrace.NeverSample()
		current.Store(&never)
	})
	return rec
}

// Provider is the binary's one provider (installed by the first Recorder
// call; nil before it), for a test that needs a tracer of its own.
func Provider() *sdktrace.TracerProvider { return provider }

// switched samples as the running test's sampler says; nothing between
// tests.
type switched struct{}

func (switched) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if s := current.Load(); s != nil {
		return (*s).ShouldSample(p)
	}
	return sdktrace.NeverSample().ShouldSample(p)
}

func (switched) Description() string { return "spantest" }
