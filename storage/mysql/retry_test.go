package mysql

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetryPauseStaysInItsWindow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		attempt int
		ceil    time.Duration
	}{
		{1, 20 * time.Millisecond},
		{2, 40 * time.Millisecond},
		{3, 80 * time.Millisecond},
		{4, retryCap},
		{60, retryCap},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint("attempt ", tc.attempt), func(t *testing.T) {
			t.Parallel()
			seen := map[time.Duration]bool{}
			for range 200 {
				d := retryPause(tc.attempt)
				require.Greater(t, d, time.Duration(0))
				require.LessOrEqual(t, d, tc.ceil+time.Millisecond)
				seen[d] = true
			}
			// Full jitter: the pauses spread out rather than repeat.
			require.Greater(t, len(seen), 100)
		})
	}
}

func TestSleepCtxReturnsWhenCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, sleepCtx(ctx, time.Hour), context.Canceled)
	require.NoError(t, sleepCtx(context.Background(), time.Microsecond))
}
