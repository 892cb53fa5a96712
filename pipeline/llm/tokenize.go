package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// ErrContextLength is matched (errors.Is) by a *ContextLengthError: a pool
// refused a prompt longer than its model's context. A smaller prompt can
// succeed where a retry of the same one cannot.
var ErrContextLength = errors.New("llm: the prompt is longer than the model's context")

// ContextLengthError is a pool's 400 for a prompt over the context length.
// Limit and Requested are the token counts the server named (0 when it
// named none).
type ContextLengthError struct {
	Limit, Requested int
	Err              error
}

// Error implements error.
func (e *ContextLengthError) Error() string {
	if e.Limit > 0 && e.Requested > 0 {
		return fmt.Sprintf("the prompt does not fit the model's context (%d tokens asked, %d allowed): %v", e.Requested, e.Limit, e.Err)
	}
	return fmt.Sprintf("the prompt does not fit the model's context: %v", e.Err)
}

// Is makes errors.Is(err, ErrContextLength) true.
func (e *ContextLengthError) Is(target error) bool { return target == ErrContextLength }

// Unwrap returns the pool's error.
func (e *ContextLengthError) Unwrap() error { return e.Err }

var (
	contextLenRe  = regexp.MustCompile(`(?i)maximum context length (?:is|of) (\d+)|context length (?:is|of) (\d+)|(\d+) maximum`)
	requestedRe   = regexp.MustCompile(`(?i)(?:requested|has|contains|resulted in|prompt is too long:)\s*(\d+)\s*(?:input\s+)?tokens`)
	contextWordRe = regexp.MustCompile(`(?i)context[_ ]length|maximum context|context window|too many (?:input )?tokens|prompt is too long|input is too long`)
)

// contextLength returns a *ContextLengthError when a rejected request was
// rejected for its length, and err otherwise. vLLM and OpenAI answer 400
// "This model's maximum context length is 8192 tokens. However, you
// requested 9000 tokens …" (OpenAI with code context_length_exceeded).
func contextLength(err error) error {
	var apiErr *openai.APIError
	msg := err.Error()
	code := ""
	if errors.As(err, &apiErr) {
		msg = apiErr.Message
		code = fmt.Sprint(apiErr.Code)
	}
	if code != "context_length_exceeded" && !contextWordRe.MatchString(msg) {
		return err
	}
	cl := &ContextLengthError{Err: err}
	if m := contextLenRe.FindStringSubmatch(msg); m != nil {
		for _, g := range m[1:] {
			if g != "" {
				cl.Limit, _ = strconv.Atoi(g)
				break
			}
		}
	}
	if m := requestedRe.FindStringSubmatch(msg); m != nil {
		cl.Requested, _ = strconv.Atoi(m[1])
	}
	return cl
}

// TokenCount is what the primary's tokenizer says about a text.
type TokenCount struct {
	// Tokens is the text's length in the model's tokens.
	Tokens int
	// MaxModelLen is the model's context length (0: not told).
	MaxModelLen int
}

// ErrNoTokenizer is returned by CountTokens when the primary pool serves no
// tokenizer (a managed API, an older server): use an estimate.
var ErrNoTokenizer = errors.New("llm: the primary pool serves no tokenizer")

// tokenizeTimeout bounds one tokenizer call: counting is an optimisation,
// never worth holding a review for.
const tokenizeTimeout = 3 * time.Second

// maxTokenizeBody bounds the tokenizer's answer (it lists every token id).
const maxTokenizeBody = 16 << 20

// tokenizer calls vLLM's POST /tokenize on the primary pool.
type tokenizer struct {
	once        sync.Once
	hc          *http.Client
	url, key    string
	model       string
	unsupported atomic.Bool
}

func (t *tokenizer) init(p PoolConfig) {
	t.once.Do(func() {
		rt := p.Transport
		if rt == nil {
			rt = http.DefaultTransport
		}
		t.hc = &http.Client{Transport: rt}
		// vLLM serves /tokenize beside /v1, at the server's root.
		t.url = strings.TrimSuffix(strings.TrimSuffix(p.BaseURL, "/"), "/v1") + "/tokenize"
		t.key, t.model = p.APIKey, p.Model
	})
}

// CountTokens asks the primary pool's tokenizer (vLLM's POST /tokenize)
// how many tokens text takes. It returns ErrNoTokenizer, and stops asking,
// when the pool answers 404, 405 or 501; other failures (timeouts, 5xx)
// are returned as they are. Callers fall back to an estimate on any error.
// It honours ctx and is bounded by a short timeout of its own.
func (r *Router) CountTokens(ctx context.Context, text string) (TokenCount, error) {
	t := &r.tok
	t.init(r.primary.cfg)
	if t.unsupported.Load() {
		return TokenCount{}, ErrNoTokenizer
	}
	ctx, cancel := context.WithTimeout(ctx, tokenizeTimeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"model": t.model, "prompt": text, "add_special_tokens": false})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return TokenCount{}, fmt.Errorf("llm: tokenize: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if t.key != "" {
		req.Header.Set("Authorization", "Bearer "+t.key)
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return TokenCount{}, fmt.Errorf("llm: tokenize: %w", err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		t.unsupported.Store(true)
		return TokenCount{}, ErrNoTokenizer
	default:
		return TokenCount{}, fmt.Errorf("llm: tokenize: status %d", resp.StatusCode)
	}
	var out struct {
		Count       int `json:"count"`
		MaxModelLen int `json:"max_model_len"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxTokenizeBody)).Decode(&out); err != nil {
		return TokenCount{}, fmt.Errorf("llm: tokenize: decode: %w", err)
	}
	if out.Count <= 0 && text != "" {
		return TokenCount{}, errors.New("llm: tokenize: the answer has no count")
	}
	return TokenCount{Tokens: out.Count, MaxModelLen: out.MaxModelLen}, nil
}
