package redisstop

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clusterslot"
	"github.com/chatguard/chatguard/pipeline"
)

// TestLayoutIsOneSlot: a lookup's MGET, a load's pages and a publish's
// transaction each touch one Redis Cluster slot, for the default prefix,
// a prefix with a tag of its own, and room ids with braces.
func TestLayoutIsOneSlot(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	for _, prefix := range []string{DefaultConfig().KeyPrefix, "x:{tenant}:stop:", "plain"} {
		l := Config{KeyPrefix: prefix}.Layout()
		want := clusterslot.Of(l.Index())
		for _, room := range []string{"room-1", "{x}", "a{b}c", "}{"} {
			for _, k := range pipeline.NewStopTarget(room, now, now.Add(time.Hour), "run-{1}").Keys() {
				require.Equal(t, want, clusterslot.Of(l.Key(k)), "prefix %q: %s", prefix, l.Key(k))
			}
		}
	}
	require.Equal(t, "{chatguard:stop}:room:r", DefaultConfig().Layout().Key("room:r"), "an untagged prefix is tagged whole")
	require.Equal(t, "x:{tenant}:stop:room:r", Config{KeyPrefix: "x:{tenant}:stop:"}.Layout().Key("room:r"), "a tagged prefix is kept")
}
