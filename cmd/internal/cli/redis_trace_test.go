package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/chatguard/chatguard/internal/stacktest"
)

// TestRedisSpansNameNoKey runs commands on the stack's Redis through an
// instrumented client: under a sampled span each command is a child span
// that names the command and the server but never the key or the value
// (keys carry room ids); outside any span there is none.
func TestRedisSpansNameNoKey(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	c, err := RedisOptions{RedisAddr: stacktest.Get(t, "CHATGUARD_REDIS_ADDR")}.Client(nil)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, instrumentRedis(c, tp))

	key := stacktest.Unique("trace:room-secret-42")
	defer c.Del(context.Background(), key)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.Set(ctx, key, "value-secret-7", time.Minute).Err(), "untraced")
	tctx, root := tp.Tracer("test").Start(ctx, "root")
	require.Equal(t, "value-secret-7", c.Get(tctx, key).Val())
	pipe := c.Pipeline()
	pipe.Expire(tctx, key, time.Minute)
	pipe.TTL(tctx, key)
	_, err = pipe.Exec(tctx)
	require.NoError(t, err)
	root.End()

	var names []string
	for _, s := range rec.Ended() {
		if s.Name() == "root" {
			continue
		}
		names = append(names, s.Name())
		require.Equal(t, root.SpanContext().TraceID(), s.SpanContext().TraceID(), "%s is in the caller's trace", s.Name())
		for _, kv := range s.Attributes() {
			v := kv.Value.String()
			require.False(t, strings.Contains(v, "secret"), "%s: attribute %s=%q holds the key or the value", s.Name(), kv.Key, v)
			require.NotEqual(t, "db.statement", string(kv.Key))
		}
	}
	require.Contains(t, names, "get")
	require.Contains(t, names, "redis.pipeline expire ttl", "a pipeline is one span")
	require.NotContains(t, names, "set", "no span outside a trace")
}
