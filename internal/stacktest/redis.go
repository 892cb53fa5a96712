package stacktest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisClusterVar names the stack variable that lists the nodes of the
// stack's three-master Redis Cluster (comma-separated host:port), and
// RedisClusterMarker the one that says whether the stack runs it:
// "external" (real redis-server processes) or "absent" (the machine has no
// redis-server; the stack does not stand one in).
const (
	RedisClusterVar    = "CHATGUARD_REDIS_CLUSTER_ADDRS"
	RedisClusterMarker = "CHATGUARD_STACK_REDIS_CLUSTER"
)

// RedisTarget is one of the stack's Redis deployments a store is tested
// on: the single node or the cluster.
type RedisTarget struct {
	// Name is "node" or "cluster", the subtest's name.
	Name string
	// Addrs are the node's address, or the cluster's seed nodes.
	Addrs []string
	// Cluster is set for the Redis Cluster (a *redis.ClusterClient).
	Cluster bool
}

// Client returns a client of the target, closed when the test ends; tune,
// when set, adjusts its options first (a dialer, a pool, timeouts). It
// fails t when a node does not answer PING.
func (r RedisTarget) Client(t testing.TB, tune func(*redis.UniversalOptions)) redis.UniversalClient {
	t.Helper()
	o := &redis.UniversalOptions{Addrs: r.Addrs, IsClusterMode: r.Cluster, DialTimeout: 2 * time.Second}
	if tune != nil {
		tune(o)
	}
	c := redis.NewUniversalClient(o)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ping := func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachShard(ctx, ping)
	} else {
		err = ping(ctx, c.(*redis.Client))
	}
	if err != nil {
		t.Fatalf("stacktest: redis %s: %v", r.Name, err)
	}
	return c
}

// RedisNode is the stack's single Redis node.
func RedisNode(t testing.TB) RedisTarget {
	t.Helper()
	return RedisTarget{Name: "node", Addrs: []string{Get(t, "CHATGUARD_REDIS_ADDR")}}
}

// RedisCluster is the stack's three-master Redis Cluster. With CI set it
// fails t when the stack runs none; outside CI, on a stack without one (a
// machine without redis-server, or a stack started before the cluster was
// added), it logs so and returns the single node in its place.
func RedisCluster(t testing.TB) RedisTarget {
	t.Helper()
	Load(t)
	addrs := os.Getenv(RedisClusterVar)
	if addrs != "" && os.Getenv(RedisClusterMarker) == "external" {
		return RedisTarget{Name: "cluster", Addrs: strings.Split(addrs, ","), Cluster: true}
	}
	why := "the stack env file names no Redis Cluster (" + RedisClusterMarker + "=" + os.Getenv(RedisClusterMarker) +
		"): install redis-server and restart the stack with this checkout's bin/stack"
	if inCI(os.Getenv) {
		t.Fatalf("stacktest: CI is set: %s", why)
	}
	t.Logf("stacktest: %s; the cluster's tests run on the single node", why)
	n := RedisNode(t)
	n.Name = "cluster"
	return n
}

// RedisTargets are the node and the cluster, in that order.
func RedisTargets(t testing.TB) []RedisTarget {
	t.Helper()
	return []RedisTarget{RedisNode(t), RedisCluster(t)}
}

// EachRedis runs fn as one subtest per target, "node" and "cluster": the
// tests of every Redis-backed store run on both.
func EachRedis(t *testing.T, fn func(t *testing.T, r RedisTarget)) {
	t.Helper()
	for _, r := range RedisTargets(t) {
		t.Run(r.Name, func(t *testing.T) { fn(t, r) })
	}
}

// DeleteKeys deletes every key that starts with prefix, on every master
// of a cluster (a SCAN sees one node), one key per DEL (keys of many
// slots); it is for test cleanups and reports nothing.
func DeleteKeys(rdb redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	del := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		return iter.Err()
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, del)
		return
	}
	if c, ok := rdb.(*redis.Client); ok {
		_ = del(ctx, c)
	}
}
