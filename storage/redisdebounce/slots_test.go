package redisdebounce

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/clusterslot"
)

var slot = clusterslot.Of

func TestEveryScriptTouchesOneSlot(t *testing.T) {
	require.Equal(t, 12739, slot("123456789"), "the CRC matches the specification's check value 0x31C3 mod 16384")
	s, err := New(nil, DefaultConfig(), clock.Real())
	require.NoError(t, err)
	slotsOfShards := map[int]bool{}
	for i := range 5000 {
		room := fmt.Sprintf("room-%d", i)
		for name, keys := range map[string][]string{"record": s.recordKeys(room), "claim": s.claimKeys(room), "ack": s.ackKeys(room)} {
			want := slot(keys[0])
			for _, k := range keys {
				require.Equal(t, want, slot(k), "%s script of %s touches %s in another slot", name, room, k)
			}
		}
		require.Equal(t, slot(s.DueKey(s.Shard(room))), slot(s.RoomKey(room)))
		slotsOfShards[slot(s.DueKey(s.Shard(room)))] = true
	}
	require.Len(t, slotsOfShards, DefaultShards, "the shards spread over as many slots")
	// Room ids with braces cannot move their keys to another slot: the
	// store's tag comes first.
	for _, room := range []string{"{x}", "a{b}c", "}{"} {
		require.Equal(t, slot(s.DueKey(s.Shard(room))), slot(s.RoomKey(room)))
		require.Equal(t, slot(s.DueKey(s.Shard(room))), slot(s.SeenKey(room)))
		require.Equal(t, slot(s.DueKey(s.Shard(room))), slot(s.LateKey(room)))
	}
}
