package chatapi

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/chatguard/chatguard/internal/spantest"
)

// TestFetchIsASpanThatNamesNoRoom fetches a room's history inside a
// sampled span, the first attempt failing: each attempt is a client span
// child of the caller's, the chat service receives the traceparent, and
// no attribute names the room.
func TestFetchIsASpanThatNamesNoRoom(t *testing.T) {
	rec := spantest.Recorder(t, sdktrace.AlwaysSample())
	tp := spantest.Provider()
	var mu sync.Mutex
	var parents []string
	seen := func(next func(http.ResponseWriter, *http.Request)) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			parents = append(parents, r.Header.Get("traceparent"))
			mu.Unlock()
			next(w, r)
		}
	}
	c, _, _ := setup(t, seen(status(503)), seen(history("secret-room-42", 2)))
	ctx, job := tp.Tracer("test").Start(context.Background(), "job")
	from := time.Date(2026, 11, 3, 3, 0, 0, 0, time.UTC)
	msgs, err := c.History(ctx, "secret-room-42", from, from.Add(time.Hour))
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	job.End()

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, parents, 2)
	var fetches []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "GET chat history" {
			fetches = append(fetches, s)
		}
	}
	require.Len(t, fetches, 2, "one span per attempt")
	for i, s := range fetches {
		require.Equal(t, job.SpanContext().SpanID(), s.Parent().SpanID())
		require.Contains(t, parents[i], s.SpanContext().SpanID().String(), "the chat service gets the attempt's traceparent")
		for _, kv := range s.Attributes() {
			require.False(t, strings.Contains(kv.Value.String(), "secret-room"), "attribute %s names the room", kv.Key)
		}
	}
}
