package console

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatcontext"
	"github.com/chatguard/chatguard/pipeline/live"
)

// roomChat answers a room's history within the span asked for, and
// records the spans.
type roomChat struct {
	mu    sync.Mutex
	msgs  []pipeline.ChatMessage
	spans [][2]time.Time
}

func (c *roomChat) History(_ context.Context, _ string, from, to time.Time) ([]pipeline.ChatMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spans = append(c.spans, [2]time.Time{from, to})
	var out []pipeline.ChatMessage
	for _, m := range c.msgs {
		if !m.SentAt.Before(from) && m.SentAt.Before(to) {
			out = append(out, m)
		}
	}
	return out, nil
}

// keepingReviewer answers at once and keeps the messages it was given.
type keepingReviewer struct {
	mu   sync.Mutex
	msgs []pipeline.ChatMessage
}

func (k *keepingReviewer) PipelineVersion() string { return "v1" }
func (k *keepingReviewer) Review(_ context.Context, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage, _ int) (pipeline.Verdict, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.msgs = append([]pipeline.ChatMessage(nil), msgs...)
	return pipeline.Verdict{Key: ev.Key("v1"), RunID: ev.RunID, Status: pipeline.StatusDone, Label: pipeline.LabelClean}, nil
}

// TestOnDemandReviewsReadTheirWindowWithContext: an on-demand review is
// given the room's newest --context-messages of the --context-lookback
// before its window, marked as context, ahead of the window, as a
// worker's review of the same window is.
func TestOnDemandReviewsReadTheirWindowWithContext(t *testing.T) {
	msg := func(d time.Duration, id string) pipeline.ChatMessage {
		return pipeline.ChatMessage{MessageID: id, SenderID: "u", SenderRole: pipeline.RoleSeller, Kind: pipeline.KindText, Text: id, SentAt: window.Add(d)}
	}
	chat := &roomChat{msgs: []pipeline.ChatMessage{msg(-90*time.Minute, "too-old"), msg(-30*time.Minute, "c1"), msg(-20*time.Minute, "c2"),
		msg(-10*time.Minute, "c3"), msg(0, "w1"), msg(30*time.Minute, "w2"), msg(2*time.Hour, "later")}}
	cfg := DefaultConfig()
	cfg.DevLogin, cfg.TrustedProxies = true, "127.0.0.1/32"
	cfg.Context.Messages = 2
	ml := &memLog{evs: map[string][]pipeline.LiveEvent{}}
	hub, err := live.NewHub(cfg.Hub(), ml, nil)
	require.NoError(t, err)
	rev := &keepingReviewer{}
	reg := prometheus.NewRegistry()
	app, err := New(cfg, Deps{Store: &fakeStore{}, Feedback: &fakeFeedback{}, Chat: chat, Reviewer: rev, Hub: hub, LiveLog: ml, Registerer: reg})
	require.NoError(t, err)
	ts := httptest.NewServer(app.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { app.cancelWork(nil); app.rv.running.Wait() })
	c := &testConsole{app: app, srv: app.srv, ts: ts}

	resp := c.startReview(t, c.client(t, "alice@example.com"))
	defer resp.Body.Close()
	evs := readEvents(t, resp.Body, 0, "verdict")
	require.Equal(t, "verdict", evs[len(evs)-1].typ)

	rev.mu.Lock()
	defer rev.mu.Unlock()
	var ids []string
	for i, m := range rev.msgs {
		ids = append(ids, m.MessageID)
		require.Equal(t, i < 2, m.Context, m.MessageID)
	}
	require.Equal(t, []string{"c2", "c3", "w1", "w2"}, ids, "the 2 newest messages of the hour before, then the window")
	require.ElementsMatch(t, [][2]time.Time{{window.Add(-time.Hour), window}, {window, window.Add(time.Hour)}}, chat.spans)
	want := "# HELP chatguard_console_context_fetches_total " + chatcontext.FetchesHelp + "\n# TYPE chatguard_console_context_fetches_total counter\n" +
		`chatguard_console_context_fetches_total{outcome="ok"} 1` + "\n"
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "chatguard_console_context_fetches_total"))
}
