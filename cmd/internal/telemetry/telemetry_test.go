package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// receiver is an in-process OTLP/HTTP trace receiver: it keeps every
// request the exporter posts to /v1/traces.
type receiver struct {
	mu   sync.Mutex
	reqs []*coltrace.ExportTraceServiceRequest
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil || r.URL.Path != "/v1/traces" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, &req)
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// spans returns the names of the spans received, by service.name.
func (rc *receiver) spans() map[string][]string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[string][]string{}
	for _, req := range rc.reqs {
		for _, rs := range req.GetResourceSpans() {
			svc := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					svc = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					out[svc] = append(out[svc], s.GetName())
				}
			}
		}
	}
	return out
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestEnabledOnlyWithAnEndpoint(t *testing.T) {
	require.False(t, Enabled(env(nil)), "off by default")
	require.True(t, Enabled(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})))
	require.True(t, Enabled(env(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"})))
	require.False(t, Enabled(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"})))
	require.False(t, Enabled(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"})))
}

// TestSetupExportsOverOTLP runs Setup against an in-process receiver (the
// exporter reads the process environment, so this test sets it and is not
// parallel): the spans arrive with the binary's service.name, a sampled
// remote parent is followed, an unsampled one is not.
func TestSetupExportsOverOTLP(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	shutdown, err := Setup(t.Context(), "chatguard-test", env(vars))
	require.NoError(t, err)
	tr := otel.Tracer("test")
	for _, c := range []struct {
		name    string
		sampled bool
	}{{"followed", true}, {"dropped", false}} {
		carrier := propagation.MapCarrier{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0" + map[bool]string{true: "1", false: "0"}[c.sampled]}
		ctx := otel.GetTextMapPropagator().Extract(context.Background(), carrier)
		_, span := tr.Start(ctx, c.name)
		require.Equal(t, "0af7651916cd43dd8448eb211c80319c", span.SpanContext().TraceID().String(), "the trace continues")
		span.End()
	}
	shutdown()
	require.Equal(t, map[string][]string{"chatguard-test": {"followed"}}, rc.spans())
}

func TestSetupOffKeepsTheNoopProvider(t *testing.T) {
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })
	otel.SetTracerProvider(noop.NewTracerProvider())
	shutdown, err := Setup(t.Context(), "chatguard-test", env(nil))
	require.NoError(t, err)
	shutdown()
	_, ok := otel.GetTracerProvider().(noop.TracerProvider)
	require.True(t, ok, "tracing off leaves the no-op provider")
	require.Contains(t, otel.GetTextMapPropagator().Fields(), "traceparent", "a received traceparent is still passed on")
}

func TestProtocolOtherThanHTTPIsRefused(t *testing.T) {
	_, err := NewProvider(t.Context(), "x", env(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}))
	require.ErrorContains(t, err, "only http/protobuf")
}

func TestDefaultSamplerRatioForRootsParentForTheRest(t *testing.T) {
	t.Parallel()
	s := DefaultSampler()
	// TraceIDRatioBased samples a root whose trace id's low 63 bits are
	// under ratio * 2^63.
	low := trace.TraceID{15: 1}
	high := trace.TraceID{8: 0x7f, 9: 0xff, 10: 0xff, 11: 0xff, 12: 0xff, 13: 0xff, 14: 0xff, 15: 0xff}
	root := func(id trace.TraceID) sdktrace.SamplingDecision {
		return s.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: id, Name: "x"}).Decision
	}
	require.Equal(t, sdktrace.RecordAndSample, root(low))
	require.Equal(t, sdktrace.Drop, root(high))
	parent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: high, SpanID: trace.SpanID{7: 1}, TraceFlags: trace.FlagsSampled, Remote: true}))
	require.Equal(t, sdktrace.RecordAndSample, s.ShouldSample(sdktrace.SamplingParameters{ParentContext: parent, TraceID: high, Name: "x"}).Decision,
		"a sampled parent is followed whatever the ratio")
}

func TestLogHandlerAddsTraceAndSpanIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "w")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "traced")
	log.InfoContext(context.Background(), "untraced")
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 2)
	var traced, untraced map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &traced))
	require.NoError(t, json.Unmarshal(lines[1], &untraced))
	require.Equal(t, sc.TraceID().String(), traced["trace_id"])
	require.Equal(t, sc.SpanID().String(), traced["span_id"])
	require.Equal(t, "w", traced["component"])
	require.NotContains(t, untraced, "trace_id")
}
