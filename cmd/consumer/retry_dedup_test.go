package main

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// reviewEvents are the lake events one run of a review emits, with the
// worker's derived ids: an inference log per stage attempt, the verdict
// event and a candidate's shadow verdict. shift moves the run later (a retry, a second pod) and changes what
// a rerun measures differently (latencies), never the ids.
func reviewEvents(room string, at time.Time, shift time.Duration) []pipeline.LakeEvent {
	k := pipeline.ReviewKey{RoomID: room, WindowStart: at.Truncate(time.Hour).Add(-time.Hour), WindowEnd: at.Truncate(time.Hour), PipelineVersion: "pv-dedup"}
	occurred := at.Add(shift)
	var evs []pipeline.LakeEvent
	for _, sa := range []struct {
		stage   pipeline.StageName
		attempt int
	}{{pipeline.StageTriage, 1}, {pipeline.StageExtract, 1}, {pipeline.StageJudge, 1}, {pipeline.StageJudge, 2}} {
		evs = append(evs, pipeline.LakeEvent{
			EventID: pipeline.InferenceLogEventID(k, sa.stage, sa.attempt), EventType: pipeline.EventInferenceLog,
			OccurredAt: occurred, SchemaVersion: pipeline.LakeEventSchemaVersion,
			Payload: pipeline.InferenceLog{RoomID: k.RoomID, WindowStart: k.WindowStart, WindowEnd: k.WindowEnd, PipelineVersion: k.PipelineVersion,
				RunID: "run-1", Stage: sa.stage, Pool: pipeline.PoolPrimary, Model: "m", Attempt: sa.attempt, Outcome: "ok",
				LatencyMs: float64(100 + shift.Milliseconds()), PromptSHA256: "00", PromptChars: 10, Messages: 3},
		})
	}
	evs = append(evs, pipeline.LakeEvent{
		EventID: pipeline.VerdictEventID(k, pipeline.StatusDone), EventType: pipeline.EventVerdict,
		OccurredAt: occurred, SchemaVersion: pipeline.LakeEventSchemaVersion,
		Payload: pipeline.VerdictEvent{RoomID: k.RoomID, WindowStart: k.WindowStart, WindowEnd: k.WindowEnd, PipelineVersion: k.PipelineVersion,
			RunID: "run-1", Status: pipeline.StatusDone, Label: pipeline.LabelClean, Category: pipeline.CategoryClean, Attempts: 1,
			LatencyMs: float64(500 + shift.Milliseconds())},
	})
	evs = append(evs, pipeline.LakeEvent{
		EventID: pipeline.ShadowVerdictEventID(k, "candidate-a"), EventType: pipeline.EventShadowVerdict,
		OccurredAt: occurred, SchemaVersion: pipeline.LakeEventSchemaVersion,
		Payload: pipeline.ShadowVerdict{RoomID: k.RoomID, WindowStart: k.WindowStart, WindowEnd: k.WindowEnd, PipelineVersion: k.PipelineVersion,
			RunID: "run-1", Candidate: "candidate-a", CandidatePipelineVersion: "pv-candidate", Outcome: pipeline.ShadowOK,
			LiveLabel: pipeline.LabelClean, Label: pipeline.LabelClean, LatencyMs: float64(700 + shift.Milliseconds()),
			Stages: []pipeline.ShadowStage{{Stage: pipeline.StageTriage, TokensIn: 10, TokensOut: 2, LatencyMs: 50}}},
	})
	return evs
}

// A review that ran twice (a retry, a duplicate delivery on a second pod)
// writes every event twice to the raw tables; the _dedup views return each
// once, because the worker derives the ids from the review key.
func TestStackRetriedReviewCollapsesInDedupViews(t *testing.T) {
	t.Parallel()
	s := setupStack(t)
	at := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Hour).Add(10 * time.Minute)
	want := map[string]pipeline.LakeEvent{}
	var first, again []pipeline.LakeEvent
	for _, room := range []string{"room-a", "room-b", "room-c"} {
		first = append(first, reviewEvents(room, at, 0)...)
		again = append(again, reviewEvents(room, at, 3*time.Minute)...)
	}
	// A moderator's decision, sent once: every table must have rows.
	first = append(first, pipeline.LakeEvent{EventID: uuid.NewString(), EventType: pipeline.EventModeratorFeedback, OccurredAt: at,
		SchemaVersion: pipeline.LakeEventSchemaVersion, Payload: pipeline.ModeratorFeedback{RoomID: "room-a", WindowStart: at.Add(-time.Hour),
			WindowEnd: at, PipelineVersion: "pv-dedup", ModeratorID: "mod-1", VerdictLabel: pipeline.LabelClean, VerdictCategory: pipeline.CategoryClean,
			DecidedLabel: pipeline.LabelClean, DecidedCategory: pipeline.CategoryClean, ActionTaken: pipeline.ActionNone}})
	// Another decision and its undo, as the console sends them: both
	// reach the raw table, field by field, and neither the dedup view.
	undone := pipeline.LakeEvent{EventID: uuid.NewString(), EventType: pipeline.EventModeratorFeedback, OccurredAt: at.Add(time.Minute),
		SchemaVersion: pipeline.LakeEventSchemaVersion, Payload: pipeline.ModeratorFeedback{RoomID: "room-b", WindowStart: at.Add(-time.Hour),
			WindowEnd: at, PipelineVersion: "pv-dedup", ModeratorID: "mod-2", VerdictLabel: pipeline.LabelClean, VerdictCategory: pipeline.CategoryClean,
			DecidedLabel: pipeline.LabelAbusive, DecidedCategory: pipeline.CategoryPhishingLink, ActionTaken: pipeline.ActionNone}}
	undoP := undone.Payload.(pipeline.ModeratorFeedback)
	undoP.Decision, undoP.ReversesEventID = pipeline.FeedbackUndo, undone.EventID
	undo := pipeline.LakeEvent{EventID: uuid.NewString(), EventType: pipeline.EventModeratorFeedback, OccurredAt: at.Add(2 * time.Minute),
		SchemaVersion: pipeline.LakeEventSchemaVersion, Payload: undoP}
	first = append(first, undone, undo)
	for k, v := range s.sendEvents(t, first) {
		want[k] = v
	}
	for _, ev := range again {
		require.Contains(t, want, ev.EventID, "the rerun emits the first run's ids")
	}
	s.sendEvents(t, again)
	_, stop := boot(t, s.config())
	s.settled(t, len(want), 0)
	require.NoError(t, stop())

	// At least: delivery is at least once, so a message whose visibility
	// runs out on a loaded machine may add a copy; the views remove it too.
	got, copies := s.lake(t).ByID()
	require.Equal(t, want[undo.EventID], got[undo.EventID], "the undo reaches the lake, field by field")
	require.Equal(t, want[undone.EventID], got[undone.EventID])
	dups := 0
	for id, n := range copies {
		if want[id].EventType == pipeline.EventModeratorFeedback {
			require.GreaterOrEqual(t, n, 1)
		} else {
			require.GreaterOrEqual(t, n, 2, "both runs reach the raw tables")
		}
		dups += n - 1
	}
	require.GreaterOrEqual(t, dups, len(again))
	requireDedupViews(t, s, want, dups)
}
