package reviewjob

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConfigDefaultsAreValid(t *testing.T) {
	require.NoError(t, DefaultConfig().Validate())
}

// Every bad setting is named, all at once.
func TestConfigNamesEveryProblem(t *testing.T) {
	c := DefaultConfig()
	c.MaxAge, c.BusyRetry, c.SaveTimeout = -time.Second, 0, 0
	c.Limits.MaxWindow, c.Limits.MaxClockSkew = 0, 2*time.Hour
	c.ClaimTTL, c.ClaimPoll = time.Second, 2*time.Second
	err := c.Validate()
	for _, want := range []string{"max age -1s", "busy retry 0s", "save timeout 0s", "max window 0s", "max clock skew 2h0m0s", "claim ttl 1s", "claim poll 2s"} {
		require.ErrorContains(t, err, want)
	}
}
