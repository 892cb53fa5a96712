package redisinfo

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
)

func TestParse(t *testing.T) {
	t.Parallel()
	in := Parse("# Memory\r\nused_memory:1048576\r\nmaxmemory:4194304\r\n# Stats\r\nevicted_keys:7\r\n# Errorstats\r\nerrorstat_ERR:count=2\r\nerrorstat_OOM:count=3\r\n")
	require.Equal(t, Info{UsedMemory: 1 << 20, MaxMemory: 4 << 20, Evicted: 7, RejectedWrites: 3}, in)
	require.Equal(t, Info{}, Parse("garbage"))
}

// TestReadsTheNodeAndTheCluster: the metrics of a live Redis, a node or
// a cluster (summed over its three masters), answer and move with it.
func TestReadsTheNodeAndTheCluster(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		rdb := r.Client(t, nil)
		in, err := Read(context.Background(), rdb)
		require.NoError(t, err)
		require.Positive(t, in.UsedMemory)
		reg := prometheus.NewRegistry()
		require.NoError(t, Register(reg, rdb, "state", 2*time.Second, nil))
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP chatguard_redis_up 1 when the Redis of this role answered INFO at the last scrape.
# TYPE chatguard_redis_up gauge
chatguard_redis_up{role="state"} 1
`), "chatguard_redis_up"))
		n, err := testutil.GatherAndCount(reg)
		require.NoError(t, err)
		require.Equal(t, 5, n)
	})
}

func TestADeadRedisIsDown(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	reg := prometheus.NewRegistry()
	require.NoError(t, Register(reg, rdb, "shared", time.Second, nil))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP chatguard_redis_up 1 when the Redis of this role answered INFO at the last scrape.
# TYPE chatguard_redis_up gauge
chatguard_redis_up{role="shared"} 0
`), "chatguard_redis_up"))
}
