package llm

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
)

// cannedSSE is a realistic judge answer streamed in 8 chunks plus usage.
var cannedSSE = func() []byte {
	var b bytes.Buffer
	parts := []string{`{\"label\":\"abusive\",`, `\"category\":\"external_payment\",`, `\"severity\":4,`, `\"confidence\":0.84,`,
		`\"action\":\"restrict\",`, `\"rationale\":\"prepayment to a personal account\",`, `\"evidence_ids\":[\"m4\",\"m5\"]`, `}`}
	for _, p := range parts {
		b.WriteString(`data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"` + p + `"},"finish_reason":null}]}` + "\n\n")
	}
	b.WriteString(`data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	b.WriteString(`data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":900,"completion_tokens":60,"total_tokens":960}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}()

// memTransport answers every request with cannedSSE without a network:
// what remains is the router's and go-openai's own cost per call.
type memTransport struct{}

func (memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, req.Body)
	_ = req.Body.Close()
	return &http.Response{
		StatusCode: http.StatusOK,
		Status:     "200 OK",
		Header:     http.Header{"Content-Type": []string{"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(cannedSSE)),
		Request:    req,
	}, nil
}

// BenchmarkRouterComplete measures one judge call through the router:
// pool choice, gate, breaker, request encoding by go-openai, SSE parsing,
// metrics, validation hook; no HTTP. The prompt sizes show how much of the
// cost is JSON encoding of the prompt (go-openai re-compacts every message).
func BenchmarkRouterComplete(b *testing.B) {
	r, err := New(Config{
		Primary:  PoolConfig{BaseURL: "http://primary.invalid/v1", Model: "m", Transport: memTransport{}},
		Fallback: PoolConfig{BaseURL: "http://fallback.invalid/v1", Model: "f", Transport: memTransport{}},
	}, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []struct {
		name   string
		prompt string
	}{
		{"prompt=100B", strings.Repeat("a", 100)},
		{"prompt=6KB_korean", strings.Repeat("가", 2000)},
	} {
		req := Request{
			Stage:     pipeline.StageJudge,
			Messages:  []Message{{Role: RoleSystem, Text: "system prompt"}, {Role: RoleUser, Text: size.prompt}},
			Schema:    []byte(`{"type":"object"}`),
			MaxTokens: 512,
			Validate:  func([]byte) error { return nil },
		}
		b.Run(size.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := r.Complete(b.Context(), req)
					if err != nil || resp.TokensOut != 60 {
						b.Fatal(err, resp.TokensOut)
					}
				}
			})
		})
	}
}

// BenchmarkAcquireRelease is the router's own bookkeeping per attempt: pool
// choice, gate slot, breaker check, release.
func BenchmarkAcquireRelease(b *testing.B) {
	r, err := New(Config{
		Primary:  PoolConfig{BaseURL: "http://primary.invalid/v1", Model: "m", Transport: memTransport{}},
		Fallback: PoolConfig{BaseURL: "http://fallback.invalid/v1", Model: "f", Transport: memTransport{}},
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		l, _, err := r.acquire(b.Context(), pipeline.ClassBatch, nil, false)
		if err != nil {
			b.Fatal(err)
		}
		l.p.breaker.done(r.now(), l.probe, false, false)
		l.release()
	}
}
