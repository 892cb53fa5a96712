package redisstop

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/stop"
)

type fixture struct {
	cfg    Config
	target stacktest.RedisTarget
	rdb    redis.UniversalClient
	pub    *Publisher
	holder *stop.Holder
}

// eachRedis runs a test on the stack's node and its cluster, in parallel.
func eachRedis(t *testing.T, fn func(t *testing.T, f fixture)) {
	t.Parallel()
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		t.Parallel()
		fn(t, setup(t, r))
	})
}

func setup(t *testing.T, r stacktest.RedisTarget) fixture {
	t.Helper()
	cfg := DefaultConfig()
	name := stacktest.Unique("test-stop")
	cfg.Channel = name
	cfg.KeyPrefix = name + ":"
	cfg.ReconnectMin = 20 * time.Millisecond
	cfg.ReconnectMax = 100 * time.Millisecond
	require.NoError(t, cfg.Validate())
	rdb := r.Client(t, nil)
	return fixture{cfg: cfg, target: r, rdb: rdb, pub: NewPublisher(rdb, cfg, nil), holder: stop.NewHolder(nil, nil)}
}

// runSubscriber runs a subscriber over client until the test ends.
func runSubscriber(t *testing.T, f fixture, client redis.UniversalClient) *Subscriber {
	t.Helper()
	sub := NewSubscriber(client, f.cfg, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = sub.Run(ctx, f.holder) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("subscriber did not stop")
		}
	})
	require.Eventually(t, sub.Up, 5*time.Second, 5*time.Millisecond)
	return sub
}

func roomSignal(room string) pipeline.StopSignal {
	now := time.Now().UTC()
	return pipeline.StopSignal{Scope: pipeline.StopScopeRoom, RoomID: room, Reason: "sanctioned", PublishedAt: now, ExpiresAt: now.Add(time.Minute)}
}

func TestPublishCancelsWatchedJob(t *testing.T) {
	eachRedis(t, func(t *testing.T, f fixture) {
		runSubscriber(t, f, f.rdb)
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		defer f.holder.Watch(pipeline.NewStopTarget("room-a", time.Now(), time.Now().Add(time.Hour), "run"), cancel)()

		n, err := f.pub.Publish(context.Background(), roomSignal("room-a"))
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "one subscriber listening")
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
			t.Fatal("job not cancelled")
		}
		var stopped *pipeline.StoppedError
		require.True(t, errors.As(context.Cause(ctx), &stopped))
		ttl, err := f.rdb.TTL(context.Background(), f.cfg.Layout().Key("room:room-a")).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, 50*time.Second, "the stored key carries the signal's TTL")
	})
}

func TestLateSubscriberLoadsStoredSignals(t *testing.T) {
	eachRedis(t, func(t *testing.T, f fixture) {
		_, err := f.pub.Publish(context.Background(), roomSignal("room-late"))
		require.NoError(t, err)
		runSubscriber(t, f, f.rdb)
		_, ok := f.holder.Check(pipeline.NewStopTarget("room-late", time.Now(), time.Now().Add(time.Hour), "r"))
		require.True(t, ok, "a pod started after the publish honours it")
	})
}

func TestResubscribeAfterOutageLoadsMissedSignals(t *testing.T) {
	eachRedis(t, func(t *testing.T, f fixture) {
		proxy := newCutter(t)
		cut := f.target.Client(t, func(o *redis.UniversalOptions) {
			o.MaxRetries, o.DialTimeout, o.Dialer = -1, 200*time.Millisecond, proxy.Dial
		})
		sub := runSubscriber(t, f, cut)

		proxy.SetDown(true)
		require.Eventually(t, func() bool { return !sub.Up() }, 15*time.Second, 10*time.Millisecond, "subscriber notices the outage")
		n, err := f.pub.Publish(context.Background(), roomSignal("room-missed"))
		require.NoError(t, err)
		require.Zero(t, n, "nobody hears the broadcast while cut off")
		target := pipeline.NewStopTarget("room-missed", time.Now(), time.Now().Add(time.Hour), "r")
		_, ok := f.holder.Check(target)
		require.False(t, ok)

		proxy.SetDown(false)
		require.Eventually(t, func() bool { _, ok := f.holder.Check(target); return ok }, 10*time.Second, 10*time.Millisecond,
			"the missed stop is honoured after reconnecting")
	})
}

func TestLookupCostsOneCommand(t *testing.T) {
	eachRedis(t, func(t *testing.T, f fixture) {
		counter := &countHook{}
		client := f.target.Client(t, nil)
		client.AddHook(counter)
		sub := NewSubscriber(client, f.cfg, nil, nil)
		target := pipeline.NewStopTarget("room-c", time.Now().UTC().Truncate(time.Hour), time.Now().UTC().Truncate(time.Hour).Add(time.Hour), "run-c")

		found, err := sub.Lookup(context.Background(), target)
		require.NoError(t, err)
		require.Empty(t, found)
		require.EqualValues(t, 1, counter.n.Load(), "a review that is not stopped costs one Redis command")

		now := time.Now().UTC()
		_, err = f.pub.Publish(context.Background(), pipeline.StopSignal{Scope: pipeline.StopScopeRun, RunID: "run-c", Reason: "bad window", PublishedAt: now, ExpiresAt: now.Add(time.Minute)})
		require.NoError(t, err)
		require.NoError(t, f.rdb.Set(context.Background(), f.cfg.Layout().Key("room:room-c"), "not a signal", time.Minute).Err())
		found, err = sub.Lookup(context.Background(), target)
		require.NoError(t, err)
		require.Len(t, found, 1, "the stored run stop; the invalid room value is skipped")
		require.Equal(t, pipeline.StopScopeRun, found[0].Scope)
		require.EqualValues(t, 1, testCounter(sub.m.Invalid))
		require.EqualValues(t, 2, counter.n.Load())
	})
}

func TestPublishRejectsInvalidSignal(t *testing.T) {
	eachRedis(t, func(t *testing.T, f fixture) {
		_, err := f.pub.Publish(context.Background(), pipeline.StopSignal{Scope: pipeline.StopScopeRoom})
		require.ErrorContains(t, err, "room_id")
	})
}

func TestInvalidBroadcastIsCountedAndIgnored(t *testing.T) {
	eachRedis(t, func(t *testing.T, f fixture) {
		sub := runSubscriber(t, f, f.rdb)
		publish := f.rdb.Publish
		if f.target.Cluster {
			publish = f.rdb.SPublish
		}
		require.NoError(t, publish(context.Background(), f.cfg.Channel, "ignore previous instructions").Err())
		require.NoError(t, publish(context.Background(), f.cfg.Channel, `{"scope":"room"}`).Err())
		require.Eventually(t, func() bool { return testCounter(sub.m.Invalid) == 2 }, 5*time.Second, 5*time.Millisecond)
		require.Equal(t, 0, f.holder.Len())
	})
}

// TestReconnectBacksOffWithFullJitter points a subscriber at a closed
// port: every subscription fails at once, and each wait before the next one
// stays under the policy's growing, capped ceiling. No Redis needed.
func TestReconnectBacksOffWithFullJitter(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	client := redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = client.Close() })
	cfg := DefaultConfig()
	cfg.ReconnectMin, cfg.ReconnectMax = 100*time.Millisecond, 400*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := &reconnectLog{Fake: clock.NewFake(time.Now()), cancelAt: 5, cancel: cancel}
	sub := NewSubscriber(client, cfg, nil, nil, WithClock(clk))
	done := make(chan error, 1)
	go func() { done <- sub.Run(ctx, stop.NewHolder(nil, nil)) }()
	select {
	case err := <-done:
		require.NoError(t, err, "Run returns nil when ctx ends")
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not end with ctx")
	}
	waits := clk.all()
	require.Len(t, waits, 5)
	for i, ceil := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond} {
		require.GreaterOrEqual(t, waits[i], time.Duration(0))
		require.LessOrEqual(t, waits[i], ceil, "wait %d", i+1)
	}
	require.False(t, sub.Up())
}

type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}

// count counts the commands a caller issues, not the connection handshake
// (HELLO, CLIENT SETINFO, ...) that go-redis sends once per connection.
func (h *countHook) count(cmd redis.Cmder) {
	switch cmd.Name() {
	case "hello", "client", "auth", "select", "ping":
	default:
		h.n.Add(1)
	}
}

// cutter is a dialer whose connections the test can cut, and whose new
// dials fail while it is down: a client cut off from every node of a
// Redis, without touching the servers.
type cutter struct {
	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

func newCutter(t *testing.T) *cutter {
	c := &cutter{conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { c.SetDown(true) })
	return c
}

// Dial is a redis.UniversalOptions dialer.
func (c *cutter) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return nil, errors.New("cut off")
	}
	conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.conns[conn] = struct{}{}
	return conn, nil
}

func (c *cutter) SetDown(down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = down
	if down {
		for conn := range c.conns {
			_ = conn.Close()
		}
		clear(c.conns)
	}
}

// reconnectLog is a fake clock whose timers, the subscriber's reconnect
// waits, end at once; it records what each was set for and cancels the
// run during the cancelAt-th.
type reconnectLog struct {
	*clock.Fake
	cancelAt int
	cancel   context.CancelFunc
	mu       sync.Mutex
	waits    []time.Duration
}

func (l *reconnectLog) NewTimer(d time.Duration) clock.Timer {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waits = append(l.waits, d)
	if len(l.waits) == l.cancelAt {
		l.cancel()
		return l.Fake.NewTimer(d) // never fires: the fake does not move
	}
	return l.Fake.NewTimer(0)
}

func (l *reconnectLog) all() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.waits...)
}
