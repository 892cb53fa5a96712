package chatapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

var (
	from = time.Date(2026, 11, 3, 4, 0, 0, 0, time.UTC)
	to   = from.Add(time.Hour)
)

// script answers request i with steps[i] (the last step repeats).
type script struct {
	mu    sync.Mutex
	steps []func(w http.ResponseWriter, r *http.Request)
	reqs  []*http.Request
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	i := min(len(s.reqs), len(s.steps)-1)
	s.reqs = append(s.reqs, r)
	step := s.steps[i]
	s.mu.Unlock()
	step(w, r)
}

func (s *script) calls() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.reqs) }

func status(code int, hdr ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.WriteHeader(code)
	}
}

func history(room string, n int) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		h := pipeline.ChatHistory{RoomID: room, From: from, To: to}
		for i := range n {
			h.Messages = append(h.Messages, pipeline.ChatMessage{MessageID: "m" + string(rune('a'+i)), SenderID: "u1",
				SenderRole: pipeline.RoleBuyer, SentAt: from.Add(time.Duration(i) * time.Minute), Kind: pipeline.KindText, Text: "안녕하세요"})
		}
		_ = json.NewEncoder(w).Encode(h)
	}
}

// sleepLog is a fake clock whose timers, the client's waits between
// attempts, fire at once; it records what each was set for.
type sleepLog struct {
	*clock.Fake
	mu    sync.Mutex
	waits []time.Duration
}

func newSleepLog() *sleepLog {
	return &sleepLog{Fake: clock.NewFake(time.Date(2026, 11, 3, 4, 0, 0, 0, time.UTC))}
}

func (l *sleepLog) NewTimer(d time.Duration) clock.Timer {
	l.mu.Lock()
	l.waits = append(l.waits, d)
	l.mu.Unlock()
	return l.Fake.NewTimer(0)
}

func (l *sleepLog) all() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.waits...)
}

func setupWith(t *testing.T, tweak func(*Config), clk clock.Clock, steps ...func(http.ResponseWriter, *http.Request)) (*Client, *script, *prometheus.Registry) {
	t.Helper()
	s := &script{steps: steps}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	cfg := DefaultConfig()
	cfg.BaseURL = srv.URL + "/api/"
	cfg.Timeout = 200 * time.Millisecond
	cfg.RetryBase, cfg.RetryMax = time.Millisecond, 5*time.Millisecond
	cfg.MaxBodyBytes = 4096
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := New(cfg, WithClock(clk))
	require.NoError(t, err)
	return c, s, reg
}

func setup(t *testing.T, steps ...func(http.ResponseWriter, *http.Request)) (*Client, *script, *prometheus.Registry) {
	t.Helper()
	return setupWith(t, nil, newSleepLog(), steps...)
}

func TestHistory(t *testing.T) {
	t.Parallel()
	slow := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}
	tests := []struct {
		name      string
		steps     []func(http.ResponseWriter, *http.Request)
		wantMsgs  int
		wantCalls int
		wantDisp  pipeline.Disposition
		wantAfter time.Duration
		wantErr   string
	}{
		{name: "ok", steps: steps(history("room+1 x", 3)), wantMsgs: 3, wantCalls: 1},
		{name: "not found is permanent", steps: steps(status(404)), wantCalls: 1, wantDisp: pipeline.GiveUp, wantErr: "not found"},
		{name: "bad request is permanent", steps: steps(status(400)), wantCalls: 1, wantDisp: pipeline.GiveUp, wantErr: "status 400"},
		{name: "5xx then ok", steps: steps(status(503), status(500), history("room+1 x", 2)), wantMsgs: 2, wantCalls: 3},
		{name: "5xx to the end is retryable", steps: steps(status(502)), wantCalls: 3, wantDisp: pipeline.RetryLater, wantErr: "status 502"},
		{name: "timeout then ok", steps: steps(slow, history("room+1 x", 1)), wantMsgs: 1, wantCalls: 2},
		{name: "timeouts to the end", steps: steps(slow), wantCalls: 3, wantDisp: pipeline.RetryLater, wantErr: "timeout"},
		{name: "long retry-after goes to the queue", steps: steps(status(429, "Retry-After", "60")), wantCalls: 1, wantDisp: pipeline.RetryLater, wantAfter: time.Minute, wantErr: "status 429"},
		{name: "bad json is retryable", steps: steps(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{")) }), wantCalls: 3, wantDisp: pipeline.RetryLater, wantErr: "decode"},
		{name: "oversized body is read, not refused", steps: steps(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"messages":[` + strings.Repeat(" ", 5000) + `]}`))
		}), wantMsgs: 0, wantCalls: 1},
		{name: "cut mid-body is retryable", steps: steps(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "400")
			_, _ = w.Write([]byte(`{"messages":[{"message_id":"m1"`))
		}), wantCalls: 3, wantDisp: pipeline.RetryLater, wantErr: "decode"},
		{name: "answer for another room", steps: steps(history("other", 1)), wantCalls: 3, wantDisp: pipeline.RetryLater, wantErr: "another room"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, s, _ := setup(t, tc.steps...)
			msgs, err := c.History(context.Background(), "room+1 x", from.In(time.FixedZone("KST", 9*3600)), to)
			require.Equal(t, tc.wantCalls, s.calls())
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.Len(t, msgs, tc.wantMsgs)
				r := s.reqs[0]
				require.Equal(t, "/api/rooms/room+1%20x/messages", r.URL.EscapedPath())
				require.Equal(t, from.Format(time.RFC3339Nano), r.URL.Query().Get("from"))
				require.Equal(t, to.Format(time.RFC3339Nano), r.URL.Query().Get("to"))
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
			d, after := pipeline.Classify(err)
			require.Equal(t, tc.wantDisp, d)
			require.Equal(t, tc.wantAfter, after)
		})
	}
}

func steps(s ...func(http.ResponseWriter, *http.Request)) []func(http.ResponseWriter, *http.Request) {
	return s
}

func TestHistoryHonoursCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A wait an hour long on a clock that never moves, cancelled once it
	// has begun.
	clk := clock.NewFake(from)
	c, s, _ := setupWith(t, func(cfg *Config) {
		cfg.RetryBase, cfg.RetryMax = time.Hour, time.Hour
	}, clk, status(503))
	done := make(chan error, 1)
	go func() { _, err := c.History(ctx, "r1", from, to); done <- err }()
	wait, cancelWait := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancelWait()
	require.NoError(t, clk.BlockUntilContext(wait, 1), "History does not wait between attempts")
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
		var re *pipeline.RetryableError
		require.False(t, errors.As(err, &re))
		require.Equal(t, 1, s.calls())
	case <-time.After(5 * time.Second):
		t.Fatal("History did not return after cancel")
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	c, _, reg := setup(t, status(500), status(404))
	_, err := c.History(context.Background(), "r1", from, to)
	require.Error(t, err)
	require.Equal(t, 1.0, testutil.ToFloat64(c.requests.WithLabelValues("server_error")))
	require.Equal(t, 1.0, testutil.ToFloat64(c.requests.WithLabelValues("not_found")))
	n, err := testutil.GatherAndCount(reg, "chatguard_chatapi_request_duration_seconds")
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	err := Config{BaseURL: "ftp://x"}.Validate()
	for _, w := range []string{"not an http", "timeout", "attempts", "retry base", "body"} {
		require.ErrorContains(t, err, w)
	}
	cfg := DefaultConfig()
	cfg.BaseURL = "http://chat:8080"
	require.NoError(t, cfg.Validate())
}

func TestWaitsFollowBackoffAndRetryAfter(t *testing.T) {
	t.Parallel()
	sl := newSleepLog()
	c, s, _ := setupWith(t, func(cfg *Config) {
		cfg.RetryBase, cfg.RetryMax = 100*time.Millisecond, 2*time.Second
		cfg.MaxAttempts = 4
	}, sl, status(503), status(429, "Retry-After", "2"), status(500), history("r1", 1))
	msgs, err := c.History(context.Background(), "r1", from, to)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, 4, s.calls())
	waits := sl.all()
	require.Len(t, waits, 3)
	require.LessOrEqual(t, waits[0], 100*time.Millisecond, "full jitter under the first ceiling")
	require.Equal(t, 2*time.Second, waits[1], "the server's Retry-After beats a shorter backoff")
	require.LessOrEqual(t, waits[2], 400*time.Millisecond)
}

func TestRetryAfterIsClampedAndUsesTheClock(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 3, 4, 0, 0, 0, time.UTC)
	c, _, _ := setupWith(t, nil, clock.NewFake(now), status(200))
	for h, want := range map[string]time.Duration{
		"":                     0,
		"abc":                  0,
		"-3":                   0,
		"7":                    7 * time.Second,
		"99999999999999999999": maxRetryAfter, // overflowed to a negative wait before
		"99999999999":          maxRetryAfter,
		now.Add(90 * time.Second).Format(http.TimeFormat):  90 * time.Second,
		now.Add(-90 * time.Second).Format(http.TimeFormat): 0,
	} {
		require.Equal(t, want, c.retryAfter(h), "%q", h)
	}
}

func TestHugeRetryAfterGoesToTheQueueClamped(t *testing.T) {
	t.Parallel()
	c, s, _ := setup(t, status(503, "Retry-After", "99999999999999999999"))
	_, err := c.History(context.Background(), "r1", from, to)
	d, after := pipeline.Classify(err)
	require.Equal(t, pipeline.RetryLater, d)
	require.Equal(t, maxRetryAfter, after)
	require.Equal(t, 1, s.calls())
}

func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "5", "-3", "Wed, 21 Oct 2015 07:28:00 GMT", "abc", "99999999999999999999", "1e300", "NaN"} {
		f.Add(s)
	}
	c, err := New(Config{BaseURL: "http://chat", Timeout: time.Second, MaxAttempts: 1, RetryBase: 1, RetryMax: 1, MaxBodyBytes: 1, MaxReadBytes: 1})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, s string) {
		if d := c.retryAfter(s); d < 0 || d > maxRetryAfter {
			t.Fatalf("retry-after %v outside [0, %v] for %q", d, maxRetryAfter, s)
		}
	})
}
