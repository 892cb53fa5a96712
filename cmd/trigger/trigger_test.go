package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/queuetest"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestBadUsageExits2NamingEveryProblem(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), nil, envOf(map[string]string{"CHATGUARD_QUIET": "10m", "CHATGUARD_KEY_PREFIX": "a{b}"}), &out, &errOut)
	require.Equal(t, 2, code)
	for _, w := range []string{"--chat-events-queue-url is required", "--chat-events-dlq-url is required", "--review-realtime-queue-url is required",
		"--redis-addr or --state-redis-addr is required", "max delay 5m0s must not be shorter than quiet 10m0s", "must not contain braces"} {
		require.Contains(t, errOut.String(), w)
	}
}

// The room state lives in a Redis of its own (--state-redis-*), the
// stack's Redis Cluster; the shared --redis-addr is a dead port, never
// dialled.
func TestMainTurnsChatEventsIntoRealtimeReviews(t *testing.T) {
	state := stacktest.RedisCluster(t)
	rdb := state.Client(t, nil)
	clk := clock.NewFake(time.Date(2026, 12, 2, 4, 10, 0, 0, time.UTC))
	events := queuetest.NewFake(queuetest.Config{Clock: clk})
	dlq, reviews := queuetest.NewFake(queuetest.Config{Clock: clk}), queuetest.NewFake(queuetest.Config{Clock: clk})

	cfg := DefaultConfig()
	cfg.Events.URL, cfg.EventsDLQ.URL, cfg.Reviews.URL = "http://chat-events", "http://chat-events-dlq", "http://review-realtime"
	cfg.RedisAddr, cfg.AdminAddr = "127.0.0.1:1", "127.0.0.1:0"
	cfg.StateRedis.RedisAddr, cfg.StateRedis.RedisCluster = strings.Join(state.Addrs, ","), state.Cluster
	cfg.Rooms.Prefix = stacktest.Unique("test:cmdtrigger") + ":"
	cfg.Rooms.Shards = 4
	t.Cleanup(func() { stacktest.DeleteKeys(rdb, cfg.Rooms.Prefix) })
	ready := make(chan string, 1)
	m := &Main{Config: cfg, Clock: clk, Queues: &Queues{Events: events, DLQ: dlq, Reviews: reviews}, OnReady: func(a string) { ready <- a }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	admin := <-ready

	sent := clk.Now()
	events.Enqueue(
		fmt.Appendf(nil, `{"schema_version":1,"room_id":"room-1","message_id":"m1","sender_id":"u","sender_role":"buyer","kind":"text","sent_at":%q}`, sent.Format(time.RFC3339)),
		fmt.Appendf(nil, `{"schema_version":1,"room_id":"room-1","message_id":"m2","sender_id":"u","sender_role":"seller","kind":"image","sent_at":%q}`, sent.Format(time.RFC3339)),
		[]byte(`{"schema_version":9}`),
	)
	wait, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	for events.Stats().Held > 0 { // the receive loop runs on real time; the fake queue waits 50 ms per empty poll
		require.NoError(t, wait.Err(), "the events were not settled")
		require.NoError(t, clk.BlockUntilContext(wait, 1))
	}
	require.Equal(t, 1, dlq.Stats().Held, "the malformed event is dead-lettered")
	clk.Advance(time.Minute)
	for reviews.Stats().Held == 0 {
		require.NoError(t, wait.Err(), "no review event was published")
		require.NoError(t, clk.BlockUntilContext(wait, 1))
		clk.Advance(cfg.Engine.FireInterval)
	}
	msgs := reviews.Messages()
	require.Len(t, msgs, 1)
	ev, err := pipeline.DecodeReviewEvent(msgs[0].Body)
	require.NoError(t, err)
	require.Equal(t, "room-1", ev.RoomID)
	require.Equal(t, pipeline.SourceRealtime, ev.Source)
	require.Equal(t, pipeline.RealtimeRunID(ev.WindowEnd), ev.RunID)

	// The test's clock jumped a minute at once, past the liveness bound;
	// the receive loop notes its advance when its pending receive returns,
	// so /healthz is live again once the loop ran after the jump.
	for {
		resp, err := http.Get("http://" + admin + "/healthz")
		require.NoError(t, err)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		require.NoError(t, wait.Err(), "/healthz stayed %d: the receive loop does not advance", resp.StatusCode)
		require.NoError(t, clk.BlockUntilContext(wait, 1))
	}
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ready", "/metrics": `chatguard_trigger_fires_total{reason="quiet"} 1`,
		"/metrics?": `chatguard_trigger_fires_total{reason="max_delay"} 0`} {
		resp, err := http.Get("http://" + admin + strings.TrimSuffix(path, "?"))
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.True(t, strings.Contains(string(b), want), "%s: %s", path, want)
	}
}
