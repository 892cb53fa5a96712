package pipeline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	stopT0     = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	stopWStart = stopT0
	stopWEnd   = stopT0.Add(time.Hour)
)

func stopSig(scope StopScope, ttl time.Duration) StopSignal {
	s := StopSignal{Scope: scope, Reason: "test", PublishedAt: stopT0, ExpiresAt: stopT0.Add(ttl)}
	switch scope {
	case StopScopeReview:
		s.RoomID, s.WindowStart, s.WindowEnd = "r1", stopWStart, stopWEnd
	case StopScopeRoom:
		s.RoomID = "r1"
	case StopScopeRun:
		s.RunID = "run-1"
	}
	return s
}

func TestStopSignalValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		s    StopSignal
		want string
	}{
		{"review without window", StopSignal{Scope: StopScopeReview, RoomID: "r", PublishedAt: stopT0, ExpiresAt: stopT0.Add(time.Hour)}, "window"},
		{"room without id", StopSignal{Scope: StopScopeRoom, PublishedAt: stopT0, ExpiresAt: stopT0.Add(time.Hour)}, "room_id"},
		{"unknown scope", StopSignal{Scope: "all", PublishedAt: stopT0, ExpiresAt: stopT0.Add(time.Hour)}, "unknown scope"},
		{"ttl too long", StopSignal{Scope: StopScopeRun, RunID: "x", PublishedAt: stopT0, ExpiresAt: stopT0.Add(MaxStopTTL + time.Hour)}, "ttl"},
		{"no expiry", StopSignal{Scope: StopScopeRun, RunID: "x", PublishedAt: stopT0}, "expires_at"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.ErrorContains(t, tc.s.Validate(), tc.want)
		})
	}
	require.NoError(t, stopSig(StopScopeReview, time.Hour).Validate())
}

func FuzzDecodeStopSignal(f *testing.F) {
	f.Add([]byte(`{"scope":"room","room_id":"r1","reason":"x","published_at":"2026-11-01T00:00:00Z","expires_at":"2026-11-01T01:00:00Z"}`))
	f.Add([]byte(`{"scope":"run"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeStopSignal(b)
		if err == nil {
			require.NoError(t, s.Validate())
			require.NotEmpty(t, s.Key())
		}
	})
}

func TestStopRequestSignal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		req     StopRequest
		scope   StopScope
		ttl     time.Duration
		wantErr string
	}{
		{name: "room", req: StopRequest{RoomID: "r1", Reason: "sanctioned"}, scope: StopScopeRoom, ttl: DefaultStopTTL},
		{name: "run with ttl", req: StopRequest{RunID: "run-1", TTL: "30m"}, scope: StopScopeRun, ttl: 30 * time.Minute},
		{name: "review", req: StopRequest{RoomID: "r1", WindowStart: stopWStart, WindowEnd: stopWEnd}, scope: StopScopeReview, ttl: DefaultStopTTL},
		{name: "nothing", req: StopRequest{}, wantErr: "name a room"},
		{name: "both", req: StopRequest{RoomID: "r", RunID: "x"}, wantErr: "not both"},
		{name: "half window", req: StopRequest{RoomID: "r", WindowStart: stopWStart}, wantErr: "window"},
		{name: "bad ttl", req: StopRequest{RoomID: "r", TTL: "-5m"}, wantErr: "ttl"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := tc.req.Signal(stopT0)
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

func TestStopMatchesAndKeys(t *testing.T) {
	t.Parallel()
	job := NewStopTarget("r1", stopWStart, stopWEnd, "run-1")
	require.Equal(t, job.Keys(), StopTarget{RoomID: "r1", WindowStart: stopWStart, WindowEnd: stopWEnd, RunID: "run-1"}.Keys(), "cached and rendered keys agree")
	for _, scope := range []StopScope{StopScopeReview, StopScopeRoom, StopScopeRun} {
		s := stopSig(scope, time.Hour)
		require.True(t, s.Matches(job), scope)
		require.Contains(t, job.Keys(), s.Key(), scope)
	}
	other := NewStopTarget("r2", stopWStart, stopWEnd, "run-2")
	require.False(t, stopSig(StopScopeRoom, time.Hour).Matches(other))
	require.False(t, StopSignal{Scope: StopScopeRun}.Matches(StopTarget{}), "an empty run id matches nothing")
}
