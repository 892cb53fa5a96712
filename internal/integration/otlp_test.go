package integration_test

import (
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"sync"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpSpan is one span an OTLP exporter posted, flattened for assertions.
type otlpSpan struct {
	Service, Name           string
	TraceID, SpanID, Parent string
	Kind                    tracepb.Span_SpanKind
	Attrs                   map[string]string
	// Strings are the attributes of string type (a number is not text
	// that redaction could mask).
	Strings map[string]bool
	// Links are the linked spans as trace id + "/" + span id.
	Links []string
}

// otlpReceiver is an in-process OTLP/HTTP trace receiver: it decodes every
// protobuf request posted to /v1/traces and keeps its spans.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []otlpSpan
}

func (rc *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	for _, rs := range req.GetResourceSpans() {
		svc := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				svc = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				rc.spans = append(rc.spans, flatten(svc, s))
			}
		}
	}
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

func flatten(svc string, s *tracepb.Span) otlpSpan {
	o := otlpSpan{Service: svc, Name: s.GetName(), Kind: s.GetKind(),
		TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
		Parent: hex.EncodeToString(s.GetParentSpanId()), Attrs: map[string]string{}, Strings: map[string]bool{}}
	for _, kv := range s.GetAttributes() {
		o.Attrs[kv.GetKey()] = anyValue(kv.GetValue())
		_, o.Strings[kv.GetKey()] = kv.GetValue().GetValue().(*commonpb.AnyValue_StringValue)
	}
	for _, l := range s.GetLinks() {
		o.Links = append(o.Links, hex.EncodeToString(l.GetTraceId())+"/"+hex.EncodeToString(l.GetSpanId()))
	}
	return o
}

// anyValue renders an attribute value as text, whatever its type.
func anyValue(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	}
	return v.String()
}

// all returns a copy of the spans received so far.
func (rc *otlpReceiver) all() []otlpSpan {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]otlpSpan(nil), rc.spans...)
}
