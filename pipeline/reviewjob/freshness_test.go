package reviewjob

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// fixedChat answers every window with the same messages: one before the
// window (context a review may be given), two inside it, and the notice of
// a trimmed history, which is no chat message.
type fixedChat struct{ msgs []pipeline.ChatMessage }

func (c fixedChat) History(context.Context, string, time.Time, time.Time) ([]pipeline.ChatMessage, error) {
	return c.msgs, nil
}

func freshnessOf(t *testing.T, h *prometheus.HistogramVec, source string) (count uint64, sum float64) {
	t.Helper()
	var m dto.Metric
	require.NoError(t, h.WithLabelValues(source).(prometheus.Histogram).Write(&m))
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// A committed done verdict is observed from its window's newest and oldest
// message to the commit, under the event's source (none reads as batch),
// and keeps both times for the console; messages outside the window and
// the trim notice do not count.
func TestFreshnessIsMeasuredFromTheWindowsMessagesToTheCommit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		source pipeline.ReviewSource
		label  string
	}{{pipeline.SourceRealtime, "realtime"}, {"", "batch"}, {pipeline.SourceSweep, "sweep"}} {
		r := setupReview(t)
		ws := r.window
		oldest, newest := ws.Add(10*time.Minute), ws.Add(55*time.Minute)
		chat := fixedChat{msgs: []pipeline.ChatMessage{
			{MessageID: "before", SentAt: ws.Add(-2 * time.Minute), Kind: pipeline.KindText},
			{MessageID: "m1", SentAt: newest, Kind: pipeline.KindText},
			{MessageID: "m0", SentAt: oldest, Kind: pipeline.KindText},
			pipeline.HistoryTrim{Dropped: 1}.Notice(ws.Add(59 * time.Minute)),
		}}
		r.rev.review = func(context.Context, pipeline.ReviewEvent, []pipeline.ChatMessage, int) (pipeline.Verdict, error) {
			r.clk.Advance(20 * time.Second) // the review takes time; freshness ends at the commit
			return abusive(), nil
		}
		deps := r.deps()
		deps.Chat = chat
		r.build(deps)
		out := r.h.Handle(context.Background(), msg(r.body(t, func(ev *pipeline.ReviewEvent) { ev.Source = tc.source }), 1, 5))
		require.Equal(t, jobloop.Delete, out.Action)

		v, err := r.store.Get(context.Background(), r.key())
		require.NoError(t, err)
		require.Equal(t, oldest, v.OldestMessageAt)
		require.Equal(t, newest, v.NewestMessageAt)
		d, ok := v.Freshness()
		require.True(t, ok)
		require.Equal(t, 15*time.Minute+20*time.Second, d) // 05:10:20 - 04:55

		n, sum := freshnessOf(t, r.m.freshness, tc.label)
		require.Equal(t, uint64(1), n, "source %q", tc.source)
		require.InDelta(t, (15*time.Minute + 20*time.Second).Seconds(), sum, 1e-9)
		n, sum = freshnessOf(t, r.m.freshnessOldest, tc.label)
		require.Equal(t, uint64(1), n)
		require.InDelta(t, (time.Hour + 20*time.Second).Seconds(), sum, 1e-9)
		require.Equal(t, 2.0, testutil.ToFloat64(r.m.covered.WithLabelValues(tc.label)), "m0 and m1: not the message before the window, nor the trim notice")
	}
}

// Only committed done verdicts have a freshness: a failed review, and a
// redelivery whose verdict the store already holds, observe nothing.
func TestFreshnessCountsOnlyCommittedDoneVerdicts(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	r.rev.review = func(context.Context, pipeline.ReviewEvent, []pipeline.ChatMessage, int) (pipeline.Verdict, error) {
		return pipeline.Verdict{}, pipeline.Permanent(context.DeadlineExceeded)
	}
	out := r.h.Handle(context.Background(), msg(r.body(t), 5, 5))
	require.NotEqual(t, "done", out.Label)
	n, _ := freshnessOf(t, r.m.freshness, "batch")
	require.Zero(t, n)
	require.Zero(t, testutil.ToFloat64(r.m.covered.WithLabelValues("batch")), "a failed review covers nothing")

	r.rev.review = nil
	require.Equal(t, "done", r.h.Handle(context.Background(), msg(r.body(t, func(ev *pipeline.ReviewEvent) { ev.RunID = "run-2" }), 1, 5)).Label)
	require.Equal(t, "duplicate", r.h.Handle(context.Background(), msg(r.body(t, func(ev *pipeline.ReviewEvent) { ev.RunID = "run-2" }), 1, 5)).Label)
	n, _ = freshnessOf(t, r.m.freshness, "batch")
	require.Equal(t, uint64(1), n, "the redelivered duplicate is not a second verdict")
}

func TestMessageSpanKeepsToTheWindow(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	to := from.Add(5 * time.Minute)
	o, n := pipeline.MessageSpan(nil, from, to)
	require.True(t, o.IsZero() && n.IsZero(), "no message: unknown")
	o, n = pipeline.MessageSpan([]pipeline.ChatMessage{{MessageID: "a", SentAt: to}, {MessageID: "b", SentAt: from}}, from, to)
	require.Equal(t, from, o, "the start is inside the half-open window")
	require.Equal(t, from, n, "the end is not")
	_, ok := (pipeline.Verdict{FinishedAt: to}).Freshness()
	require.False(t, ok, "no newest message: unknown")
	d, ok := (pipeline.Verdict{FinishedAt: from, NewestMessageAt: to}).Freshness()
	require.True(t, ok)
	require.Zero(t, d, "a producer clock ahead reads as fresh, never negative")
}
