package jobloop

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The heartbeat keeps a ticker's schedule: the next boundary after a
// beat, or at once (one beat) when a slow beat overran boundaries.
func TestNextBeatKeepsATickersSchedule(t *testing.T) {
	t.Parallel()
	every := 10 * time.Second
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name     string
		due, now int
		wantDue  int
		wantWait time.Duration
	}{
		{"a quick beat", 10, 10, 20, 10 * time.Second},
		{"a beat that took a while", 10, 13, 20, 7 * time.Second},
		{"a beat overran one boundary", 10, 25, 20, 0},
		{"a stall over several", 10, 47, 40, 0},
		{"the beat after an overrun", 20, 26, 30, 4 * time.Second},
	} {
		due, wait := nextBeat(at(tc.due), at(tc.now), every)
		require.Equal(t, at(tc.wantDue), due, tc.name)
		require.Equal(t, tc.wantWait, wait, tc.name)
	}
}
