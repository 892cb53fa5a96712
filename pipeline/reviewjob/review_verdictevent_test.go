package reviewjob

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
	"github.com/chatguard/chatguard/storage/storetest"
)

// doneVerdict is the done verdict another delivery saved for the rig's
// review.
func (r *reviewRig) doneVerdict() pipeline.Verdict {
	v := abusive()
	v.Key, v.RunID, v.PublishedAt, v.StartedAt, v.FinishedAt = r.key(), "run-1", r.window.Add(time.Hour+5*time.Minute), r.now(), r.now()
	return v
}

func verdictStatuses(evs []pipeline.LakeEvent) []pipeline.Status {
	var out []pipeline.Status
	for _, ev := range evs {
		if ev.EventType == pipeline.EventVerdict {
			out = append(out, ev.Payload.(pipeline.VerdictEvent).Status)
		}
	}
	return out
}

// A stop for a review that is already done changes nothing in MySQL (the
// done-guard keeps the verdict), so the lake hears nothing of it either.
func TestStopForADoneReviewPublishesNoVerdictEvent(t *testing.T) {
	t.Parallel()
	r, holder := setupStoppable(t)
	storetest.MustSave(t, context.Background(), r.store, r.doneVerdict())
	holder.Add(roomStop("room-1", "moderator took over"))
	out := r.h.Handle(context.Background(), msg(r.body(t), 2, 5))
	require.Equal(t, jobloop.Delete, out.Action)
	require.Zero(t, r.rev.calls.Load())
	v, err := r.store.Get(context.Background(), r.key())
	require.NoError(t, err)
	require.Equal(t, pipeline.StatusDone, v.Status, "the done verdict stays")
	require.Empty(t, verdictStatuses(r.outboxEvents(t)), "no stopped verdict event contradicts the stored done one")
}

// A stop for a review with no verdict yet is recorded, and its event tells
// the lake so.
func TestStopBeforeStartPublishesTheStoppedVerdict(t *testing.T) {
	t.Parallel()
	r, holder := setupStoppable(t)
	holder.Add(roomStop("room-1", "already sanctioned"))
	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.Equal(t, "stopped", out.Label)
	require.Equal(t, []pipeline.Status{pipeline.StatusStopped}, verdictStatuses(r.outboxEvents(t)))
}

// A review that fails for good after another delivery saved the done
// verdict (a late failure) leaves MySQL done and publishes no failed
// verdict event.
func TestLateFailureOverADoneVerdictPublishesNoVerdictEvent(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	r.rev.review = func(ctx context.Context, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage, attempt int) (pipeline.Verdict, error) {
		storetest.MustSave(t, ctx, r.store, r.doneVerdict()) // the other delivery finished first
		return pipeline.Verdict{}, pipeline.Permanent(errors.New("llm: judge: request rejected"))
	}
	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.Equal(t, jobloop.Delete, out.Action)
	require.Equal(t, "failed", out.Label)
	v, err := r.store.Get(context.Background(), r.key())
	require.NoError(t, err)
	require.Equal(t, pipeline.StatusDone, v.Status)
	require.Empty(t, verdictStatuses(r.outboxEvents(t)), "no failed verdict event contradicts the stored done one")
}

// The same on the last delivery: the failure it records is a no-op, and
// so is its event.
func TestFinalFailureOverADoneVerdictPublishesNoVerdictEvent(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	r.rev.review = func(ctx context.Context, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage, attempt int) (pipeline.Verdict, error) {
		storetest.MustSave(t, ctx, r.store, r.doneVerdict())
		return pipeline.Verdict{}, pipeline.Retryable(errors.New("llm: judge: 4 attempts failed"), 0)
	}
	out := r.h.Handle(context.Background(), msg(r.body(t), 5, 5))
	require.Equal(t, "failed_final", out.Label)
	require.Empty(t, verdictStatuses(r.outboxEvents(t)))
}

// outboxEvents are the lake events the rig's store holds in its outbox
// (the messages written with the verdicts), decoded as the consumer
// decodes them.
func (r *reviewRig) outboxEvents(t *testing.T) []pipeline.LakeEvent {
	t.Helper()
	var out []pipeline.LakeEvent
	for _, m := range r.store.OutboxMessages() {
		require.Equal(t, pipeline.OutboxFeedback, m.Destination)
		rec, err := pipeline.DecodeLakeEvent(m.Body, r.now())
		require.NoError(t, err, "the consumer accepts it")
		require.Equal(t, rec.EventID, m.EventID, "the outbox row is keyed by the event's id")
		out = append(out, rec.LakeEvent)
	}
	return out
}

// The verdict event is written with the verdict, in the save's
// transaction (the store's outbox), not handed to a background sender
// after the commit: a worker killed between its commit and the send
// loses nothing, since the outbox's relay sends it later.
func TestTheVerdictEventIsWrittenInTheVerdictsSave(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.Equal(t, jobloop.Delete, out.Action)
	evs := r.outboxEvents(t)
	require.Len(t, evs, 1)
	require.Equal(t, pipeline.VerdictEventID(r.key(), pipeline.StatusDone), evs[0].EventID)
	require.Equal(t, pipeline.StatusDone, evs[0].Payload.(pipeline.VerdictEvent).Status)
	require.Empty(t, r.sink.events(), "nothing sent after the commit")
}
