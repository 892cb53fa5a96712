package cli

import (
	"testing"

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
	require.Equal(t, "chatguard", c.Options().Username)
	require.NotNil(t, c.Options().TLSConfig)

	require.ErrorContains(t, RedisOptions{RedisCertFile: cert}.Validate(), "go together")
	require.ErrorContains(t, RedisOptions{RedisUsername: "u"}.Validate(), "needs --redis-password")
	_, err = RedisOptions{RedisCAFile: key}.TLSConfig()
	require.Error(t, err, "a key is not a CA")
}
