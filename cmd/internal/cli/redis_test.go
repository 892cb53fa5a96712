package cli

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/tlstest"
)

func TestRedisTLSAndACLOptions(t *testing.T) {
	t.Parallel()
	plain := RedisOptions{RedisAddr: "redis:6379"}
	tc, err := plain.TLSConfig()
	require.NoError(t, err)
	require.Nil(t, tc, "no TLS unless asked for")

	cert, key := tlstest.SelfSigned(t)
	o := RedisOptions{RedisAddr: "redis:6379", RedisUsername: "chatguard", RedisPassword: "pw", RedisCAFile: cert,
		RedisCertFile: cert, RedisKeyFile: key, RedisServerName: "redis.internal"}
	require.NoError(t, o.Validate())
	tc, err = o.TLSConfig()
	require.NoError(t, err)
	require.NotNil(t, tc.RootCAs)
	require.Len(t, tc.Certificates, 1)
	require.Equal(t, "redis.internal", tc.ServerName)
	c, err := o.Client(nil)
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, "chatguard", c.(*redis.Client).Options().Username)
	require.NotNil(t, c.(*redis.Client).Options().TLSConfig)

	require.ErrorContains(t, RedisOptions{RedisCertFile: cert}.Validate(), "go together")
	require.ErrorContains(t, RedisOptions{RedisUsername: "u"}.Validate(), "needs --redis-password")
	_, err = RedisOptions{RedisCAFile: key}.TLSConfig()
	require.Error(t, err, "a key is not a CA")
}

// TestRedisClusterOptions: a list of addresses, or the cluster switch with
// one (ElastiCache's configuration endpoint), makes a Cluster client with
// the same bounds and TLS; one address without the switch stays one node;
// a database other than 0 is refused on a cluster, naming the flags of the
// stem the options were declared under.
func TestRedisClusterOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		o       RedisOptions
		cluster bool
	}{
		{RedisOptions{RedisAddr: "redis:6379"}, false},
		{RedisOptions{RedisAddr: " a:1, b:2 ,,c:3"}, true},
		{RedisOptions{RedisAddr: "clustercfg.x.cache.amazonaws.com:6379", RedisCluster: true}, true},
	} {
		require.NoError(t, tc.o.Validate())
		require.Equal(t, tc.cluster, tc.o.IsCluster(), tc.o.RedisAddr)
		c, err := tc.o.Client(StopProfile)
		require.NoError(t, err)
		if tc.cluster {
			cc, ok := c.(*redis.ClusterClient)
			require.True(t, ok, "%T", c)
			require.Equal(t, tc.o.Addrs(), cc.Options().Addrs)
			require.True(t, cc.Options().ContextTimeoutEnabled, "the profile reaches the cluster's options")
		} else {
			require.IsType(t, &redis.Client{}, c)
		}
		require.NoError(t, c.Close())
	}
	require.Equal(t, []string{"a:1", "b:2", "c:3"}, RedisOptions{RedisAddr: " a:1, b:2 ,,c:3"}.Addrs())
	require.ErrorContains(t, RedisOptions{RedisAddr: "a:1,b:2", RedisDB: 2}.Validate(), "--redis-db must be 0 on a Redis Cluster")
	require.ErrorContains(t, RedisOptions{RedisCluster: true}.Validate(), "--redis-cluster needs --redis-addr")
	fs := NewFlagSet("x", "x")
	var state RedisOptions
	state.FlagsNamed(fs, "state-redis", "room state")
	require.NoError(t, fs.Parse([]string{"--state-redis-addr", "a:1", "--state-redis-cluster", "--state-redis-db", "1"}, func(string) string { return "" }))
	require.ErrorContains(t, state.Validate(), "--state-redis-db must be 0 on a Redis Cluster")
}
