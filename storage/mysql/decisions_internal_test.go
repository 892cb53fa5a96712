package mysql

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

func TestDecisionsAndVerdictByID(t *testing.T) {
	_, s := migrated(t)
	ctx := ctxT(t)
	ws := time.Date(2026, 11, 2, 19, 0, 0, 0, time.UTC)
	v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: "room-d", WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1"},
		RunID: "run", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategorySpam, Severity: 3,
		Action: pipeline.ActionWarn, EvidenceIDs: []string{"m1"}, Attempts: 1, PublishedAt: ws, StartedAt: ws, FinishedAt: ws}
	storetest.MustSave(t, ctx, s, v)
	id, err := s.VerdictID(ctx, v.Key)
	require.NoError(t, err)
	got, err := s.VerdictByID(ctx, id)
	require.NoError(t, err)
	require.Equal(t, v.Key, got.Key)
	require.Equal(t, []string{"m1"}, got.EvidenceIDs)
	_, err = s.VerdictByID(ctx, id+1000)
	require.ErrorIs(t, err, pipeline.ErrVerdictNotFound)

	_, err = s.AddDecision(ctx, moderation.Decision{VerdictID: id, Moderator: "mod-1", Decision: "maybe", Label: "clean", DecidedAt: ws})
	var perm *pipeline.PermanentError
	require.ErrorAs(t, err, &perm)
	_, err = s.AddDecision(ctx, moderation.Decision{VerdictID: id + 1000, Moderator: "mod-1", Decision: moderation.DecisionConfirm, Label: pipeline.LabelAbusive, DecidedAt: ws})
	require.ErrorIs(t, err, pipeline.ErrVerdictNotFound, "the foreign key refuses a decision on no verdict")

	_, err = s.AddDecision(ctx, moderation.Decision{VerdictID: id, Moderator: "mod-1", Decision: moderation.DecisionConfirm, Label: pipeline.LabelAbusive, Category: pipeline.CategorySpam, DecidedAt: ws.Add(time.Minute)})
	require.NoError(t, err)
	_, err = s.AddDecision(ctx, moderation.Decision{VerdictID: id, Moderator: "mod-2", Decision: moderation.DecisionOverturn, Label: pipeline.LabelClean, Note: "haggling", DecidedAt: ws.Add(2 * time.Minute)})
	require.NoError(t, err)
	ds, err := s.Decisions(ctx, id, 10)
	require.NoError(t, err)
	require.Len(t, ds, 2)
	require.Equal(t, "mod-2", ds[0].Moderator, "newest first: the decision in force")
	require.Equal(t, "haggling", ds[0].Note)

	// A decided verdict leaves the default queue.
	page, err := s.ListQueue(ctx, moderation.QueueFilter{}, "")
	require.NoError(t, err)
	require.Empty(t, page.Items)
}
