package demo

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TraceSpan is one span the binaries exported, as the demo prints it.
type TraceSpan struct {
	Service, Name           string
	TraceID, SpanID, Parent string
	Start, End              time.Time
	// Attrs are the span's attributes as text.
	Attrs map[string]string
	// LinkedTraces are the trace ids the span links (a fan-in: the
	// consumer's write of an object holding several reviews' events).
	LinkedTraces []string
}

// traceSink is the demo's OTLP/HTTP trace receiver: the binaries it
// starts export every span to it (OTEL_EXPORTER_OTLP_ENDPOINT, sampling
// 1.0), and it keeps them in memory for the summary's trace tree.
type traceSink struct {
	srv   *http.Server
	url   string
	mu    sync.Mutex
	spans []TraceSpan
}

// maxSinkSpans bounds what the sink keeps (a long run exports many).
const maxSinkSpans = 200000

func startTraceSink() (*traceSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("trace sink: %w", err)
	}
	s := &traceSink{url: "http://" + ln.Addr().String()}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *traceSink) close() { _ = s.srv.Close() }

// env points a child's exporter at the sink, every trace sampled, spans
// sent within half a second.
func (s *traceSink) env() map[string]string {
	return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": s.url, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG": "1.0", "OTEL_BSP_SCHEDULE_DELAY": "500"}
}

func (s *traceSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	var req coltrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	if err != nil || r.URL.Path != "/v1/traces" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		svc := attrText(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				if len(s.spans) < maxSinkSpans {
					s.spans = append(s.spans, fromProto(svc, sp))
				}
			}
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

func (s *traceSink) all() []TraceSpan {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.spans)
}

func fromProto(svc string, sp *tracepb.Span) TraceSpan {
	ts := TraceSpan{Service: svc, Name: sp.GetName(), TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
		Parent: hex.EncodeToString(sp.GetParentSpanId()), Start: time.Unix(0, int64(sp.GetStartTimeUnixNano())),
		End: time.Unix(0, int64(sp.GetEndTimeUnixNano())), Attrs: attrText(sp.GetAttributes())}
	for _, l := range sp.GetLinks() {
		ts.LinkedTraces = append(ts.LinkedTraces, hex.EncodeToString(l.GetTraceId()))
	}
	return ts
}

func attrText(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_DoubleValue:
			out[kv.GetKey()] = strconv.FormatFloat(v.DoubleValue, 'g', 4, 64)
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = strconv.FormatBool(v.BoolValue)
		}
	}
	return out
}

// OneReview returns the spans of one review's trace: among the traces
// holding a job, the one with the most model attempts (the earliest job
// on a tie), so that the tree shows every stage; and the spans of other
// traces that link it (the consumer's lake writes of objects that hold
// its events beside other reviews'). It returns nil when no job was
// traced.
func OneReview(spans []TraceSpan) []TraceSpan {
	attempts, jobs := map[string]int{}, map[string]time.Time{}
	for _, s := range spans {
		switch {
		case s.Name == "job":
			jobs[s.TraceID] = s.Start
		case strings.HasPrefix(s.Name, "chat "):
			attempts[s.TraceID]++
		}
	}
	best := ""
	for tr, at := range jobs {
		if best == "" || attempts[tr] > attempts[best] || attempts[tr] == attempts[best] && at.Before(jobs[best]) {
			best = tr
		}
	}
	if best == "" {
		return nil
	}
	var out []TraceSpan
	for _, s := range spans {
		if s.TraceID == best || slices.Contains(s.LinkedTraces, best) {
			out = append(out, s)
		}
	}
	return out
}

// PrintTrace writes one trace as an indented tree: each span's name, its
// service, its duration and, where it says them, its tokens in and out;
// children in start order under their parent. A span whose parent was not
// received (another process's, not exported) is printed as a root.
func PrintTrace(w io.Writer, spans []TraceSpan) {
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	main := TraceOf(spans)
	children := map[string][]TraceSpan{}
	for _, s := range spans {
		parent := s.Parent
		if !ids[parent] {
			parent = ""
		}
		children[parent] = append(children[parent], s)
	}
	for _, c := range children {
		slices.SortStableFunc(c, func(a, b TraceSpan) int { return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.Name, b.Name)) })
	}
	var walk func(parent, indent string)
	walk = func(parent, indent string) {
		for _, s := range children[parent] {
			linked := ""
			if s.TraceID != main {
				linked = "  (links this trace)"
			}
			fmt.Fprintf(w, "%s%s  [%s] %s%s%s\n", indent, s.Name, strings.TrimPrefix(s.Service, "chatguard-"), s.End.Sub(s.Start).Round(100*time.Microsecond), tokens(s), linked)
			walk(s.SpanID, indent+"  ")
		}
	}
	walk("", "  ")
}

// tokens is a span's token counts, or "".
func tokens(s TraceSpan) string {
	in, okIn := s.Attrs["gen_ai.usage.input_tokens"]
	out, okOut := s.Attrs["gen_ai.usage.output_tokens"]
	if !okIn && !okOut {
		return ""
	}
	return fmt.Sprintf("  tokens %s in / %s out", cmp.Or(in, "0"), cmp.Or(out, "0"))
}

// TraceOf is the trace id of the review OneReview picked: its job's.
func TraceOf(spans []TraceSpan) string {
	for _, s := range spans {
		if s.Name == "job" {
			return s.TraceID
		}
	}
	if len(spans) == 0 {
		return ""
	}
	return spans[0].TraceID
}
