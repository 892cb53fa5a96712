package stop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

var (
	t0     = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	wStart = t0
	wEnd   = t0.Add(time.Hour)
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func setup(t *testing.T) (*Holder, *clock, *[]Signal) {
	t.Helper()
	c := &clock{now: t0}
	var (
		mu      sync.Mutex
		applied []Signal
	)
	h := NewHolder(c.Now, func(s Signal) { mu.Lock(); applied = append(applied, s); mu.Unlock() })
	return h, c, &applied
}

func sig(scope Scope, ttl time.Duration) Signal {
	s := Signal{Scope: scope, Reason: "test", PublishedAt: t0, ExpiresAt: t0.Add(ttl)}
	switch scope {
	case ScopeReview:
		s.RoomID, s.WindowStart, s.WindowEnd = "r1", wStart, wEnd
	case ScopeRoom:
		s.RoomID = "r1"
	case ScopeRun:
		s.RunID = "run-1"
	}
	return s
}

func TestCheckMatchesByScope(t *testing.T) {
	t.Parallel()
	job := Target{RoomID: "r1", WindowStart: wStart, WindowEnd: wEnd, RunID: "run-1"}
	other := Target{RoomID: "r2", WindowStart: wStart, WindowEnd: wEnd, RunID: "run-2"}
	otherWindow := Target{RoomID: "r1", WindowStart: wEnd, WindowEnd: wEnd.Add(time.Hour), RunID: "run-2"}
	tests := []struct {
		scope                   Scope
		job, other, otherWindow bool
	}{
		{ScopeReview, true, false, false},
		{ScopeRoom, true, false, true},
		{ScopeRun, true, false, false},
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
	job := Target{RoomID: "r1", WindowStart: wStart, WindowEnd: wEnd, RunID: "x"}
	require.False(t, h.Add(sig(ScopeRoom, -time.Second)), "an expired signal is ignored")
	require.True(t, h.Add(sig(ScopeRoom, time.Minute)))
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
	job := Target{RoomID: "r1", WindowStart: wStart, WindowEnd: wEnd, RunID: "run-1"}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	unwatch := h.Watch(job, cancel)
	otherCtx, otherCancel := context.WithCancelCause(context.Background())
	defer otherCancel(nil)
	defer h.Watch(Target{RoomID: "r9", RunID: "run-9"}, otherCancel)()

	h.Add(sig(ScopeRun, time.Minute))
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

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		s    Signal
		want string
	}{
		{"review without window", Signal{Scope: ScopeReview, RoomID: "r", PublishedAt: t0, ExpiresAt: t0.Add(time.Hour)}, "window"},
		{"room without id", Signal{Scope: ScopeRoom, PublishedAt: t0, ExpiresAt: t0.Add(time.Hour)}, "room_id"},
		{"unknown scope", Signal{Scope: "all", PublishedAt: t0, ExpiresAt: t0.Add(time.Hour)}, "unknown scope"},
		{"ttl too long", Signal{Scope: ScopeRun, RunID: "x", PublishedAt: t0, ExpiresAt: t0.Add(MaxTTL + time.Hour)}, "ttl"},
		{"no expiry", Signal{Scope: ScopeRun, RunID: "x", PublishedAt: t0}, "expires_at"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.ErrorContains(t, tc.s.Validate(), tc.want)
		})
	}
	require.NoError(t, sig(ScopeReview, time.Hour).Validate())
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"scope":"room","room_id":"r1","reason":"x","published_at":"2026-11-01T00:00:00Z","expires_at":"2026-11-01T01:00:00Z"}`))
	f.Add([]byte(`{"scope":"run"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err == nil {
			require.NoError(t, s.Validate())
			require.NotEmpty(t, s.Key())
		}
	})
}

func BenchmarkCheck(b *testing.B) {
	h := NewHolder(nil, nil)
	for i := range 1000 {
		s := Signal{Scope: ScopeRoom, RoomID: "room-" + string(rune('a'+i%26)) + time.Duration(i).String(), Reason: "x", PublishedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
		h.Add(s)
	}
	job := NewTarget("not-stopped", wStart, wEnd, "run")
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

func TestRequestSignal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		req     Request
		scope   Scope
		ttl     time.Duration
		wantErr string
	}{
		{name: "room", req: Request{RoomID: "r1", Reason: "sanctioned"}, scope: ScopeRoom, ttl: DefaultTTL},
		{name: "run with ttl", req: Request{RunID: "run-1", TTL: "30m"}, scope: ScopeRun, ttl: 30 * time.Minute},
		{name: "review", req: Request{RoomID: "r1", WindowStart: wStart, WindowEnd: wEnd}, scope: ScopeReview, ttl: DefaultTTL},
		{name: "nothing", req: Request{}, wantErr: "name a room"},
		{name: "both", req: Request{RoomID: "r", RunID: "x"}, wantErr: "not both"},
		{name: "half window", req: Request{RoomID: "r", WindowStart: wStart}, wantErr: "window"},
		{name: "bad ttl", req: Request{RoomID: "r", TTL: "-5m"}, wantErr: "ttl"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := tc.req.Signal(t0)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.scope, s.Scope)
			require.Equal(t, tc.ttl, s.ExpiresAt.Sub(s.PublishedAt))
		})
	}
}

type fakeChecker struct {
	h   *Holder
	sig *Signal
	err error
	n   int
}

func (f *fakeChecker) CheckOnce(ctx context.Context, t Target) (Signal, bool, error) {
	f.n++
	if f.err != nil {
		return Signal{}, false, f.err
	}
	if f.sig != nil && f.h.Add(*f.sig) {
		return *f.sig, true, nil
	}
	return Signal{}, false, nil
}

func TestGuard(t *testing.T) {
	t.Parallel()
	ev := pipeline.ReviewEvent{RoomID: "r1", WindowStart: wStart, WindowEnd: wEnd, RunID: "run-1"}
	t.Run("stored signal found at start", func(t *testing.T) {
		t.Parallel()
		h, _, _ := setup(t)
		s := sig(ScopeRun, time.Hour)
		g := &Guard{Holder: h, Checker: &fakeChecker{h: h, sig: &s}}
		ctx, release := g.Begin(context.Background(), ev)
		defer release()
		require.Error(t, ctx.Err())
		var stopped *pipeline.StoppedError
		require.ErrorAs(t, context.Cause(ctx), &stopped)
	})
	t.Run("signal while running stops the chunk check and the context", func(t *testing.T) {
		t.Parallel()
		h, _, _ := setup(t)
		fc := &fakeChecker{h: h}
		g := &Guard{Holder: h, Checker: fc}
		ctx, release := g.Begin(context.Background(), ev)
		defer release()
		require.Equal(t, 1, fc.n, "one store check per review")
		require.NoError(t, pipeline.CheckStop(ctx))
		h.Add(sig(ScopeReview, time.Hour))
		require.Error(t, ctx.Err())
		require.Error(t, pipeline.CheckStop(ctx))
	})
	t.Run("store down: the review goes on", func(t *testing.T) {
		t.Parallel()
		h, _, _ := setup(t)
		var reported error
		g := &Guard{Holder: h, Checker: &fakeChecker{h: h, err: errors.New("redis down")}, OnCheckError: func(err error) { reported = err }}
		ctx, release := g.Begin(context.Background(), ev)
		require.NoError(t, ctx.Err())
		require.ErrorContains(t, reported, "redis down")
		release()
		require.Error(t, ctx.Err(), "release ends the job context")
	})
}
