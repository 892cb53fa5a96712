package moderationtest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// OutboxStore is what the feedback outbox suite runs on: the port, and
// verdicts and decisions to send the feedback of.
type OutboxStore interface {
	moderation.Verdicts
	moderation.Decisions
	moderation.FeedbackOutbox
}

// addAt records a confirm of verdict id by moderator at at.
func addAt(t *testing.T, s moderation.Decisions, id uint64, moderator string, at time.Time) uint64 {
	t.Helper()
	did, err := s.AddDecision(testCtx(t), moderation.Decision{VerdictID: id, Moderator: moderator, Decision: moderation.DecisionConfirm,
		Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Note: "seen", DecidedAt: at})
	require.NoError(t, err)
	return did
}

// answer is a send function that records what it was handed and answers
// with results (or one Sent per row when results is nil) and err.
type answer struct {
	mu      sync.Mutex
	got     [][]moderation.UnsentFeedback
	results []moderation.FeedbackSend
	err     error
}

func (a *answer) send(_ context.Context, rows []moderation.UnsentFeedback) ([]moderation.FeedbackSend, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, rows)
	if a.results != nil {
		return a.results, a.err
	}
	out := make([]moderation.FeedbackSend, len(rows))
	for i := range out {
		out[i].Sent = true
	}
	return out, a.err
}

// RunFeedbackOutboxConformance checks moderation.FeedbackOutbox: a sweep
// takes unsent decisions older than the grace, oldest first, up to limit,
// with their verdict's fields; it marks sent, rejected (not taken again)
// and deferred (one more attempt, not taken before RetryAt) as send says,
// applies a partial batch and returns send's error as is, marks nothing
// for a result list of the wrong length or a context that ended, refuses
// a limit below 1, gives no decision to two concurrent sweeps, and the
// backlog counts what is unsent and rejected. newStore returns a store
// over empty, isolated storage.
func RunFeedbackOutboxConformance(t *testing.T, newStore func(t *testing.T) OutboxStore) {
	t.Helper()
	t.Run("grace order limit and fields", func(t *testing.T) { t.Parallel(); runSweepBasics(t, newStore(t)) })
	t.Run("rejected and deferred", func(t *testing.T) { t.Parallel(); runSweepOutcomes(t, newStore(t)) })
	t.Run("nothing marked", func(t *testing.T) { t.Parallel(); runSweepUnmarked(t, newStore(t)) })
	t.Run("concurrent sweeps", func(t *testing.T) { t.Parallel(); runSweepConcurrent(t, newStore(t)) })
	t.Run("an undo is swept", func(t *testing.T) { t.Parallel(); runSweepUndo(t, newStore(t)) })
}

// runSweepUndo: an undo is an outbox row like a decision (its event tells
// the lake the undone decision's no longer counts), swept with the
// decision it reverses and the label and category undone.
func runSweepUndo(t *testing.T, s OutboxStore) {
	ctx := testCtx(t)
	id := Seed(t, s, Verdict("room-out-undo"))
	first := addAt(t, s, id, "mod-a", T0)
	require.NoError(t, s.MarkFeedbackSent(ctx, T0, first))
	undo, err := s.AddDecision(ctx, moderation.Decision{VerdictID: id, Moderator: "mod-a", Decision: moderation.DecisionUndo,
		Reverses: first, DecidedAt: T0.Add(time.Minute)})
	require.NoError(t, err)
	a := &answer{}
	got, err := s.SweepUnsentFeedback(ctx, T0.Add(time.Hour), time.Minute, 10, a.send)
	require.NoError(t, err)
	require.Equal(t, moderation.FeedbackSweep{Taken: 1, Sent: 1}, got)
	row := a.got[0][0].Decision
	require.Equal(t, []uint64{undo, first}, []uint64{row.ID, row.Reverses})
	require.Equal(t, moderation.DecisionUndo, row.Decision)
	require.Equal(t, pipeline.LabelAbusive, row.Label)
	require.Equal(t, pipeline.CategoryExternalPayment, row.Category)
}

func runSweepBasics(t *testing.T, s OutboxStore) {
	ctx := testCtx(t)
	v := Verdict("room-out-1")
	id := Seed(t, s, v)
	second := addAt(t, s, id, "mod-b", T0.Add(time.Minute))
	first := addAt(t, s, id, "mod-a", T0)
	addAt(t, s, id, "mod-c", T0.Add(2*time.Minute))
	marked := addAt(t, s, id, "mod-d", T0)
	require.NoError(t, s.MarkFeedbackSent(ctx, T0, marked))
	now, grace := T0.Add(2*time.Minute+30*time.Second), time.Minute
	_, err := s.SweepUnsentFeedback(ctx, now, grace, 0, (&answer{}).send)
	requirePermanent(t, err)
	a := &answer{}
	got, err := s.SweepUnsentFeedback(ctx, now, grace, 1, a.send)
	require.NoError(t, err)
	require.Equal(t, moderation.FeedbackSweep{Taken: 1, Sent: 1}, got)
	require.Len(t, a.got, 1)
	row := a.got[0][0]
	require.Equal(t, first, row.Decision.ID, "oldest first")
	require.Equal(t, id, row.Decision.VerdictID)
	require.Equal(t, "mod-a", row.Decision.Moderator)
	require.Equal(t, "seen", row.Decision.Note)
	require.Equal(t, T0, row.Decision.DecidedAt)
	require.Equal(t, v.Key, row.Key)
	require.Equal(t, v.Label, row.VerdictLabel)
	require.Equal(t, v.Category, row.VerdictCategory)
	require.Equal(t, v.Action, row.Action)
	require.Zero(t, row.Attempts)
	a = &answer{}
	got, err = s.SweepUnsentFeedback(ctx, now, grace, 10, a.send)
	require.NoError(t, err)
	require.Equal(t, 1, got.Taken, "a decision within the grace waits; a sent one is not taken again")
	require.Equal(t, second, a.got[0][0].Decision.ID)
	ds, err := s.Decisions(ctx, id, 10)
	require.NoError(t, err)
	for _, d := range ds {
		switch d.ID {
		case first, second:
			require.Equal(t, now, d.FeedbackSentAt, "marked sent at now")
		case marked:
			require.Equal(t, T0, d.FeedbackSentAt, "a mark keeps its first time")
		default:
			require.True(t, d.FeedbackSentAt.IsZero())
		}
	}
	b, err := s.FeedbackBacklog(ctx)
	require.NoError(t, err)
	require.Equal(t, moderation.FeedbackBacklog{Unsent: 1, Oldest: T0.Add(2 * time.Minute)}, b)
}

func runSweepOutcomes(t *testing.T, s OutboxStore) {
	ctx := testCtx(t)
	id := Seed(t, s, Verdict("room-out-2"))
	rejected := addAt(t, s, id, "mod-a", T0)
	deferred := addAt(t, s, id, "mod-b", T0.Add(time.Second))
	sent := addAt(t, s, id, "mod-c", T0.Add(2*time.Second))
	now := T0.Add(time.Hour)
	retry := now.Add(10 * time.Minute)
	a := &answer{results: []moderation.FeedbackSend{{Rejected: strings.Repeat("é", moderation.MaxRejectReason+5)}, {RetryAt: retry}, {Sent: true}},
		err: errors.New("sqs: partly throttled")}
	got, err := s.SweepUnsentFeedback(ctx, now, time.Minute, 10, a.send)
	require.ErrorIs(t, err, a.err, "send's error, with its results applied")
	require.Equal(t, moderation.FeedbackSweep{Taken: 3, Sent: 1, Rejected: 1, Deferred: 1}, got)
	require.Equal(t, []uint64{rejected, deferred, sent}, decisionIDs(a.got[0]))
	b, err := s.FeedbackBacklog(ctx)
	require.NoError(t, err)
	require.Equal(t, moderation.FeedbackBacklog{Unsent: 1, Oldest: T0.Add(time.Second), Rejected: 1}, b, "a deferred decision is still unsent")
	a = &answer{}
	got, err = s.SweepUnsentFeedback(ctx, retry.Add(-time.Microsecond), time.Minute, 10, a.send)
	require.NoError(t, err)
	require.Zero(t, got.Taken, "neither a rejected nor a deferred decision is taken before its time")
	got, err = s.SweepUnsentFeedback(ctx, retry, time.Minute, 10, a.send)
	require.NoError(t, err)
	require.Equal(t, moderation.FeedbackSweep{Taken: 1, Sent: 1}, got)
	require.Equal(t, deferred, a.got[0][0].Decision.ID)
	require.Equal(t, 1, a.got[0][0].Attempts, "the failed attempt is counted")
	b, err = s.FeedbackBacklog(ctx)
	require.NoError(t, err)
	require.Equal(t, moderation.FeedbackBacklog{Rejected: 1}, b)
}

func decisionIDs(rows []moderation.UnsentFeedback) []uint64 {
	out := make([]uint64, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.Decision.ID)
	}
	return out
}

func runSweepUnmarked(t *testing.T, s OutboxStore) {
	ctx := testCtx(t)
	id := Seed(t, s, Verdict("room-out-3"))
	d1, d2 := addAt(t, s, id, "mod-a", T0), addAt(t, s, id, "mod-b", T0.Add(time.Second))
	now := T0.Add(time.Hour)
	a := &answer{results: []moderation.FeedbackSend{{Sent: true}}}
	got, err := s.SweepUnsentFeedback(ctx, now, time.Minute, 10, a.send)
	require.Error(t, err, "a result list of the wrong length")
	require.Equal(t, 2, got.Taken)
	sctx, cancel := context.WithCancel(ctx)
	got, err = s.SweepUnsentFeedback(sctx, now, time.Minute, 10, func(c context.Context, rows []moderation.UnsentFeedback) ([]moderation.FeedbackSend, error) {
		cancel()
		return []moderation.FeedbackSend{{Sent: true}, {Sent: true}}, nil
	})
	require.Error(t, err, "the context ended before the marks were stored")
	require.Zero(t, got.Sent)
	a = &answer{}
	got, err = s.SweepUnsentFeedback(ctx, now, time.Minute, 10, a.send)
	require.NoError(t, err)
	require.Equal(t, moderation.FeedbackSweep{Taken: 2, Sent: 2}, got)
	require.Equal(t, []uint64{d1, d2}, decisionIDs(a.got[0]), "sent again, with the same ids")
	require.Zero(t, a.got[0][0].Attempts, "nothing was marked, not even an attempt")
}

func runSweepConcurrent(t *testing.T, s OutboxStore) {
	ctx := testCtx(t)
	id := Seed(t, s, Verdict("room-out-4"))
	const n = 12
	for i := range n {
		addAt(t, s, id, "mod-a", T0.Add(time.Duration(i)*time.Second))
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[uint64]int{}
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				a := &answer{}
				got, err := s.SweepUnsentFeedback(ctx, T0.Add(time.Hour), time.Minute, 2, a.send)
				if err != nil {
					t.Errorf("sweep: %v", err)
					return
				}
				if got.Taken == 0 {
					return
				}
				mu.Lock()
				for _, r := range a.got[0] {
					seen[r.Decision.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, seen, n, "every decision is sent")
	for id, times := range seen {
		require.Equal(t, 1, times, "decision %d was handed to two sweeps", id)
	}
}
