package mysql

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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

func idsOf(rows []UnsentFeedback) []uint64 {
	out := make([]uint64, len(rows))
	for i, r := range rows {
		out[i] = r.Decision.ID
	}
	return out
}

func TestFeedbackOutboxSweepMarksAndBacklog(t *testing.T) {
	_, s := migrated(t)
	ctx := ctxT(t)
	vid := outboxFixture(t, s, "room-outbox")
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	var dec []uint64
	for i := range 4 {
		id, err := s.AddDecision(ctx, Decision{VerdictID: vid, Moderator: "mod-1", Decision: DecisionOverturn, Label: pipeline.LabelClean,
			DecidedAt: t0.Add(time.Duration(i) * time.Minute)})
		require.NoError(t, err)
		dec = append(dec, id)
	}
	n, oldest, err := s.FeedbackBacklog(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, t0, oldest)

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
	var got []UnsentFeedback
	taken, marked, err := s.SweepUnsentFeedback(ctx, now, time.Minute, 10, func(_ context.Context, rows []UnsentFeedback) ([]uint64, error) {
		got = rows
		return []uint64{rows[1].Decision.ID}, errors.New("sqs: throttled")
	})
	require.EqualError(t, err, "sqs: throttled")
	require.Equal(t, 2, taken, "dec[3] is inside the grace period, dec[0] sent")
	require.Equal(t, 1, marked)
	require.Equal(t, []uint64{dec[1], dec[2]}, idsOf(got))
	require.Equal(t, "room-outbox", got[0].Key.RoomID)
	require.Equal(t, pipeline.LabelAbusive, got[0].VerdictLabel)
	require.Equal(t, pipeline.ActionWarn, got[0].Action)
	require.Equal(t, t0.Add(time.Minute), got[0].Decision.DecidedAt)
	require.Equal(t, pipeline.LabelClean, got[0].Decision.Label)

	n, oldest, err = s.FeedbackBacklog(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, t0.Add(time.Minute), oldest)

	// A send that accepts nothing marks nothing.
	taken, marked, err = s.SweepUnsentFeedback(ctx, now, time.Minute, 10, func(context.Context, []UnsentFeedback) ([]uint64, error) {
		return nil, errors.New("sqs: down")
	})
	require.Error(t, err)
	require.Equal(t, 1, taken)
	require.Zero(t, marked)
	taken, marked, err = s.SweepUnsentFeedback(ctx, now.Add(time.Hour), time.Minute, 10, func(_ context.Context, rows []UnsentFeedback) ([]uint64, error) {
		return idsOf(rows), nil
	})
	require.NoError(t, err)
	require.Equal(t, 2, taken)
	require.Equal(t, 2, marked)
	n, oldest, err = s.FeedbackBacklog(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.True(t, oldest.IsZero())
}

// TestFeedbackOutboxTwoSweepersTakeDistinctRows: while one console holds a
// batch (its send in flight), a second console's sweep skips those rows.
func TestFeedbackOutboxTwoSweepersTakeDistinctRows(t *testing.T) {
	_, s := migrated(t)
	ctx := ctxT(t)
	vid := outboxFixture(t, s, "room-two")
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	for i := range 3 {
		_, err := s.AddDecision(ctx, Decision{VerdictID: vid, Moderator: "mod-1", Decision: DecisionConfirm, Label: pipeline.LabelAbusive,
			Category: pipeline.CategorySpam, DecidedAt: t0.Add(time.Duration(i) * time.Second)})
		require.NoError(t, err)
	}
	now := t0.Add(time.Hour)
	holding, release := make(chan []uint64), make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		_, _, err := s.SweepUnsentFeedback(ctx, now, time.Minute, 2, func(_ context.Context, rows []UnsentFeedback) ([]uint64, error) {
			holding <- idsOf(rows)
			<-release
			return idsOf(rows), nil
		})
		firstDone <- err
	}()
	first := <-holding
	require.Len(t, first, 2)
	var second []uint64
	_, _, err := s.SweepUnsentFeedback(ctx, now, time.Minute, 10, func(_ context.Context, rows []UnsentFeedback) ([]uint64, error) {
		second = idsOf(rows)
		return second, nil
	})
	require.NoError(t, err)
	require.Len(t, second, 1)
	require.NotContains(t, first, second[0], "the locked rows are skipped, not sent twice")
	close(release)
	require.NoError(t, <-firstDone)
	n, _, err := s.FeedbackBacklog(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}
