package stop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

var (
	t0     = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	wStart = t0
	wEnd   = t0.Add(time.Hour)
)

func setup(t *testing.T) (*Holder, *clock.Fake, *[]pipeline.StopSignal) {
	t.Helper()
	c := clock.NewFake(t0)
	var (
		mu      sync.Mutex
		applied []pipeline.StopSignal
	)
	h := NewHolder(c, func(s pipeline.StopSignal) { mu.Lock(); applied = append(applied, s); mu.Unlock() })
	return h, c, &applied
}

func sig(scope pipeline.StopScope, ttl time.Duration) pipeline.StopSignal {
	s := pipeline.StopSignal{Scope: scope, Reason: "test", PublishedAt: t0, ExpiresAt: t0.Add(ttl)}
	switch scope {
	case pipeline.StopScopeReview:
		s.RoomID, s.WindowStart, s.WindowEnd = "r1", wStart, wEnd
	case pipeline.StopScopeRoom:
		s.RoomID = "r1"
	case pipeline.StopScopeRun:
		s.RunID = "run-1"
	}
	return s
}

func TestCheckMatchesByScope(t *testing.T) {
	t.Parallel()
	job := pipeline.StopTarget{RoomID: "r1", WindowStart: wStart, WindowEnd: wEnd, RunID: "run-1"}
	other := pipeline.StopTarget{RoomID: "r2", WindowStart: wStart, WindowEnd: wEnd, RunID: "run-2"}
	otherWindow := pipeline.StopTarget{RoomID: "r1", WindowStart: wEnd, WindowEnd: wEnd.Add(time.Hour), RunID: "run-2"}
	tests := []struct {
		scope                   pipeline.StopScope
		job, other, otherWindow bool
	}{
		{pipeline.StopScopeReview, true, false, false},
		{pipeline.StopScopeRoom, true, false, true},
		{pipeline.StopScopeRun, true, false, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.scope), func(t *testing.T) {
			t.Parallel()
			h, _, _ := setup(t)
			require.True(t, h.Add(sig(tc.scope, time.Minute)))
			_, got := h.Check(job)
			require.Equal(t, tc.job, got)
			_, got = h.Check(other)
			require.Equal(t, tc.other, got)
			_, got = h.Check(otherWindow)
			require.Equal(t, tc.otherWindow, got)
		})
	}
}

func TestExpiryAndSweep(t *testing.T) {
	t.Parallel()
	h, c, _ := setup(t)
	job := pipeline.StopTarget{RoomID: "r1", WindowStart: wStart, WindowEnd: wEnd, RunID: "x"}
	require.False(t, h.Add(sig(pipeline.StopScopeRoom, -time.Second)), "an expired signal is ignored")
	require.True(t, h.Add(sig(pipeline.StopScopeRoom, time.Minute)))
	_, ok := h.Check(job)
	require.True(t, ok)
	c.Advance(2 * time.Minute)
	_, ok = h.Check(job)
	require.False(t, ok, "expired signals stop nothing even before a sweep")
	require.Equal(t, 1, h.Len())
	require.Equal(t, 0, h.Sweep())
}

func TestWatchCancelsRunningAndLateJobs(t *testing.T) {
	t.Parallel()
	h, _, applied := setup(t)
	job := pipeline.StopTarget{RoomID: "r1", WindowStart: wStart, WindowEnd: wEnd, RunID: "run-1"}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	unwatch := h.Watch(job, cancel)
	otherCtx, otherCancel := context.WithCancelCause(context.Background())
	defer otherCancel(nil)
	defer h.Watch(pipeline.StopTarget{RoomID: "r9", RunID: "run-9"}, otherCancel)()

	h.Add(sig(pipeline.StopScopeRun, time.Minute))
	require.Error(t, ctx.Err())
	var stopped *pipeline.StoppedError
	require.True(t, errors.As(context.Cause(ctx), &stopped))
	require.Contains(t, stopped.Reason, "test")
	require.NoError(t, otherCtx.Err(), "a job outside the scope is untouched")
	unwatch()
	require.Len(t, *applied, 1)

	// A job that starts after the signal is cancelled as it registers.
	late, lateCancel := context.WithCancelCause(context.Background())
	defer lateCancel(nil)
	defer h.Watch(job, lateCancel)()
	require.Error(t, late.Err())
}

func BenchmarkCheck(b *testing.B) {
	h := NewHolder(nil, nil)
	for i := range 1000 {
		s := pipeline.StopSignal{Scope: pipeline.StopScopeRoom, RoomID: "room-" + string(rune('a'+i%26)) + time.Duration(i).String(), Reason: "x", PublishedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
		h.Add(s)
	}
	job := pipeline.NewStopTarget("not-stopped", wStart, wEnd, "run")
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := h.Check(job); ok {
				b.Fatal("unexpected stop")
			}
		}
	})
}

// fakeStore is a shared store holding at most one signal.
type fakeStore struct {
	sig *pipeline.StopSignal
	err error
	n   int
}

func (f *fakeStore) Lookup(ctx context.Context, t pipeline.StopTarget) ([]pipeline.StopSignal, error) {
	f.n++
	if f.err != nil {
		return nil, f.err
	}
	if f.sig != nil && f.sig.Matches(t) {
		return []pipeline.StopSignal{*f.sig}, nil
	}
	return nil, nil
}

func TestGuard(t *testing.T) {
	t.Parallel()
	ev := pipeline.ReviewEvent{RoomID: "r1", WindowStart: wStart, WindowEnd: wEnd, RunID: "run-1"}
	t.Run("stored signal found at start", func(t *testing.T) {
		t.Parallel()
		h, _, _ := setup(t)
		s := sig(pipeline.StopScopeRun, time.Hour)
		g := &Guard{Holder: h, Store: &fakeStore{sig: &s}}
		ctx, release := g.Begin(context.Background(), ev)
		defer release()
		require.Error(t, ctx.Err())
		var stopped *pipeline.StoppedError
		require.ErrorAs(t, context.Cause(ctx), &stopped)
	})
	t.Run("signal while running stops the chunk check and the context", func(t *testing.T) {
		t.Parallel()
		h, _, _ := setup(t)
		fc := &fakeStore{}
		g := &Guard{Holder: h, Store: fc}
		ctx, release := g.Begin(context.Background(), ev)
		defer release()
		require.Equal(t, 1, fc.n, "one store check per review")
		require.NoError(t, pipeline.CheckStop(ctx))
		h.Add(sig(pipeline.StopScopeReview, time.Hour))
		require.Error(t, ctx.Err())
		require.Error(t, pipeline.CheckStop(ctx))
	})
	t.Run("store down: the review goes on", func(t *testing.T) {
		t.Parallel()
		h, _, _ := setup(t)
		var reported error
		g := &Guard{Holder: h, Store: &fakeStore{err: errors.New("redis down")}, OnCheckError: func(err error) { reported = err }}
		ctx, release := g.Begin(context.Background(), ev)
		require.NoError(t, ctx.Err())
		require.ErrorContains(t, reported, "redis down")
		release()
		require.Error(t, ctx.Err(), "release ends the job context")
	})
}
