package console

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/moderation"
)

// The counts are read once per TTL however many moderators ask, and once
// however many ask at the same moment; a failed read is not cached.
func TestQueueCountsAreReadOncePerTTL(t *testing.T) {
	var c countsCache
	var loads atomic.Int32
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	release := make(chan struct{})
	load := func(context.Context) (moderation.QueueCounts, error) {
		n := loads.Add(1)
		<-release
		return moderation.QueueCounts{Under1h: int(n)}, nil
	}
	ctx := testCtx(t)
	var wg sync.WaitGroup
	got := make([]int, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.get(ctx, t0, load)
			require.NoError(t, err)
			got[i] = v.Under1h
		}()
	}
	require.Eventually(t, func() bool { return loads.Load() == 1 }, 10*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	require.Equal(t, []int{1, 1, 1, 1, 1, 1, 1, 1}, got, "eight moderators at once: one count")

	v, err := c.get(ctx, t0.Add(queueCountsTTL-time.Millisecond), load)
	require.NoError(t, err)
	require.Equal(t, 1, v.Under1h, "within the TTL: the cached counts")
	v, err = c.get(ctx, t0.Add(queueCountsTTL), load)
	require.NoError(t, err)
	require.Equal(t, 2, v.Under1h, "after the TTL: read again")

	failing := func(context.Context) (moderation.QueueCounts, error) {
		return moderation.QueueCounts{}, errors.New("mysql down")
	}
	_, err = c.get(ctx, t0.Add(3*queueCountsTTL), failing)
	require.Error(t, err)
	v, err = c.get(ctx, t0.Add(3*queueCountsTTL), load)
	require.NoError(t, err)
	require.Equal(t, 3, v.Under1h, "a failure is not cached")

	// A caller whose request ends stops waiting; the read goes on for others.
	block := make(chan struct{})
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.get(cctx, t0.Add(5*queueCountsTTL), func(context.Context) (moderation.QueueCounts, error) {
			<-block
			return moderation.QueueCounts{Older: 9}, nil
		})
		done <- err
	}()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	close(block)
	require.Eventually(t, func() bool {
		v, err := c.get(ctx, t0.Add(5*queueCountsTTL), failing)
		return err == nil && v.Older == 9
	}, 10*time.Second, time.Millisecond, "the detached read still filled the cache")
}

// BenchmarkQueueCountsCached is the server time of GET /queue/counts when
// the process's cache holds the counts (every request but one per TTL):
// the render alone. The miss costs CountQueue (make bench-mysql).
func BenchmarkQueueCountsCached(b *testing.B) {
	tmpl, err := parseTemplates()
	require.NoError(b, err)
	clk := clock.NewFake(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	st := &fakeStore{}
	s := &server{store: st, tmpl: tmpl, clock: clk, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	req := httptest.NewRequest(http.MethodGet, "/queue/counts", nil)
	for b.Loop() {
		w := httptest.NewRecorder()
		s.queueCounts(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}
