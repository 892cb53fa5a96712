package console

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// panickyReviewer panics on the reviews of one room and answers the others.
type panickyReviewer struct {
	room string
	mu   sync.Mutex
	done int
}

func (p *panickyReviewer) PipelineVersion() string { return "v1" }
func (p *panickyReviewer) Review(_ context.Context, ev pipeline.ReviewEvent, _ []pipeline.ChatMessage, _ int) (pipeline.Verdict, error) {
	if ev.RoomID == p.room {
		// An index past the end: a runtime panic, as a bug would raise.
		_ = ev.RoomID[len(ev.RoomID)]
	}
	p.mu.Lock()
	p.done++
	p.mu.Unlock()
	return pipeline.Verdict{Key: ev.Key("v1"), RunID: ev.RunID, Status: pipeline.StatusDone, Label: pipeline.LabelClean,
		Category: pipeline.CategoryClean}, nil
}

// TestReviewPanicEndsOnlyItsStream: a review that panics ends its own
// stream with an error event and is counted; the process is still up and
// the next review on the same pod streams its verdict.
func TestReviewPanicEndsOnlyItsStream(t *testing.T) {
	c := newTestConsole(t, 2)
	rev := &panickyReviewer{room: "room-crash"}
	c.srv.reviews.reviewer = rev
	hc := c.client(t, "alice@example.com")
	who := Who{ID: moderatorID("alice@example.com")}
	start := func(room string) *http.Response {
		body := `{"room_id":"` + room + `","window_start":"2026-11-30T10:00:00Z","window_end":"2026-11-30T11:00:00Z"}`
		req, _ := http.NewRequest("POST", c.ts.URL+"/v1/reviews", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(csrfHeader, c.srv.auth.csrfToken(who, time.Now()))
		resp, err := hc.Do(req)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return resp
	}

	crashed := start("room-crash")
	evs := readEvents(t, crashed.Body, 0, "error")
	crashed.Body.Close()
	require.NotEmpty(t, evs)
	last := evs[len(evs)-1]
	require.Equal(t, "error", last.typ, "the stream ends with an error event: %+v", evs)
	require.Contains(t, last.data, "internal error")
	c.srv.reviews.running.Wait()
	require.Equal(t, 1.0, testutil.ToFloat64(c.srv.reviews.panics))
	require.Empty(t, c.srv.reviews.slots, "the panicked review gave its slot back")

	ok := start("room-1")
	evs = readEvents(t, ok.Body, 0, "verdict")
	ok.Body.Close()
	require.Equal(t, "verdict", evs[len(evs)-1].typ, "the pod still serves reviews: %+v", evs)
	require.Equal(t, 1, rev.done)
	require.Equal(t, 1.0, testutil.ToFloat64(c.srv.reviews.panics))
}
