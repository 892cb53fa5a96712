package console

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/sqs"
	"github.com/chatguard/chatguard/storage/storetest"
)

// countingSender counts the Send calls that reach the feedback queue.
type countingSender struct {
	next  FeedbackSender
	calls atomic.Int32
}

func (c *countingSender) Send(ctx context.Context, msgs []pipeline.OutMessage) error {
	c.calls.Add(1)
	return c.next.Send(ctx, msgs)
}

// TestOutboxSkipsWhatSQSRejects: against MariaDB and the stack's SQS
// (fauxqs), the ten oldest unsent decisions are about a room whose id
// holds a character SQS refuses in a message, so SQS rejects their events
// as the sender's fault on every send. A sweep marks them rejected with
// SQS's reason and counts them, and sends the newer decisions' events
// behind them; later sweeps never send the rejected ones again.
func TestOutboxSkipsWhatSQSRejects(t *testing.T) {
	t.Parallel()
	db, _ := stacktest.MySQL(t)
	ctx := testCtx(t)
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	st := mysql.New(db)
	verdict := func(room string) uint64 {
		v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: room, WindowStart: window, WindowEnd: window.Add(time.Hour), PipelineVersion: "v1"},
			RunID: "run-1", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategorySpam, Severity: 3,
			Action: pipeline.ActionWarn, Attempts: 1, PublishedAt: window, StartedAt: window, FinishedAt: window}
		storetest.MustSave(t, ctx, st, v)
		id, err := st.VerdictID(ctx, v.Key)
		require.NoError(t, err)
		return id
	}
	// U+FFFE is valid UTF-8 and JSON leaves it as it is, but it is
	// outside the characters SQS accepts in a message.
	bad, good := verdict("room-\uFFFE-refused"), verdict("room-good")
	t0 := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	var badIDs, goodIDs []uint64
	for i := range 15 {
		vid, ids := bad, &badIDs
		if i >= 10 {
			vid, ids = good, &goodIDs
		}
		id, err := st.AddDecision(ctx, moderation.Decision{VerdictID: vid, Moderator: "mod-1", Decision: moderation.DecisionConfirm,
			Label: pipeline.LabelAbusive, Category: pipeline.CategorySpam, DecidedAt: t0.Add(time.Duration(i) * time.Second)})
		require.NoError(t, err)
		*ids = append(*ids, id)
	}

	q := stacktest.NewQueue(t, "feedback-reject", 5, 30*time.Second)
	cfg := sqs.DefaultConfig()
	cfg.Name, cfg.URL = "feedback", q.URL
	queue, err := sqs.New(stacktest.SQS(t), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = queue.Close(context.Background()) })
	sender := &countingSender{next: queue}

	ocfg := DefaultOutboxConfig()
	clk := clock.NewFake(t0.Add(time.Hour))
	o := newOutbox(ocfg, st, sender, newFeedbackMetrics(nil), slog.New(slog.DiscardHandler), clk)
	o.backoff = ocfg.retryPolicy().Ceiling
	r := o.sweep(ctx)
	require.NoError(t, r.Err, "a refusal is handled, not a failed sweep")
	require.Equal(t, sweepResult{Sent: 5, Rejected: 10}, r)
	require.Equal(t, 10.0, testutil.ToFloat64(o.metrics.rejected))
	require.Equal(t, 10.0, testutil.ToFloat64(o.metrics.rejectedRows))
	require.Equal(t, 0.0, testutil.ToFloat64(o.metrics.unsent))
	require.Equal(t, 0.0, testutil.ToFloat64(o.metrics.oldest), "rejected rows do not age the backlog")

	// The good decisions' events are on the queue, each once.
	var got []string
	for len(got) < len(goodIDs) {
		require.NoError(t, ctx.Err(), "the good events never arrived")
		msgs, err := queue.Receive(ctx, pipeline.ReceiveRequest{Max: pipeline.MaxReceive, Wait: time.Second, Visibility: time.Minute})
		require.NoError(t, err)
		for _, m := range msgs {
			var ev feedbackMsg
			require.NoError(t, json.Unmarshal(m.Body, &ev))
			got = append(got, ev.EventID)
		}
	}
	var want []string
	for _, id := range goodIDs {
		want = append(want, feedbackEventID(id))
	}
	require.ElementsMatch(t, want, got)

	// The refused ones carry SQS's reason.
	for _, id := range badIDs {
		var (
			at     sql.NullTime
			reason string
		)
		require.NoError(t, db.QueryRowContext(ctx, `SELECT feedback_rejected_at, feedback_reject_reason FROM moderator_decisions WHERE id = ?`, id).
			Scan(&at, &reason))
		require.True(t, at.Valid, "decision %d marked rejected", id)
		require.Contains(t, reason, "InvalidMessageContents")
	}

	// Later sweeps, however much later, never send them again.
	calls := sender.calls.Load()
	for range 3 {
		clk.Advance(24 * time.Hour)
		require.Equal(t, sweepResult{}, o.sweep(ctx))
	}
	require.Equal(t, calls, sender.calls.Load(), "nothing left to send")
	require.Equal(t, 10.0, testutil.ToFloat64(o.metrics.rejected), "each refusal counted once")
}

// flakyRoom fails, transiently, every entry whose event is about room.
type flakyRoom struct {
	next FeedbackSender
	room string
}

func (f *flakyRoom) Send(ctx context.Context, msgs []pipeline.OutMessage) error {
	errs := make([]error, len(msgs))
	var pass []pipeline.OutMessage
	var at []int
	failed := false
	for i, m := range msgs {
		if strings.Contains(string(m.Body), f.room) {
			errs[i], failed = errors.New("InternalError: try again"), true
			continue
		}
		pass, at = append(pass, m), append(at, i)
	}
	for j, e := range pipeline.EntryErrors(f.next.Send(ctx, pass), len(pass)) {
		if e != nil {
			errs[at[j]], failed = e, true
		}
	}
	if failed {
		return &pipeline.BatchError{Errs: errs}
	}
	return nil
}

// TestOutboxBacksOffTransientFailuresPerRow: rows whose sends keep
// failing transiently back off one by one, so after one sweep newer
// decisions are sent past them; each failing row is tried again only once
// its own backoff has passed, and its backoff grows.
func TestOutboxBacksOffTransientFailuresPerRow(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t)
	ctx := testCtx(t)
	other := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: "room-later", WindowStart: window, WindowEnd: window.Add(time.Hour), PipelineVersion: "v1"},
		RunID: "run-1", Status: pipeline.StatusDone, Label: pipeline.LabelClean, Category: pipeline.CategoryClean, Severity: 1,
		Action: pipeline.ActionNone, Attempts: 1, PublishedAt: window, StartedAt: window, FinishedAt: window}
	storetest.MustSave(t, ctx, e.store, other)
	otherID, err := e.store.VerdictID(ctx, other.Key)
	require.NoError(t, err)
	for i := range 13 {
		vid, decision, cat := e.verdict, moderation.DecisionConfirm, pipeline.CategoryExternalPayment
		if i >= 10 {
			// The other verdict is clean: abusive/spam overturns it.
			vid, decision, cat = otherID, moderation.DecisionOverturn, pipeline.CategorySpam
		}
		_, err := e.store.AddDecision(ctx, moderation.Decision{VerdictID: vid, Moderator: "mod-1", Decision: decision,
			Label: pipeline.LabelAbusive, Category: cat, DecidedAt: e.t0.Add(time.Duration(i) * time.Second)})
		require.NoError(t, err)
	}
	o := e.sweeper(e.store, e.t0.Add(time.Hour))
	o.send = &flakyRoom{next: e.sender, room: "room-outbox"}

	r := o.sweep(ctx)
	require.Error(t, r.Err)
	require.Equal(t, sweepResult{Failed: 10, Err: r.Err}, r, "a batch with nothing accepted ends the sweep")
	r = o.sweep(ctx)
	require.NoError(t, r.Err)
	require.Equal(t, sweepResult{Sent: 3}, r, "the failed rows wait; the newer ones go past them")
	require.Len(t, e.queue.Messages(), 3)

	// First backoff ceiling: 30 s. Not before, then tried once more.
	e.clock.Advance(DefaultOutboxConfig().FeedbackRetryInitial - time.Microsecond)
	require.Equal(t, sweepResult{}, o.sweep(ctx))
	e.clock.Advance(time.Microsecond)
	r = o.sweep(ctx)
	require.Equal(t, 10, r.Failed)
	// Second failure: 60 s.
	e.clock.Advance(2*DefaultOutboxConfig().FeedbackRetryInitial - time.Microsecond)
	require.Equal(t, sweepResult{}, o.sweep(ctx))
	o.send = e.sender
	e.clock.Advance(time.Microsecond)
	r = o.sweep(ctx)
	require.NoError(t, r.Err)
	require.Equal(t, 10, r.Sent)
	require.Len(t, e.queue.Messages(), 13)
	require.Equal(t, 20.0, testutil.ToFloat64(o.metrics.failed.WithLabelValues("sweep")))
	require.Zero(t, testutil.ToFloat64(o.metrics.rejected))
}
