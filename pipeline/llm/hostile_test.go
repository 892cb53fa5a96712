package llm

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// TestAnswerBufferIsBounded: a server that ignores max_tokens and streams
// megabytes must not fill the worker's memory; the answer is cut at the
// stage's max tokens times a bound and counts as truncated.
func TestAnswerBufferIsBounded(t *testing.T) {
	t.Parallel()
	const total = 8 << 20
	var written atomic.Int64
	prim := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		chunk := strings.Repeat("가", 300) // 900 bytes of content per chunk
		for written.Load() < total {
			if _, err := fmt.Fprintf(w, "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", chunk); err != nil {
				return
			}
			fl.Flush()
			written.Add(int64(len(chunk)))
			if r.Context().Err() != nil {
				return
			}
		}
		fmt.Fprint(w, "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	})
	r, _ := setup(t, setupOpts{primary: prim, tweak: func(c *Config) { c.MaxAttempts = 1 }})
	req := triageReq()
	var got []Attempt
	req.OnAttempt = func(a Attempt) { got = append(got, a) }
	_, err := r.Complete(t.Context(), req)
	require.Error(t, err)
	require.Len(t, got, 1)
	limit := req.MaxTokens * maxBytesPerToken
	t.Logf("buffered %d bytes of an answer streamed without end, for max_tokens %d (bound %d)", len(got[0].Content), req.MaxTokens, limit)
	require.LessOrEqual(t, len(got[0].Content), limit)
	require.Equal(t, OutcomeTruncated, got[0].Outcome)
	require.True(t, errors.Is(got[0].Err, ErrTruncated))
	require.Less(t, written.Load(), int64(total), "the router hung up instead of reading it all")
}

func TestAnswerCapDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, 400*maxBytesPerToken, answerCap(&Request{MaxTokens: 400}))
	require.Equal(t, DefaultAnswerCap, answerCap(&Request{}))
}

func TestContextLengthIsClassified(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body      string
		limit, requestd int
	}{
		{"vllm", `{"object":"error","message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens (8500 in the messages, 500 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`, 8192, 9000},
		{"vllm new", `{"error":{"message":"This model's maximum context length is 4096 tokens. However, your request has 5000 input tokens.","type":"BadRequestError"}}`, 4096, 5000},
		{"openai", `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`, 128000, 130000},
		{"code only", `{"error":{"message":"too long","type":"invalid_request_error","code":"context_length_exceeded"}}`, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prim := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, tc.body)
			})
			r, _ := setup(t, setupOpts{primary: prim})
			_, err := r.Complete(t.Context(), triageReq())
			require.ErrorIs(t, err, ErrContextLength)
			var cl *ContextLengthError
			require.ErrorAs(t, err, &cl)
			require.Equal(t, tc.limit, cl.Limit)
			require.Equal(t, tc.requestd, cl.Requested)
			var pe *pipeline.PermanentError
			require.ErrorAs(t, err, &pe, "the same prompt will not fit on a retry")
			require.EqualValues(t, 1, prim.calls.Load())
		})
	}
	// Another 400 stays what it was.
	prim := newFake(t, status(http.StatusBadRequest, ""))
	r, _ := setup(t, setupOpts{primary: prim})
	_, err := r.Complete(t.Context(), triageReq())
	require.NotErrorIs(t, err, ErrContextLength)
}

func TestCountTokens(t *testing.T) {
	t.Parallel()
	var paths atomic.Value
	prim := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		paths.Store(r.URL.Path + " " + r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"count":42,"max_model_len":8192,"tokens":[1,2,3]}`)
	})
	r, _ := setup(t, setupOpts{primary: prim, tweak: func(c *Config) { c.Primary.APIKey = "k1" }})
	n, err := r.CountTokens(t.Context(), "안녕하세요")
	require.NoError(t, err)
	require.Equal(t, TokenCount{Tokens: 42, MaxModelLen: 8192}, n)
	require.Equal(t, "/tokenize Bearer k1", paths.Load(), "vLLM serves /tokenize beside /v1")

	// A pool without a tokenizer is asked once.
	none := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusNotFound) })
	r2, _ := setup(t, setupOpts{primary: none})
	_, err = r2.CountTokens(t.Context(), "x")
	require.ErrorIs(t, err, ErrNoTokenizer)
	_, err = r2.CountTokens(t.Context(), "x")
	require.ErrorIs(t, err, ErrNoTokenizer)
	require.EqualValues(t, 1, none.calls.Load())

	// A failing one is not given up on.
	flaky := newFake(t, status(http.StatusServiceUnavailable, ""))
	r3, _ := setup(t, setupOpts{primary: flaky})
	_, err = r3.CountTokens(t.Context(), "x")
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrNoTokenizer)
}
