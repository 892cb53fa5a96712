package llm

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// With server priority on, every request body carries its class's rank
// as vLLM's priority (lower first); off, the field is absent, as vLLM
// without the priority policy requires.
func TestServerPriorityCarriesTheClass(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		prim := newFake(t, answer(okAnswer))
		r, _ := setup(t, setupOpts{primary: prim, tweak: func(c *Config) { c.Primary.ServerPriority = on }})
		for _, c := range pipeline.Classes {
			req := triageReq()
			req.Class = c
			_, err := r.Complete(t.Context(), req)
			require.NoError(t, err)
		}
		sent := prim.requests()
		require.Len(t, sent, 4)
		for i, c := range pipeline.Classes {
			if !on {
				require.Nil(t, sent[i].Priority, "off: no priority field")
				continue
			}
			require.NotNil(t, sent[i].Priority, c.String())
			require.Equal(t, c.Rank(), *sent[i].Priority, c.String())
			require.Equal(t, "prim-model", sent[i].Model, "the rest of the body is intact")
			require.True(t, sent[i].Stream)
		}
	}
}

func TestWithPriorityKeepsTheBodyValidJSON(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"model":"m"}`: `{"priority":2,"model":"m"}`,
		` {}`:           `{"priority":2}`,
	} {
		req, err := http.NewRequest(http.MethodPost, "http://x/v1/chat/completions", strings.NewReader(body))
		require.NoError(t, err)
		require.NoError(t, withPriority(req, 2))
		got, err := io.ReadAll(req.Body)
		require.NoError(t, err)
		require.JSONEq(t, want, string(got))
		require.True(t, json.Valid(got))
		require.Equal(t, int64(len(got)), req.ContentLength)
		again, err := req.GetBody()
		require.NoError(t, err)
		b2, _ := io.ReadAll(again)
		require.Equal(t, got, b2, "a retried body is the same")
	}
	req, err := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader(`[1]`))
	require.NoError(t, err)
	require.ErrorContains(t, withPriority(req, 0), "not a JSON object")
}
