package reviewers

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// failingWork is background work that fails: at once (early) or only when
// it is stopped.
type failingWork struct {
	early bool
	err   error
}

func (f failingWork) Run(ctx context.Context) error {
	if !f.early {
		<-ctx.Done()
	}
	return f.err
}

// syncBuffer is a log sink safe to read while a goroutine writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBackgroundErrorIsSurfaced: the router's background work's error is
// not dropped: one that ends it early is logged when it happens, and stop
// returns it, as it returns one from the work's end.
func TestBackgroundErrorIsSurfaced(t *testing.T) {
	t.Parallel()
	boom := errors.New("lease renewal gave up")

	var logs syncBuffer
	stop := runBackground(failingWork{early: true, err: boom}, slog.New(slog.NewJSONHandler(&logs, nil)), "worker")
	require.Eventually(t, func() bool { return bytes.Contains([]byte(logs.String()), []byte("lease renewal gave up")) },
		30*time.Second, 5*time.Millisecond, "an early end is logged while the engine runs")
	require.Contains(t, logs.String(), "worker: router background work ended")
	require.ErrorIs(t, stop(), boom)

	stop = runBackground(failingWork{err: boom}, slog.New(slog.DiscardHandler), "console")
	require.ErrorIs(t, stop(), boom, "an error at the end is returned by stop")

	stop = runBackground(failingWork{}, slog.New(slog.DiscardHandler), "console")
	require.NoError(t, stop())
}
