//go:build traces

package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestJaegerStoresWhatTheBinariesSend starts Jaeger as the stack does
// (its configuration, its ports, its readiness wait), exports a span the
// way every chatguard binary does (cmd/internal/telemetry: the SDK's
// OTLP/HTTP exporter and sampler configured only by the OTEL_* variables
// the stack publishes), and reads it back from the query API. It needs a
// built Jaeger: make test-traces (CHATGUARD_JAEGER_BIN).
func TestJaegerStoresWhatTheBinariesSend(t *testing.T) {
	bin := os.Getenv("CHATGUARD_JAEGER_BIN")
	require.NotEmpty(t, bin, "CHATGUARD_JAEGER_BIN: run make test-traces, which builds Jaeger")
	cfg := Defaults(repoRoot(t))
	cfg.StateDir = t.TempDir()
	cfg.Jaeger = bin
	p := freePorts(t, 3)
	cfg.JaegerOTLPPort, cfg.JaegerQueryPort, cfg.JaegerGRPCPort = p[0], p[1], p[2]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := &Stack{cfg: cfg, env: Env{}}
	t.Cleanup(func() { require.NoError(t, s.Stop(context.Background())) })
	require.NoError(t, s.startJaeger(ctx))
	env := s.Env()
	require.Equal(t, cfg.TracesEnv(), env, "the stack publishes what TracesEnv says")
	for k, v := range env {
		t.Setenv(k, v)
	}

	service := fmt.Sprintf("chatguard-stacktest-%d", time.Now().UnixNano())
	exp, err := otlptracehttp.New(ctx)
	require.NoError(t, err)
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", service)))
	require.NoError(t, err)
	// No sampler option: the SDK reads OTEL_TRACES_SAMPLER(_ARG), as the
	// binaries' provider does when the variable is set.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	_, span := tp.Tracer("stacktest").Start(ctx, "review")
	span.SetAttributes(attribute.String("gen_ai.operation.name", "chat"))
	traceID := span.SpanContext().TraceID().String()
	require.True(t, span.SpanContext().IsSampled(), "a ratio of 1.0 samples every root")
	span.End()
	require.NoError(t, tp.Shutdown(ctx), "the span reached the OTLP receiver")

	require.Eventually(t, func() bool {
		return hasTrace(t, env["CHATGUARD_STACK_TRACES_URL"], service, traceID)
	}, 30*time.Second, 100*time.Millisecond, "the query API returns the trace %s of %s", traceID, service)
}

// hasTrace asks the query API for service's traces and reports whether
// one is traceID with a span named review.
func hasTrace(t *testing.T, base, service, traceID string) bool {
	resp, err := http.Get(base + "/api/traces?service=" + url.QueryEscape(service))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Logf("query API: %s: %s", resp.Status, body)
		return false
	}
	var out struct {
		Data []struct {
			TraceID string `json:"traceID"`
			Spans   []struct {
				OperationName string `json:"operationName"`
			} `json:"spans"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Logf("query API: %v: %s", err, body)
		return false
	}
	for _, tr := range out.Data {
		if tr.TraceID == traceID && len(tr.Spans) == 1 && tr.Spans[0].OperationName == "review" {
			return true
		}
	}
	return false
}
