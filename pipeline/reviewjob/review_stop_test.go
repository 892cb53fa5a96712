package reviewjob

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
	"github.com/chatguard/chatguard/pipeline/stop"
)

func setupStoppable(t *testing.T) (*reviewRig, *stop.Holder) {
	t.Helper()
	r := setupReview(t)
	holder := stop.NewHolder(nil, nil)
	r.h = StopGuarded(r.h, &stop.Guard{Holder: holder})
	return r, holder
}

func roomStop(room, reason string) pipeline.StopSignal {
	now := time.Now().UTC()
	return pipeline.StopSignal{Scope: pipeline.StopScopeRoom, RoomID: room, Reason: reason, PublishedAt: now, ExpiresAt: now.Add(time.Hour)}
}

func TestReviewStoppedBeforeStart(t *testing.T) {
	t.Parallel()
	r, holder := setupStoppable(t)
	holder.Add(roomStop("room-1", "already sanctioned"))
	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.Equal(t, jobloop.Delete, out.Action)
	require.Equal(t, "stopped", out.Label)
	require.Zero(t, r.chat.calls.Load(), "no chat fetch for a stopped review")
	require.Zero(t, r.rev.calls.Load(), "no model call for a stopped review")
	v, err := r.store.Get(context.Background(), r.key())
	require.NoError(t, err)
	require.Equal(t, pipeline.StatusStopped, v.Status)
	require.Contains(t, v.Error, "already sanctioned")
}

func TestReviewStoppedWhileRunning(t *testing.T) {
	t.Parallel()
	r, holder := setupStoppable(t)
	started := make(chan struct{})
	r.rev.review = func(ctx context.Context, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage, attempt int) (pipeline.Verdict, error) {
		close(started)
		select {
		case <-ctx.Done():
			return pipeline.Verdict{}, fmt.Errorf("judge: %w", context.Cause(ctx))
		case <-time.After(30 * time.Second):
			return abusive(), nil
		}
	}
	other, otherCancel := context.WithCancelCause(context.Background())
	defer otherCancel(nil)
	defer holder.Watch(pipeline.NewStopTarget("room-2", r.window, r.window.Add(time.Hour), "run-1"), otherCancel)()

	go func() {
		<-started
		holder.Add(roomStop("room-1", "moderator took over"))
	}()
	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.Equal(t, jobloop.Delete, out.Action)
	require.Equal(t, "stopped", out.Label)
	v, err := r.store.Get(context.Background(), r.key())
	require.NoError(t, err)
	require.Equal(t, pipeline.StatusStopped, v.Status)
	require.Contains(t, v.Error, "moderator took over")
	require.NoError(t, other.Err(), "a review of another room is unaffected")
}

// countingGuard counts the reviews registered for stop signals.
type countingGuard struct{ begun atomic.Int32 }

func (g *countingGuard) Begin(ctx context.Context, _ pipeline.ReviewEvent) (context.Context, func()) {
	g.begun.Add(1)
	return ctx, func() {}
}

// A message that does not decode passes the guard untouched: it is the
// handler's poison, with no stop registration.
func TestStopGuardPassesPoisonThrough(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	g := &countingGuard{}
	h := StopGuarded(r.h, g)
	out := h.Handle(context.Background(), msg([]byte("not json"), 1, 5))
	require.Equal(t, jobloop.Poison, out.Action)
	require.Zero(t, g.begun.Load())
	out = h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.Equal(t, "done", out.Label)
	require.Equal(t, int32(1), g.begun.Load())
}
