package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// silentRedis is a Redis stand-in that accepts connections and reads
// every command but never answers: a Redis that hangs.
func silentRedis(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// deadlineConn records the read deadlines the client sets on a connection.
type deadlineConn struct {
	net.Conn
	mu    *sync.Mutex
	reads *[]time.Time
}

func (c deadlineConn) SetReadDeadline(t time.Time) error {
	if !t.IsZero() {
		c.mu.Lock()
		*c.reads = append(*c.reads, t)
		c.mu.Unlock()
	}
	return c.Conn.SetReadDeadline(t)
}

// TestRedisProfilesAreBoundedByTheContext: a fleet lease and a stop lookup
// sent through their profiles to a Redis that never answers end when the
// caller's context deadline passes, not after the client's read timeout
// or a retry: every read deadline set on the socket is the context's, the
// error is that read's timeout (go-redis reports the socket's, not
// context.DeadlineExceeded), and no command is retried.
func TestRedisProfilesAreBoundedByTheContext(t *testing.T) {
	t.Parallel()
	addr := silentRedis(t)
	o := RedisOptions{RedisAddr: addr}
	for _, tc := range []struct {
		name    string
		profile func(*redis.UniversalOptions)
		call    func(context.Context, redis.UniversalClient) error
	}{
		// The lease: redislimits' acquire is one EVALSHA.
		{"fleet lease", FleetProfile, func(ctx context.Context, c redis.UniversalClient) error {
			return c.EvalSha(ctx, "0123456789abcdef0123456789abcdef01234567", []string{"chatguard:fleet:lease:p"}, "id", 16, 15000).Err()
		}},
		// The stop lookup: redisstop's Lookup is one MGET.
		{"stop lookup", StopProfile, func(ctx context.Context, c redis.UniversalClient) error {
			return c.MGet(ctx, "chatguard:stop:room:r1", "chatguard:stop:run:x").Err()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var reads []time.Time
			tune := func(ro *redis.UniversalOptions) {
				tc.profile(ro)
				ro.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
					conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
					if err != nil {
						return nil, err
					}
					return deadlineConn{Conn: conn, mu: &mu, reads: &reads}, nil
				}
			}
			ro, err := o.ClientOptions(tune)
			require.NoError(t, err)
			c, err := o.Client(tune)
			require.NoError(t, err)
			defer c.Close()
			require.IsType(t, &redis.Client{}, c, "one address is one node")
			require.Zero(t, c.(*redis.Client).Options().MaxRetries, "a call is never retried")
			require.True(t, ro.ContextTimeoutEnabled)

			// Below the profile's read timeout, so the two differ, and long
			// enough for the dial on a loaded machine.
			ctx, cancel := context.WithTimeout(context.Background(), ro.ReadTimeout/2)
			defer cancel()
			deadline, _ := ctx.Deadline()
			err = tc.call(ctx, c)
			require.Error(t, err)
			var ne net.Error
			require.True(t, errors.As(err, &ne) && ne.Timeout(), "the read timed out: %v", err)
			mu.Lock()
			defer mu.Unlock()
			require.NotEmpty(t, reads, "no read was waited for: %v", err)
			for _, r := range reads {
				require.Equal(t, deadline, r, "the socket waits for the context's deadline, not the read timeout")
			}
		})
	}
}
