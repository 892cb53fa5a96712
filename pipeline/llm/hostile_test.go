package llm

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
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
