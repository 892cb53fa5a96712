package console

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/internal/spantest"
	"github.com/chatguard/chatguard/pipeline"
)

// eventSink keeps the lake events the console publishes.
type eventSink struct {
	mu  sync.Mutex
	evs []pipeline.LakeEvent
}

func (s *eventSink) Publish(ev pipeline.LakeEvent) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, ev)
	return true
}

// TestOnDemandReviewContinuesTheRequestsTrace starts an on-demand review
// with a traceparent header, every trace sampled: the request's server
// span continues the caller's trace, the review's span is its child, the
// verdict's lake event carries the review's trace, and no span names the
// room; a page view is not traced.
func TestOnDemandReviewContinuesTheRequestsTrace(t *testing.T) {
	rec := spantest.Recorder(t, sdktrace.AlwaysSample())
	c := newTestConsole(t, 1)
	sink := &eventSink{}
	c.app.rv.events = sink
	hc := c.client(t, "alice@example.com")

	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	who := Who{ID: moderatorID("alice@example.com")}
	body := `{"room_id":"room-1","window_start":"2026-11-30T10:00:00Z","window_end":"2026-11-30T11:00:00Z"}`
	req, _ := http.NewRequest("POST", c.ts.URL+"/v1/reviews", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(csrfHeader, c.srv.auth.csrfToken(who, time.Now()))
	req.Header.Set("traceparent", "00-"+tid+"-"+sid+"-01")
	req.Header.Set("User-Agent", "moderator-browser/1.0")
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	c.rev.release <- struct{}{}
	evs := readEvents(t, resp.Body, 0, "verdict")
	require.Equal(t, "verdict", evs[len(evs)-1].typ)
	page, err := hc.Get(c.ts.URL + "/queue")
	require.NoError(t, err)
	page.Body.Close()

	var server, review sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		for _, s := range rec.Ended() {
			switch s.Name() {
			case "POST /v1/reviews":
				server = s
			case "on-demand review":
				review = s
			}
		}
		return server != nil && review != nil
	}, 5*time.Second, 10*time.Millisecond, "the request's and the review's spans end")
	require.Equal(t, tid, server.SpanContext().TraceID().String(), "the request continues the caller's trace")
	require.Equal(t, sid, server.Parent().SpanID().String())
	require.Equal(t, trace.SpanKindServer, server.SpanKind())
	require.Equal(t, server.SpanContext().SpanID(), review.Parent().SpanID(), "the review is the request's child")
	for _, s := range rec.Ended() {
		require.NotContains(t, s.Name(), "/queue", "a page view is not traced")
		for _, kv := range s.Attributes() {
			require.NotContains(t, kv.Value.String(), "room-1", "%s: %s names the room", s.Name(), kv.Key)
			for _, who := range []string{"moderator-browser", "203.0.113.7"} {
				require.NotContains(t, kv.Value.String(), who, "%s: %s says who asked", s.Name(), kv.Key)
			}
			require.NotContains(t, []string{"client.address", "network.peer.address", "user_agent.original"}, string(kv.Key),
				"%s: the moderator's address and browser stay out of the span", s.Name())
		}
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	require.Len(t, sink.evs, 1)
	require.Equal(t, tid, sink.evs[0].Trace.TraceID().String(), "the verdict event carries the review's trace")
	require.Equal(t, review.SpanContext().SpanID(), sink.evs[0].Trace.SpanID())
}
