package console

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestQueueAgeReadsAtAGlance(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		since time.Time
		want  string
	}{
		{time.Time{}, ""},
		{now.Add(time.Minute), "0 min"}, // a clock skew reads as new, never negative
		{now.Add(-59*time.Minute - 59*time.Second), "59 min"},
		{now.Add(-3*time.Hour - 12*time.Minute), "3 h 12 min"},
		{now.Add(-50 * time.Hour), "2 d 2 h"},
	} {
		require.Equal(t, tc.want, queueAge(now, tc.since), "since %v", tc.since)
	}
}
