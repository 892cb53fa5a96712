package redisdebounce

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
)

// crc16 is Redis Cluster's key hash (CRC-16/XMODEM), written here from the
// cluster specification so the test does not trust the code it checks.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slot is the cluster slot of a key: the hash of its first non-empty {tag}
// if it has one, of the whole key otherwise.
func slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16([]byte(key)) % 16384)
}

func TestEveryScriptTouchesOneSlot(t *testing.T) {
	require.Equal(t, 12739, slot("123456789"), "the CRC matches the specification's check value 0x31C3 mod 16384")
	s, err := New(nil, DefaultConfig(), clock.Real())
	require.NoError(t, err)
	slotsOfShards := map[int]bool{}
	for i := range 5000 {
		room := fmt.Sprintf("room-%d", i)
		for name, keys := range map[string][]string{"record": s.recordKeys(room), "claim/ack": s.claimKeys(room)} {
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
	}
}
