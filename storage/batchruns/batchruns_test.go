package batchruns

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/migrations"
)

func setup(t *testing.T) *Store {
	t.Helper()
	db, _ := stacktest.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	return New(db)
}

var (
	winStart = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	winEnd   = winStart.Add(time.Hour)
)

func TestAttemptsOfARun(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	first, err := s.Begin(ctx, "run-a", winStart, winEnd)
	require.NoError(t, err)
	require.Equal(t, 1, first.Attempt)
	first.Status, first.Error, first.QueryExecutionID, first.Rows = StatusFailed, "athena: query q-1 failed: boom", "q-1", 7
	require.NoError(t, s.Finish(ctx, first))

	second, err := s.Begin(ctx, "run-a", winStart, winEnd)
	require.NoError(t, err)
	require.Equal(t, 2, second.Attempt)
	other, err := s.Begin(ctx, "run-b", winStart, winEnd)
	require.NoError(t, err)
	require.Equal(t, 1, other.Attempt, "attempts count per run id")
	second.Status, second.Rows, second.Published = StatusSucceeded, 12, 12
	require.NoError(t, s.Finish(ctx, second))

	got, err := s.Attempts(ctx, "run-a")
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, StatusFailed, got[0].Status)
	require.Equal(t, "athena: query q-1 failed: boom", got[0].Error)
	require.Equal(t, "q-1", got[0].QueryExecutionID)
	require.Equal(t, int64(7), got[0].Rows)
	require.True(t, got[0].WindowStart.Equal(winStart))
	require.True(t, got[0].WindowEnd.Equal(winEnd))
	require.False(t, got[0].FinishedAt.IsZero())
	require.Equal(t, StatusSucceeded, got[1].Status)
	require.Equal(t, int64(12), got[1].Published)
	require.Empty(t, got[1].Error)
}

func TestConcurrentBeginsGetDistinctAttempts(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		attempts = map[int]bool{}
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Begin(context.Background(), "run-c", winStart, winEnd)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			attempts[r.Attempt] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.Equal(t, map[int]bool{1: true, 2: true, 3: true, 4: true}, attempts)
}

func TestFinishRejectsBadInput(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	require.ErrorContains(t, s.Finish(ctx, Run{ID: 1, RunID: "x", Status: StatusRunning}), "not final")
	require.ErrorContains(t, s.Finish(ctx, Run{ID: 999, RunID: "x", Status: StatusFailed}), "no such attempt")
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 4, "abc…"},
		{strings.Repeat("가", 6), 4, "가가가…"},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, truncate(tc.in, tc.n))
	}
}

func TestOpenOwnsItsPool(t *testing.T) {
	db, dsn := stacktest.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	s, err := Open(ctx, dsn)
	require.NoError(t, err)
	r, err := s.Begin(ctx, "open-run", winStart, winEnd)
	require.NoError(t, err)
	require.Equal(t, 1, r.Attempt)
	require.NoError(t, s.Close())
	_, err = s.Begin(ctx, "open-run", winStart, winEnd)
	require.ErrorContains(t, err, "sql: database is closed", "Close released the pool")

	_, err = Open(ctx, "root@tcp(127.0.0.1:1)/x?timeout=2s")
	require.ErrorContains(t, err, "batchruns: open")
	_, err = Open(ctx, "not a dsn")
	require.ErrorContains(t, err, "batchruns: open")
}

func TestCloseLeavesABorrowedPoolOpen(t *testing.T) {
	s := setup(t)
	require.NoError(t, s.Close())
	_, err := s.Begin(context.Background(), "borrowed", winStart, winEnd)
	require.NoError(t, err, "New's pool is the caller's to close")
}

func TestRunsAreStampedFromTheClock(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 2, 3, 4, 5, 0, time.UTC)
	c := clock.NewFake(at)
	s := New(setup(t).db, WithClock(c))
	ctx := context.Background()
	r, err := s.Begin(ctx, "run-clock", winStart, winEnd)
	require.NoError(t, err)
	require.True(t, at.Equal(r.StartedAt), "started at %v, want the clock's %v", r.StartedAt, at)
	got, err := s.Attempts(ctx, "run-clock")
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.True(t, at.Equal(got[0].StartedAt), "stored start %v, want %v", got[0].StartedAt, at)
}
