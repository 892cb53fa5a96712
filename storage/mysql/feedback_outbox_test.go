package mysql

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

// outboxFixture saves one verdict and returns its id.
func outboxFixture(t *testing.T, s *Store, room string) uint64 {
	t.Helper()
	ws := time.Date(2026, 11, 2, 19, 0, 0, 0, time.UTC)
	v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: room, WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1"},
		RunID: "run", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategorySpam, Severity: 3,
		Action: pipeline.ActionWarn, Attempts: 1, PublishedAt: ws, StartedAt: ws, FinishedAt: ws}
	storetest.MustSave(t, ctxT(t), s, v)
	id, err := s.VerdictID(ctxT(t), v.Key)
	require.NoError(t, err)
	return id
}

func idsOf(rows []moderation.UnsentFeedback) []uint64 {
	out := make([]uint64, len(rows))
	for i, r := range rows {
		out[i] = r.Decision.ID
	}
	return out
}

// sentOnly reports the rows with the ids in sent as sent and the others as
// failed (to be retried at the next sweep).
func sentOnly(rows []moderation.UnsentFeedback, sent ...uint64) []moderation.FeedbackSend {
	out := make([]moderation.FeedbackSend, len(rows))
	for i, r := range rows {
		out[i].Sent = slices.Contains(sent, r.Decision.ID)
	}
	return out
}

func allSent(rows []moderation.UnsentFeedback) []moderation.FeedbackSend {
	return sentOnly(rows, idsOf(rows)...)
}

func TestFeedbackOutboxSweepMarksAndBacklog(t *testing.T) {
	_, s := migrated(t)
	ctx := ctxT(t)
	vid := outboxFixture(t, s, "room-outbox")
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	var dec []uint64
	for i := range 4 {
		id, err := s.AddDecision(ctx, moderation.Decision{VerdictID: vid, Moderator: "mod-1", Decision: moderation.DecisionOverturn, Label: pipeline.LabelClean,
			DecidedAt: t0.Add(time.Duration(i) * time.Minute)})
		require.NoError(t, err)
		dec = append(dec, id)
	}
	b, err := s.FeedbackBacklog(ctx)
	require.NoError(t, err)
	require.Equal(t, moderation.FeedbackBacklog{Unsent: 4, Oldest: t0}, b)

	// The console marks what SQS accepted on the request path.
	require.NoError(t, s.MarkFeedbackSent(ctx, t0.Add(time.Minute), dec[0]))
	require.NoError(t, s.MarkFeedbackSent(ctx, t0.Add(time.Hour), dec[0]), "a second mark keeps the first time")
	ds, err := s.Decisions(ctx, vid, 10)
	require.NoError(t, err)
	require.Equal(t, t0.Add(time.Minute), ds[len(ds)-1].FeedbackSentAt)
	require.True(t, ds[0].FeedbackSentAt.IsZero())

	// Only rows older than the grace period are taken; send fails one of
	// two: the other is marked, the failed one stays for the next sweep.
	now := t0.Add(3*time.Minute + 30*time.Second)
	var got []moderation.UnsentFeedback
	sw, err := s.SweepUnsentFeedback(ctx, now, time.Minute, 10, func(_ context.Context, rows []moderation.UnsentFeedback) ([]moderation.FeedbackSend, error) {
		got = rows
		return sentOnly(rows, rows[1].Decision.ID), errors.New("sqs: throttled")
	})
	require.EqualError(t, err, "sqs: throttled")
	require.Equal(t, moderation.FeedbackSweep{Taken: 2, Sent: 1, Deferred: 1}, sw, "dec[3] is inside the grace period, dec[0] sent")
	require.Equal(t, []uint64{dec[1], dec[2]}, idsOf(got))
	require.Equal(t, "room-outbox", got[0].Key.RoomID)
	require.Equal(t, pipeline.LabelAbusive, got[0].VerdictLabel)
	require.Equal(t, pipeline.ActionWarn, got[0].Action)
	require.Equal(t, t0.Add(time.Minute), got[0].Decision.DecidedAt)
	require.Equal(t, pipeline.LabelClean, got[0].Decision.Label)

	b, err = s.FeedbackBacklog(ctx)
	require.NoError(t, err)
	require.Equal(t, moderation.FeedbackBacklog{Unsent: 2, Oldest: t0.Add(time.Minute)}, b)

	// A send that accepts nothing marks nothing sent; a result list that
	// does not match the rows marks nothing at all.
	sw, err = s.SweepUnsentFeedback(ctx, now, time.Minute, 10, func(_ context.Context, rows []moderation.UnsentFeedback) ([]moderation.FeedbackSend, error) {
		return sentOnly(rows), errors.New("sqs: down")
	})
	require.Error(t, err)
	require.Equal(t, moderation.FeedbackSweep{Taken: 1, Deferred: 1}, sw)
	sw, err = s.SweepUnsentFeedback(ctx, now, time.Minute, 10, func(context.Context, []moderation.UnsentFeedback) ([]moderation.FeedbackSend, error) {
		return nil, nil
	})
	require.ErrorContains(t, err, "0 results for 1 rows")
	require.Equal(t, moderation.FeedbackSweep{Taken: 1}, sw)
	sw, err = s.SweepUnsentFeedback(ctx, now.Add(time.Hour), time.Minute, 10, func(_ context.Context, rows []moderation.UnsentFeedback) ([]moderation.FeedbackSend, error) {
		require.Equal(t, []int{2, 0}, []int{rows[0].Attempts, rows[1].Attempts}, "failed sends are counted on the row")
		return allSent(rows), nil
	})
	require.NoError(t, err)
	require.Equal(t, moderation.FeedbackSweep{Taken: 2, Sent: 2}, sw)
	b, err = s.FeedbackBacklog(ctx)
	require.NoError(t, err)
	require.Equal(t, moderation.FeedbackBacklog{}, b)
}

// TestFeedbackOutboxTwoSweepersTakeDistinctRows: while one console holds a
// batch (its send in flight), a second console's sweep skips those rows.
func TestFeedbackOutboxTwoSweepersTakeDistinctRows(t *testing.T) {
	_, s := migrated(t)
	ctx := ctxT(t)
	vid := outboxFixture(t, s, "room-two")
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	for i := range 3 {
		_, err := s.AddDecision(ctx, moderation.Decision{VerdictID: vid, Moderator: "mod-1", Decision: moderation.DecisionConfirm, Label: pipeline.LabelAbusive,
			Category: pipeline.CategorySpam, DecidedAt: t0.Add(time.Duration(i) * time.Second)})
		require.NoError(t, err)
	}
	now := t0.Add(time.Hour)
	holding, release := make(chan []uint64), make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		_, err := s.SweepUnsentFeedback(ctx, now, time.Minute, 2, func(_ context.Context, rows []moderation.UnsentFeedback) ([]moderation.FeedbackSend, error) {
			holding <- idsOf(rows)
			<-release
			return allSent(rows), nil
		})
		firstDone <- err
	}()
	first := <-holding
	require.Len(t, first, 2)
	var second []uint64
	_, err := s.SweepUnsentFeedback(ctx, now, time.Minute, 10, func(_ context.Context, rows []moderation.UnsentFeedback) ([]moderation.FeedbackSend, error) {
		second = idsOf(rows)
		return allSent(rows), nil
	})
	require.NoError(t, err)
	require.Len(t, second, 1)
	require.NotContains(t, first, second[0], "the locked rows are skipped, not sent twice")
	close(release)
	require.NoError(t, <-firstDone)
	b, err := s.FeedbackBacklog(ctx)
	require.NoError(t, err)
	require.Zero(t, b.Unsent)
}

// TestFeedbackOutboxSkipsRejectedAndDeferredRows: a row SQS refused is
// marked with the reason and never taken again, and leaves the backlog's
// age; a row whose send failed is not taken again before its retry time.
func TestFeedbackOutboxSkipsRejectedAndDeferredRows(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	ctx := ctxT(t)
	vid := outboxFixture(t, s, "room-skip")
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	var dec []uint64
	for i := range 3 {
		id, err := s.AddDecision(ctx, moderation.Decision{VerdictID: vid, Moderator: "mod-1", Decision: moderation.DecisionConfirm, Label: pipeline.LabelAbusive,
			Category: pipeline.CategorySpam, DecidedAt: t0.Add(time.Duration(i) * time.Second)})
		require.NoError(t, err)
		dec = append(dec, id)
	}
	now := t0.Add(time.Hour)
	reason := "InvalidMessageContents: Invalid characters found. " + strings.Repeat("x", 600)
	sw, err := s.SweepUnsentFeedback(ctx, now, time.Minute, 10, func(_ context.Context, rows []moderation.UnsentFeedback) ([]moderation.FeedbackSend, error) {
		require.Equal(t, dec, idsOf(rows))
		return []moderation.FeedbackSend{{Rejected: reason}, {RetryAt: now.Add(10 * time.Minute)}, {Sent: true}}, nil
	})
	require.NoError(t, err)
	require.Equal(t, moderation.FeedbackSweep{Taken: 3, Sent: 1, Rejected: 1, Deferred: 1}, sw)

	var (
		rejectedAt time.Time
		got        string
	)
	require.NoError(t, db.QueryRowContext(ctx, `SELECT feedback_rejected_at, feedback_reject_reason FROM moderator_decisions WHERE id = ?`, dec[0]).
		Scan(&rejectedAt, &got))
	require.Equal(t, now, rejectedAt)
	require.Equal(t, pipeline.ClipRunes(reason, 500), got, "the reason, clipped to its column")

	b, err := s.FeedbackBacklog(ctx)
	require.NoError(t, err)
	require.Equal(t, moderation.FeedbackBacklog{Unsent: 1, Oldest: t0.Add(time.Second), Rejected: 1}, b, "a rejected row waits for an operator, outside the unsent age")

	for _, at := range []time.Time{now, now.Add(10*time.Minute - time.Microsecond)} {
		sw, err = s.SweepUnsentFeedback(ctx, at, time.Minute, 10, func(_ context.Context, rows []moderation.UnsentFeedback) ([]moderation.FeedbackSend, error) {
			t.Fatalf("took %v: the rejected row is never taken, the deferred one not before its time", idsOf(rows))
			return nil, nil
		})
		require.NoError(t, err)
		require.Zero(t, sw.Taken)
	}
	sw, err = s.SweepUnsentFeedback(ctx, now.Add(10*time.Minute), time.Minute, 10, func(_ context.Context, rows []moderation.UnsentFeedback) ([]moderation.FeedbackSend, error) {
		require.Equal(t, []uint64{dec[1]}, idsOf(rows))
		require.Equal(t, 1, rows[0].Attempts)
		return allSent(rows), nil
	})
	require.NoError(t, err)
	require.Equal(t, moderation.FeedbackSweep{Taken: 1, Sent: 1}, sw)
	b, err = s.FeedbackBacklog(ctx)
	require.NoError(t, err)
	require.Equal(t, moderation.FeedbackBacklog{Rejected: 1}, b)
}
