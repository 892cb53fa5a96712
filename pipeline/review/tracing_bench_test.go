package review

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The sampling modes BenchmarkReviewTracing compares: no SDK at all
// (tracing off, the default without an endpoint), the default sampler
// (parent-based, 1 % of roots) and every review sampled.
var benchSamplers = map[string]sdktrace.Sampler{
	"default": sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01)),
	"all":     sdktrace.AlwaysSample(),
}

var benchMode struct {
	once sync.Once
	mode string
}

// installBenchTracing sets the process's tracer provider for mode, once:
// the global provider delegates once, so one process runs one mode (the
// command in docs/tracing.md runs the modes interleaved, one process each).
func installBenchTracing(b *testing.B, mode string) trace.Tracer {
	benchMode.once.Do(func() {
		benchMode.mode = mode
		s, ok := benchSamplers[mode]
		if !ok {
			return // off: OpenTelemetry's no-op default
		}
		// An in-process OTLP/HTTP receiver that reads and drops: the
		// exporter's encoding and sending are part of the cost.
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
		}))
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"))
		if err != nil {
			b.Fatal(err)
		}
		otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(s)))
	})
	if benchMode.mode != mode {
		b.Fatalf("tracing mode %s installed already: run one mode per process (-bench 'BenchmarkReviewTracing/%s$')", benchMode.mode, mode)
	}
	if mode == "off" {
		return noop.NewTracerProvider().Tracer("bench")
	}
	return otel.Tracer("bench")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReviewTracing reviews one abusive chat per iteration (three
// stages against the stand-in simulator, a process of its own) inside a
// job span as the job loop starts it, and reports this process's CPU per
// review (user + system) for each tracing mode.
func BenchmarkReviewTracing(b *testing.B) {
	for _, mode := range []string{"off", "default", "all"} {
		b.Run(mode, func(b *testing.B) {
			tr := installBenchTracing(b, mode)
			e := setup(b, envOpts{})
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			start := cpuTime()
			for i := 0; b.Loop(); i++ {
				jctx, span := tr.Start(ctx, "job")
				if _, err := e.rev.Review(jctx, event("bench"), externalPaymentChat, 1); err != nil {
					b.Fatal(err)
				}
				span.End()
			}
			b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/review")
		})
	}
}
