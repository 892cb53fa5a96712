package reviewjob

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatcontext"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// spanChat answers from a fixed room history, honouring [from, to) unless
// sloppy, and records the spans asked for. ctxErr fails the fetches that
// end at the window start (the context's).
type spanChat struct {
	mu     sync.Mutex
	msgs   []pipeline.ChatMessage
	spans  [][2]time.Time
	ctxErr error
	winErr error
	start  time.Time
	sloppy bool
}

func (c *spanChat) History(ctx context.Context, room string, from, to time.Time) ([]pipeline.ChatMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spans = append(c.spans, [2]time.Time{from, to})
	if to.Equal(c.start) {
		if c.ctxErr != nil {
			return nil, c.ctxErr
		}
	} else if c.winErr != nil {
		return nil, c.winErr
	}
	var out []pipeline.ChatMessage
	for _, m := range c.msgs {
		if c.sloppy || (!m.SentAt.Before(from) && m.SentAt.Before(to)) {
			out = append(out, m)
		}
	}
	if to.Equal(c.start) {
		out = append(out, pipeline.HistoryTrim{Dropped: 7}.Notice(from))
	}
	return out, nil
}

// contextRig is the review rig with context on (lookback 1h, 3 messages)
// over a room whose history spans the two hours before the window and
// the window itself; the reviewer keeps the messages it was given.
func contextRig(t *testing.T) (*reviewRig, *spanChat, *[]pipeline.ChatMessage) {
	t.Helper()
	r := setupReview(t)
	at := func(d time.Duration, id string) pipeline.ChatMessage {
		return pipeline.ChatMessage{MessageID: id, SenderID: "u", SenderRole: pipeline.RoleSeller, SentAt: r.window.Add(d), Kind: pipeline.KindText, Text: id}
	}
	chat := &spanChat{start: r.window, msgs: []pipeline.ChatMessage{
		at(-90*time.Minute, "too-old"), at(-40*time.Minute, "c1"), at(-30*time.Minute, "c2"), at(-20*time.Minute, "c3"),
		at(-10*time.Minute, "c4"), at(0, "w1"), at(30*time.Minute, "w2"), at(time.Hour, "next-window"),
	}}
	var got []pipeline.ChatMessage
	var mu sync.Mutex
	r.rev.review = func(_ context.Context, _ pipeline.ReviewEvent, msgs []pipeline.ChatMessage, _ int) (pipeline.Verdict, error) {
		mu.Lock()
		defer mu.Unlock()
		got = append([]pipeline.ChatMessage(nil), msgs...)
		return abusive(), nil
	}
	r.cfg.Context = chatcontext.Config{Lookback: time.Hour, Messages: 3}
	d := r.deps()
	d.Chat = chat
	r.build(d)
	return r, chat, &got
}

func idsOf(msgs []pipeline.ChatMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.MessageID
	}
	return out
}

// TestEveryWindowIsReviewedWithItsContext: batch, sweep and real-time
// windows alike get the newest messages of the lookback before their
// start, from one extra fetch of exactly that span, ahead of the window's.
func TestEveryWindowIsReviewedWithItsContext(t *testing.T) {
	t.Parallel()
	for _, src := range []pipeline.ReviewSource{"", pipeline.SourceBatch, pipeline.SourceSweep, pipeline.SourceRealtime} {
		t.Run(string(src)+"-source", func(t *testing.T) {
			t.Parallel()
			r, chat, got := contextRig(t)
			out := r.h.Handle(context.Background(), msg(r.body(t, func(ev *pipeline.ReviewEvent) { ev.Source = src }), 1, 5))
			require.Equal(t, jobloop.Delete, out.Action)
			require.Equal(t, []string{"c2", "c3", "c4", "w1", "w2"}, idsOf(*got), "the 3 newest context messages, no trim notice, then the window")
			for i, m := range *got {
				require.Equal(t, i < 3, m.Context, m.MessageID)
			}
			require.ElementsMatch(t, [][2]time.Time{{r.window.Add(-time.Hour), r.window}, {r.window, r.window.Add(time.Hour)}}, chat.spans)
			require.InDelta(t, 1, testutil.ToFloat64(r.m.contextFetches.WithLabelValues("ok")), 0)
		})
	}
}

// TestContextFromASloppySourceKeepsToItsSpan: a chat source that ignores
// the span cannot put window messages (or older ones) into the context.
func TestContextFromASloppySourceKeepsToItsSpan(t *testing.T) {
	t.Parallel()
	r, chat, got := contextRig(t)
	chat.sloppy = true
	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.Equal(t, jobloop.Delete, out.Action)
	ids := idsOf(*got)
	require.Equal(t, []string{"c2", "c3", "c4"}, ids[:3])
	require.NotContains(t, ids[:3], "too-old")
}

// TestAFailedContextFetchIsCountedAndTheReviewGoesOn: the context is a
// help, never a dependency of the verdict.
func TestAFailedContextFetchIsCountedAndTheReviewGoesOn(t *testing.T) {
	t.Parallel()
	r, chat, got := contextRig(t)
	chat.ctxErr = pipeline.Retryable(errors.New("chat api: 503"), 0)
	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.Equal(t, jobloop.Delete, out.Action)
	require.Equal(t, "done", out.Label)
	require.Equal(t, []string{"w1", "w2"}, idsOf(*got), "the window alone")
	require.InDelta(t, 1, testutil.ToFloat64(r.m.contextFetches.WithLabelValues("failed")), 0)
	require.InDelta(t, 0, testutil.ToFloat64(r.m.contextFetches.WithLabelValues("ok")), 0)
	v, err := r.store.Get(context.Background(), r.key())
	require.NoError(t, err)
	require.Equal(t, pipeline.StatusDone, v.Status)
}

// TestTheWindowsFetchStillDecides: the window's failure fails the attempt
// as before, with context on.
func TestTheWindowsFetchStillDecides(t *testing.T) {
	t.Parallel()
	r, chat, _ := contextRig(t)
	chat.winErr = pipeline.Retryable(errors.New("chat api: 503"), 0)
	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.NotEqual(t, jobloop.Delete, out.Action)
	require.Zero(t, r.rev.calls.Load())
	require.InDelta(t, 0, testutil.ToFloat64(r.m.contextFetches.WithLabelValues("failed")), 0, "not a context failure")
}

func TestContextOffFetchesTheWindowOnly(t *testing.T) {
	t.Parallel()
	for _, off := range []func(*Config){
		func(c *Config) { c.Context.Lookback = 0 },
		func(c *Config) { c.Context.Messages = 0 },
	} {
		r, chat, got := contextRig(t)
		off(&r.cfg)
		d := r.deps()
		d.Chat = chat
		r.build(d)
		r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
		require.Equal(t, []string{"w1", "w2"}, idsOf(*got))
		require.Len(t, chat.spans, 1)
	}
}

func TestContextSettingsAreValidated(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	require.Equal(t, time.Hour, c.Context.Lookback)
	require.Equal(t, 30, c.Context.Messages)
	c.Context.Lookback, c.Context.Messages = 25*time.Hour, 501
	err := c.Validate()
	require.ErrorContains(t, err, "context lookback 25h0m0s")
	require.ErrorContains(t, err, "context messages 501")
	c.Context.Lookback, c.Context.Messages = -time.Second, -1
	err = c.Validate()
	require.ErrorContains(t, err, "context lookback -1s")
	require.ErrorContains(t, err, "context messages -1")
	c.Context.Lookback, c.Context.Messages = 0, 0
	require.NoError(t, c.Validate(), "0 disables")
}
