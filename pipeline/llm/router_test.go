package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// sentRequest is what a fake endpoint received.
type sentRequest struct {
	Model         string `json:"model"`
	Priority      *int   `json:"priority"`
	Stream        bool   `json:"stream"`
	MaxTokens     int    `json:"max_tokens"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict bool            `json:"strict"`
		} `json:"json_schema"`
	} `json:"response_format"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// fake is an OpenAI-compatible endpoint whose every answer a test scripts.
type fake struct {
	srv   *httptest.Server
	calls atomic.Int64
	mu    sync.Mutex
	reqs  []sentRequest
	// handle answers call n (from 1).
	handle func(w http.ResponseWriter, r *http.Request, n int)
}

func newFake(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int)) *fake {
	t.Helper()
	f := &fake{handle: handle}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(f.calls.Add(1))
		var sr sentRequest
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &sr)
		f.mu.Lock()
		f.reqs = append(f.reqs, sr)
		f.mu.Unlock()
		f.handle(w, r, n)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) url() string { return f.srv.URL + "/v1" }

func (f *fake) requests() []sentRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentRequest(nil), f.reqs...)
}

// writeSSE streams content in three chunks, then finish and usage.
func writeSSE(w http.ResponseWriter, content, finish string) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	third := len(content) / 3
	for _, part := range []string{content[:third], content[third : 2*third], content[2*third:]} {
		b, _ := json.Marshal(part)
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%s},\"finish_reason\":null}]}\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	fmt.Fprintf(w, "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":%q}]}\n\n", finish)
	fmt.Fprint(w, "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120}}\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

const okAnswer = `{"risk":"none","categories":[],"reason":"ok"}`

func answer(content string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) { writeSSE(w, content, "stop") }
}

func status(code int, retryAfter string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":{"message":"status %d","type":"x"}}`, code)
	}
}

type setupOpts struct {
	primary, fallback *fake
	tweak             func(*Config)
	clock             clock.Clock // nil: the wall clock
}

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// waitLog is a fake clock whose timers fire at once, recording what each
// was set for: the router's backoff waits end without waiting, and the
// test reads them. Its time moves only by Advance.
type waitLog struct {
	*clock.Fake
	mu    sync.Mutex
	waits []time.Duration
}

func newWaitLog() *waitLog { return &waitLog{Fake: clock.NewFake(t0)} }

func (l *waitLog) NewTimer(d time.Duration) clock.Timer {
	l.mu.Lock()
	l.waits = append(l.waits, d)
	l.mu.Unlock()
	return l.Fake.NewTimer(0)
}

func (l *waitLog) all() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.waits...)
}

func setup(t *testing.T, o setupOpts) (*Router, *prometheus.Registry) {
	t.Helper()
	cfg := Config{
		Primary:     PoolConfig{BaseURL: o.primary.url(), Model: "prim-model", MaxConcurrency: 4, AttemptTimeout: 2 * time.Second},
		MaxAttempts: 4,
		BaseBackoff: time.Millisecond,
		MaxBackoff:  5 * time.Millisecond,
	}
	if o.fallback != nil {
		cfg.Fallback = PoolConfig{BaseURL: o.fallback.url(), APIKey: "k", Model: "fb-model", MaxConcurrency: 4, AttemptTimeout: 2 * time.Second}
	}
	if o.tweak != nil {
		o.tweak(&cfg)
	}
	reg := prometheus.NewRegistry()
	r, err := New(cfg, reg, WithClock(o.clock))
	require.NoError(t, err)
	return r, reg
}

func triageReq() Request {
	return Request{
		Stage:     pipeline.StageTriage,
		Messages:  []Message{{Role: RoleSystem, Text: "sys"}, {Role: RoleUser, Text: "user"}},
		Schema:    json.RawMessage(`{"type":"object"}`),
		MaxTokens: 300,
		Validate: func(b []byte) error {
			var v map[string]any
			return json.Unmarshal(b, &v)
		},
	}
}

func TestCompleteStreamsAndRecords(t *testing.T) {
	t.Parallel()
	prim := newFake(t, answer(okAnswer))
	r, reg := setup(t, setupOpts{primary: prim})
	req := triageReq()
	req.Messages = append(req.Messages, Message{Role: RoleUser, Text: "look", ImageURLs: []string{"https://img.test/a.jpg"}})
	var seen []Attempt
	req.OnAttempt = func(a Attempt) { seen = append(seen, a) }
	resp, err := r.Complete(t.Context(), req)
	require.NoError(t, err)
	require.JSONEq(t, okAnswer, string(resp.Content))
	require.Equal(t, pipeline.PoolPrimary, resp.Pool)
	require.Equal(t, "prim-model", resp.Model)
	require.Equal(t, 1, resp.Attempts)
	require.Equal(t, 100, resp.TokensIn)
	require.Equal(t, 20, resp.TokensOut)
	require.Positive(t, resp.TTFT)
	require.GreaterOrEqual(t, resp.Latency, resp.TTFT)
	require.Len(t, seen, 1)
	require.Equal(t, OutcomeOK, seen[0].Outcome)

	sent := prim.requests()[0]
	require.True(t, sent.Stream)
	require.True(t, sent.StreamOptions.IncludeUsage)
	require.Equal(t, 300, sent.MaxTokens)
	require.Equal(t, "json_schema", sent.ResponseFormat.Type)
	require.Equal(t, "triage", sent.ResponseFormat.JSONSchema.Name)
	require.True(t, sent.ResponseFormat.JSONSchema.Strict)
	require.JSONEq(t, `{"type":"object"}`, string(sent.ResponseFormat.JSONSchema.Schema))
	require.JSONEq(t, `"sys"`, string(sent.Messages[0].Content))
	require.JSONEq(t, `[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"https://img.test/a.jpg","detail":"low"}}]`, string(sent.Messages[2].Content))

	require.Equal(t, 1.0, testutil.ToFloat64(r.m.attempts.WithLabelValues("triage", "primary", "ok")))
	require.Equal(t, 120.0, testutil.ToFloat64(r.m.tokens.WithLabelValues("triage", "primary", "in"))+testutil.ToFloat64(r.m.tokens.WithLabelValues("triage", "primary", "out")))
	n, err := testutil.GatherAndCount(reg, "chatguard_llm_breaker_state", "chatguard_llm_cooldown_active")
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

func TestThrottledPrimaryFallsBackAtOnceAndCoolsForEveryone(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			t.Parallel()
			prim := newFake(t, status(code, "2"))
			fb := newFake(t, answer(okAnswer))
			sl := newWaitLog()
			r, _ := setup(t, setupOpts{primary: prim, fallback: fb, clock: sl})
			resp, err := r.Complete(t.Context(), triageReq())
			require.NoError(t, err)
			require.Empty(t, sl.all(), "the switch to the fallback must not wait out the primary's backoff")
			require.Equal(t, pipeline.PoolFallback, resp.Pool)
			require.Equal(t, 2, resp.Attempts)
			require.Equal(t, int64(1), prim.calls.Load())

			require.True(t, sl.Now().Add(2*time.Second).Equal(r.primary.cooldown.end()), "the cooldown is the Retry-After")
			// Every other caller skips the primary while it cools.
			for range 5 {
				resp, err := r.Complete(t.Context(), triageReq())
				require.NoError(t, err)
				require.Equal(t, pipeline.PoolFallback, resp.Pool)
				require.Equal(t, 1, resp.Attempts)
			}
			require.Equal(t, int64(1), prim.calls.Load(), "primary called during its cooldown")
			require.Equal(t, 6.0, testutil.ToFloat64(r.m.fallbacks.WithLabelValues("triage", "cooldown")))
		})
	}
}

func TestCooldownEndsThenPrimaryIsUsedAgain(t *testing.T) {
	t.Parallel()
	prim := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.Header().Set("retry-after-ms", "150")
			status(http.StatusTooManyRequests, "1")(w, r, n)
			return
		}
		writeSSE(w, okAnswer, "stop")
	})
	r, _ := setup(t, setupOpts{primary: prim})
	// No fallback: the router waits the cooldown out, bounded by ctx.
	start := time.Now()
	resp, err := r.Complete(t.Context(), triageReq())
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
	require.Equal(t, pipeline.PoolPrimary, resp.Pool)
	require.Equal(t, 2, resp.Attempts)
}

func TestAllCoolingBeyondDeadlineIsRetryable(t *testing.T) {
	t.Parallel()
	prim := newFake(t, status(http.StatusTooManyRequests, "30"))
	fb := newFake(t, status(http.StatusServiceUnavailable, "30"))
	r, _ := setup(t, setupOpts{primary: prim, fallback: fb})
	// Both pools cool for 30 s; the call may take 10 s.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := r.Complete(ctx, triageReq())
	require.ErrorIs(t, err, errNoPool, "must give up at once, not sleep until a deadline it cannot make")
	require.NoError(t, ctx.Err())
	var re *pipeline.RetryableError
	require.ErrorAs(t, err, &re)
	require.Greater(t, re.After, 25*time.Second)
	d, after := pipeline.Classify(err)
	require.Equal(t, pipeline.RetryLater, d)
	require.Equal(t, re.After, after)
}

func TestCooldownNeverShortens(t *testing.T) {
	t.Parallel()
	var c cooldown
	now := time.Now()
	c.extend(now.Add(10 * time.Second))
	c.extend(now.Add(time.Second))
	require.Equal(t, now.Add(10*time.Second).UnixNano(), c.end().UnixNano())
	c.extend(now.Add(20 * time.Second))
	require.Equal(t, now.Add(20*time.Second).UnixNano(), c.end().UnixNano())
}

func TestServerErrorsRetryThenSucceed(t *testing.T) {
	t.Parallel()
	prim := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n <= 2 {
			status(http.StatusInternalServerError, "")(w, r, n)
			return
		}
		writeSSE(w, okAnswer, "stop")
	})
	r, _ := setup(t, setupOpts{primary: prim})
	resp, err := r.Complete(t.Context(), triageReq())
	require.NoError(t, err)
	require.Equal(t, 3, resp.Attempts)
	require.Equal(t, 2.0, testutil.ToFloat64(r.m.attempts.WithLabelValues("triage", "primary", OutcomeServerError)))
}

func TestLastAttemptPrefersFallbackAfterPrimaryFailures(t *testing.T) {
	t.Parallel()
	prim := newFake(t, status(http.StatusInternalServerError, ""))
	fb := newFake(t, answer(okAnswer))
	r, _ := setup(t, setupOpts{primary: prim, fallback: fb, tweak: func(c *Config) { c.Primary.BreakerFailures = 10 }})
	resp, err := r.Complete(t.Context(), triageReq())
	require.NoError(t, err)
	require.Equal(t, pipeline.PoolFallback, resp.Pool)
	require.Equal(t, 4, resp.Attempts)
	require.Equal(t, int64(3), prim.calls.Load())
	require.Equal(t, 1.0, testutil.ToFloat64(r.m.fallbacks.WithLabelValues("triage", "last_attempt")))
}

func TestBreakerOpensThenProbes(t *testing.T) {
	t.Parallel()
	var healthy atomic.Bool
	prim := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if healthy.Load() {
			writeSSE(w, okAnswer, "stop")
			return
		}
		status(http.StatusBadGateway, "")(w, r, n)
	})
	fb := newFake(t, answer(okAnswer))
	clk := clock.NewFake(t0)
	r, _ := setup(t, setupOpts{primary: prim, fallback: fb, clock: clk, tweak: func(c *Config) {
		c.Primary.BreakerFailures = 2
		c.Primary.BreakerOpenFor = time.Minute
		c.MaxAttempts = 2
	}})
	breakerState := func() BreakerState { return r.primary.breaker.current(r.now()) }
	// Two calls, each failing on the primary once, open the breaker.
	for range 2 {
		resp, err := r.Complete(t.Context(), triageReq())
		require.NoError(t, err)
		require.Equal(t, pipeline.PoolFallback, resp.Pool)
	}
	require.Equal(t, int64(2), prim.calls.Load())
	require.Equal(t, BreakerOpen, breakerState())
	resp, err := r.Complete(t.Context(), triageReq())
	require.NoError(t, err)
	require.Equal(t, pipeline.PoolFallback, resp.Pool)
	require.Equal(t, 1, resp.Attempts)
	require.Equal(t, int64(2), prim.calls.Load(), "open breaker must not call the primary")

	clk.Advance(time.Minute)
	require.Equal(t, BreakerHalfOpen, breakerState())
	healthy.Store(true)
	resp, err = r.Complete(t.Context(), triageReq())
	require.NoError(t, err)
	require.Equal(t, pipeline.PoolPrimary, resp.Pool, "half-open probe goes to the primary")
	require.Equal(t, BreakerClosed, breakerState())
}

// TestBackoffBeforeAProbeFreesTheProbeSlot: after a failure the breaker
// opens; when it turns half-open the retry on the same pool takes the probe
// slot, then backs off before calling. The slot must come back, or the
// breaker stays half-open with every probe taken and refuses every caller
// for good (TestSampleRoomsUnderPrimaryFaults hung under load this way).
func TestBackoffBeforeAProbeFreesTheProbeSlot(t *testing.T) {
	t.Parallel()
	prim := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			status(http.StatusInternalServerError, "")(w, r, n)
			return
		}
		writeSSE(w, okAnswer, "stop")
	})
	clk := clock.NewFake(t0)
	r, _ := setup(t, setupOpts{primary: prim, clock: clk, tweak: func(c *Config) {
		c.Primary.BreakerFailures = 1
		c.Primary.BreakerOpenFor = time.Minute
		c.MaxAttempts = 2
	}})
	// No deadline: a call with one would give up on a window it cannot
	// outwait (errNoPool) instead of waiting for the probe.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := r.Complete(ctx, triageReq())
		done <- err
	}()
	// The first attempt failed and opened the breaker; the call now waits
	// for it. Its window ends when the test says.
	wait, cancelWait := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancelWait()
	require.NoError(t, clk.BlockUntilContext(wait, 1), "the call does not wait for the breaker")
	require.Equal(t, BreakerOpen, r.primary.breaker.current(r.now()))
	clk.Advance(time.Minute)
	// Half-open: the retry takes the probe slot, gives it back and backs
	// off (BaseBackoff 1 ms) before it asks again. Were the slot leaked,
	// the call would wait for the breaker for ever and never be done.
	require.NoError(t, clk.BlockUntilContext(wait, 1), "no backoff before the retry")
	clk.Advance(time.Millisecond)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-wait.Done():
		t.Fatal("the call never got the probe slot back")
	}
	require.Equal(t, int64(2), prim.calls.Load())
	require.Equal(t, BreakerClosed, r.primary.breaker.current(r.now()), "the probe succeeded")
}

func TestBreakerHalfOpenFailureReopens(t *testing.T) {
	t.Parallel()
	b := &breaker{threshold: 1, openFor: time.Minute, probes: 1}
	now := time.Now()
	b.done(now, false, true, false)
	require.Equal(t, BreakerOpen, b.current(now))
	later := now.Add(time.Minute)
	ok, probe := b.allow(later, true)
	require.True(t, ok)
	require.True(t, probe)
	ok, _ = b.allow(later, true)
	require.False(t, ok, "only one probe at a time")
	b.done(later, true, true, false)
	require.Equal(t, BreakerOpen, b.current(later))
	require.Equal(t, later.Add(time.Minute), b.until())
}

func TestHangTimesOutAndFallsBack(t *testing.T) {
	t.Parallel()
	prim := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) { <-r.Context().Done() })
	fb := newFake(t, answer(okAnswer))
	r, _ := setup(t, setupOpts{primary: prim, fallback: fb, tweak: func(c *Config) {
		c.Primary.AttemptTimeout = 100 * time.Millisecond
		c.Primary.BreakerFailures = 1
	}})
	resp, err := r.Complete(t.Context(), triageReq())
	require.NoError(t, err)
	require.Equal(t, pipeline.PoolFallback, resp.Pool)
	require.Equal(t, 1.0, testutil.ToFloat64(r.m.attempts.WithLabelValues("triage", "primary", OutcomeTimeout)))
}

func TestDroppedStreamIsAFailure(t *testing.T) {
	t.Parallel()
	prim := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"{\\\"ri\"},\"finish_reason\":null}]}\n\n")
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		writeSSE(w, okAnswer, "stop")
	})
	r, _ := setup(t, setupOpts{primary: prim})
	var outcomes []string
	req := triageReq()
	req.OnAttempt = func(a Attempt) { outcomes = append(outcomes, a.Outcome) }
	resp, err := r.Complete(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, 2, resp.Attempts)
	require.Contains(t, []string{OutcomeDropped, OutcomeTransport}, outcomes[0])
	require.Equal(t, OutcomeOK, outcomes[1])
}

func TestInvalidAnswerGetsOneRepair(t *testing.T) {
	t.Parallel()
	prim := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			writeSSE(w, `{"risk" "none"}`, "stop")
			return
		}
		writeSSE(w, okAnswer, "stop")
	})
	r, _ := setup(t, setupOpts{primary: prim})
	req := triageReq()
	var got []Attempt
	req.OnAttempt = func(a Attempt) { got = append(got, a) }
	req.Repair = func(content []byte, problem error) []Message {
		return []Message{{Role: RoleAssistant, Text: string(content)}, {Role: RoleUser, Text: "fix: " + problem.Error()}}
	}
	resp, err := r.Complete(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, 2, resp.Attempts)
	require.Len(t, got, 2)
	require.Equal(t, OutcomeInvalid, got[0].Outcome)
	require.False(t, got[0].Repair)
	require.True(t, got[1].Repair)
	reqs := prim.requests()
	require.Len(t, reqs[1].Messages, 4)
	require.Equal(t, "assistant", reqs[1].Messages[2].Role)
	require.Equal(t, 200, resp.TokensIn, "tokens sum every attempt")
}

func TestTruncatedTwiceCountsAsOneFailedAttemptThenRetries(t *testing.T) {
	t.Parallel()
	prim := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n <= 2 {
			writeSSE(w, `{"risk":"no`, "length")
			return
		}
		writeSSE(w, okAnswer, "stop")
	})
	r, _ := setup(t, setupOpts{primary: prim})
	req := triageReq()
	req.Repair = func([]byte, error) []Message { return []Message{{Role: RoleUser, Text: "shorter"}} }
	resp, err := r.Complete(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, 3, resp.Attempts)
	require.Equal(t, 2.0, testutil.ToFloat64(r.m.attempts.WithLabelValues("triage", "primary", OutcomeTruncated)))
}

func TestRejectedRequestIsPermanent(t *testing.T) {
	t.Parallel()
	prim := newFake(t, status(http.StatusBadRequest, ""))
	fb := newFake(t, answer(okAnswer))
	r, _ := setup(t, setupOpts{primary: prim, fallback: fb})
	_, err := r.Complete(t.Context(), triageReq())
	var pe *pipeline.PermanentError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, int64(1), prim.calls.Load())
	require.Equal(t, int64(0), fb.calls.Load())
}

func TestExhaustedAttemptsAreRetryable(t *testing.T) {
	t.Parallel()
	prim := newFake(t, status(http.StatusInternalServerError, ""))
	r, _ := setup(t, setupOpts{primary: prim, tweak: func(c *Config) { c.Primary.BreakerFailures = 20 }})
	resp, err := r.Complete(t.Context(), triageReq())
	var re *pipeline.RetryableError
	require.ErrorAs(t, err, &re)
	require.Equal(t, 4, resp.Attempts)
	require.Equal(t, int64(4), prim.calls.Load())
	require.ErrorContains(t, err, "4 attempts failed")
}

func TestStopCauseSurvives(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	// The operator stops the review while the primary holds the call.
	prim := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		cancel(&pipeline.StoppedError{Reason: "operator"})
		<-r.Context().Done()
	})
	// An attempt timeout far beyond the test's: only the stop can end it.
	r, _ := setup(t, setupOpts{primary: prim, tweak: func(c *Config) { c.Primary.AttemptTimeout = time.Hour }})
	_, err := r.Complete(ctx, triageReq())
	var se *pipeline.StoppedError
	require.ErrorAs(t, err, &se)
	d, _ := pipeline.Classify(err)
	require.Equal(t, pipeline.Stopped, d)
	require.Equal(t, BreakerClosed, r.primary.breaker.current(r.now()))
	require.Equal(t, 0.0, testutil.ToFloat64(r.m.attempts.WithLabelValues("triage", "primary", OutcomeTimeout)))
}

func TestFullPrimaryGateFallsBack(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	prim := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			<-release
		}
		writeSSE(w, okAnswer, "stop")
	})
	fb := newFake(t, answer(okAnswer))
	r, _ := setup(t, setupOpts{primary: prim, fallback: fb, tweak: func(c *Config) {
		c.Primary.MaxConcurrency = 1
		c.Primary.GateWait = 20 * time.Millisecond
	}})
	done := make(chan error, 1)
	go func() {
		_, err := r.Complete(context.Background(), triageReq())
		done <- err
	}()
	require.Eventually(t, func() bool { return r.primary.gate.used() == 1 }, 2*time.Second, 5*time.Millisecond)
	resp, err := r.Complete(t.Context(), triageReq())
	require.NoError(t, err)
	require.Equal(t, pipeline.PoolFallback, resp.Pool)
	require.Equal(t, 1.0, testutil.ToFloat64(r.m.fallbacks.WithLabelValues("triage", "gate_full")))
	close(release)
	require.NoError(t, <-done)
}

func TestGateReservesInteractiveSlots(t *testing.T) {
	t.Parallel()
	g := newGate(2, 1, clock.Real())
	require.True(t, g.tryAcquire(pipeline.ClassBatch))
	require.False(t, g.tryAcquire(pipeline.ClassBatch), "batch may not take the reserved slot")
	require.True(t, g.tryAcquire(pipeline.ClassInteractive))
	require.False(t, g.tryAcquire(pipeline.ClassInteractive))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	require.False(t, g.acquire(ctx, pipeline.ClassBatch, time.Second), "waits are bounded by ctx")
	got := make(chan bool, 1)
	go func() { got <- g.acquire(t.Context(), pipeline.ClassInteractive, time.Minute) }()
	select {
	case <-got:
		t.Fatal("acquire returned while every slot was taken")
	case <-time.After(20 * time.Millisecond):
	}
	g.release()
	select {
	case ok := <-got:
		require.True(t, ok, "a release wakes the waiter")
	case <-time.After(10 * time.Second):
		t.Fatal("a release did not wake the waiter")
	}
}

func TestInteractiveIsRefusedAtOnceWhenFull(t *testing.T) {
	t.Parallel()
	prim := newFake(t, status(http.StatusTooManyRequests, "30"))
	r, _ := setup(t, setupOpts{primary: prim})
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err := r.Complete(ctx, triageReq())
	require.Error(t, err)
	require.True(t, r.primary.cooldown.active(r.now()))
	req := triageReq()
	req.Class = pipeline.ClassInteractive
	start := time.Now()
	_, err = r.Complete(t.Context(), req)
	require.Error(t, err)
	require.Less(t, time.Since(start), 5*time.Second, "refused at once, not after the 30s cooldown")
}

func TestBackoffIsFullJitterWithinBounds(t *testing.T) {
	t.Parallel()
	prim := newFake(t, status(http.StatusInternalServerError, ""))
	sl := newWaitLog()
	r, _ := setup(t, setupOpts{primary: prim, clock: sl, tweak: func(c *Config) {
		c.BaseBackoff, c.MaxBackoff = 100*time.Millisecond, 300*time.Millisecond
		c.MaxAttempts = 5
		c.Primary.BreakerFailures = 20
	}})
	_, err := r.Complete(t.Context(), triageReq())
	require.Error(t, err)
	waits := sl.all()
	require.Len(t, waits, 4, "one wait before each retry on the pool that failed")
	for i, ceil := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond} {
		require.GreaterOrEqual(t, waits[i], time.Duration(0))
		require.LessOrEqual(t, waits[i], ceil, "wait %d", i+1)
	}
}

func TestBackoffWaitHonoursCancel(t *testing.T) {
	t.Parallel()
	prim := newFake(t, status(http.StatusInternalServerError, ""))
	// The real sleep, with a backoff no test could wait out.
	r, _ := setup(t, setupOpts{primary: prim, tweak: func(c *Config) {
		c.BaseBackoff, c.MaxBackoff = time.Hour, time.Hour
		c.Primary.BreakerFailures = 20
	}})
	ctx, cancel := context.WithCancelCause(t.Context())
	req := triageReq()
	req.OnAttempt = func(Attempt) { cancel(&pipeline.StoppedError{Reason: "during backoff"}) }
	done := make(chan error, 1)
	go func() { _, err := r.Complete(ctx, req); done <- err }()
	select {
	case err := <-done:
		var se *pipeline.StoppedError
		require.ErrorAs(t, err, &se)
		require.Equal(t, int64(1), prim.calls.Load())
	case <-time.After(10 * time.Second):
		t.Fatal("the backoff wait did not end with ctx")
	}
}

func TestCooldownFor(t *testing.T) {
	t.Parallel()
	cfg := PoolConfig{DefaultCooldown: 5 * time.Second, MaxCooldown: time.Minute}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		after, afterMS string
		want           time.Duration
	}{
		{"", "", 5 * time.Second},
		{"3", "", 3 * time.Second},
		{"2.5", "", 2500 * time.Millisecond},
		{"1", "1500", 1500 * time.Millisecond},
		{"", "250", 250 * time.Millisecond},
		{"3600", "", time.Minute},
		{"garbage", "", 5 * time.Second},
		{"garbage", "garbage", 5 * time.Second},
		{"0", "", 5 * time.Second},
		{"-3", "-3", 5 * time.Second},
		{now.Add(10 * time.Second).Format(http.TimeFormat), "", 10 * time.Second},
		{now.Add(-10 * time.Second).Format(http.TimeFormat), "", 5 * time.Second},
		// Values that overflowed time.Duration into a negative cooldown.
		{"99999999999999999999", "", time.Minute},
		{"1e300", "", time.Minute},
		{"", "99999999999999999", time.Minute},
		{"", "Inf", time.Minute},
		{"NaN", "NaN", 5 * time.Second},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, cooldownFor(tc.after, tc.afterMS, cfg, now), "%q / %q", tc.after, tc.afterMS)
	}
}

func FuzzCooldownFor(f *testing.F) {
	for _, s := range []string{"", "0", "5", "-3", "1e300", "99999999999999999999", "Wed, 21 Oct 2015 07:28:00 GMT", "NaN", "Inf"} {
		f.Add(s, s)
	}
	cfg := PoolConfig{DefaultCooldown: 5 * time.Second, MaxCooldown: time.Minute}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, after, afterMS string) {
		if d := cooldownFor(after, afterMS, cfg, now); d <= 0 || d > cfg.MaxCooldown {
			t.Fatalf("cooldown %v outside (0, %v] for %q / %q", d, cfg.MaxCooldown, after, afterMS)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := New(Config{Primary: PoolConfig{BaseURL: "ftp://x", ReservedInteractive: 100}, Fallback: PoolConfig{BaseURL: "http://fb/v1"}, MaxAttempts: 50}, nil)
	require.Error(t, err)
	for _, want := range []string{"primary pool: base URL", "primary pool: model is missing", "reserved interactive", "fallback pool: model is missing", "max attempts"} {
		require.ErrorContains(t, err, want)
	}
	r, err := New(Config{Primary: PoolConfig{BaseURL: "http://p/v1", Model: "m"}}, nil)
	require.NoError(t, err)
	p, f := r.Models()
	require.Equal(t, "m", p)
	require.Empty(t, f)
	require.Len(t, r.pools(), 1)
}

func TestConcurrentCallersShareOneCooldown(t *testing.T) {
	t.Parallel()
	var primCalls atomic.Int64
	// Both slots' calls are in flight before either is throttled: the
	// worst case for a shared cooldown.
	bothIn := make(chan struct{})
	prim := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if primCalls.Add(1) == 2 {
			close(bothIn)
		}
		select {
		case <-bothIn:
		case <-time.After(5 * time.Second):
		}
		status(http.StatusTooManyRequests, "5")(w, r, n)
	})
	fb := newFake(t, answer(okAnswer))
	r, _ := setup(t, setupOpts{primary: prim, fallback: fb, tweak: func(c *Config) { c.Primary.MaxConcurrency = 2 }})
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			_, err := r.Complete(t.Context(), triageReq())
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	// Only the calls already in flight when the first 429 landed reach
	// the primary.
	require.Equal(t, int64(2), primCalls.Load())
	require.True(t, r.primary.cooldown.active(r.now()), "cooldown set")
	require.Equal(t, int64(50), fb.calls.Load())
}

func TestStopCheckEndsStreamMidway(t *testing.T) {
	t.Parallel()
	prim := newFake(t, answer(okAnswer))
	r, _ := setup(t, setupOpts{primary: prim})
	var chunks atomic.Int64
	ctx := pipeline.WithStopCheck(t.Context(), func() error {
		if chunks.Add(1) > 2 {
			return &pipeline.StoppedError{Reason: "operator pressed stop"}
		}
		return nil
	})
	resp, err := r.Complete(ctx, triageReq())
	var se *pipeline.StoppedError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "operator pressed stop", se.Reason)
	require.Equal(t, 1, resp.Attempts)
	require.Equal(t, int64(1), prim.calls.Load())
	require.Equal(t, 1.0, testutil.ToFloat64(r.m.attempts.WithLabelValues("triage", "primary", OutcomeCanceled)))
}

// An answer that is invalid on every attempt is the chat's doing, not the
// pools': the stage ends as an UnusableAnswerError, which the job loop gives
// up on and which no dependency breaker counts, after at most MaxAttempts
// calls across both pools.
func TestEveryAnswerInvalidIsUnusable(t *testing.T) {
	t.Parallel()
	prim := newFake(t, answer(`{"risk" "none"}`))
	fb := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) { writeSSE(w, `{"risk":"no`, "length") })
	r, _ := setup(t, setupOpts{primary: prim, fallback: fb})
	req := triageReq()
	req.Repair = func([]byte, error) []Message { return []Message{{Role: RoleUser, Text: "fix it"}} }
	resp, err := r.Complete(t.Context(), req)
	var ue *pipeline.UnusableAnswerError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, pipeline.StageTriage, ue.Stage)
	require.Equal(t, 4, ue.Attempts)
	require.ErrorContains(t, err, "no usable answer in 4 attempts")
	require.Equal(t, 4, resp.Attempts)
	require.Equal(t, int64(4), prim.calls.Load()+fb.calls.Load(), "at most MaxAttempts calls")
	d, _ := pipeline.Classify(err)
	require.Equal(t, pipeline.GiveUp, d, "a retry would only pay for the same answers")
	require.True(t, pipeline.IsJobSpecific(err), "says nothing about the models' health")
	require.Equal(t, BreakerClosed, r.primary.breaker.current(r.now()))
	require.Equal(t, 1.0, testutil.ToFloat64(r.m.requests.WithLabelValues("triage", "none", OutcomeInvalid)))
}

// A stage that failed for the pool's sake on any attempt stays retryable
// (and feeds the models' health), however the other attempts failed.
func TestInvalidAfterServerErrorStaysRetryable(t *testing.T) {
	t.Parallel()
	prim := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			status(http.StatusInternalServerError, "")(w, r, n)
			return
		}
		writeSSE(w, `{"risk" "none"}`, "stop")
	})
	r, _ := setup(t, setupOpts{primary: prim})
	_, err := r.Complete(t.Context(), triageReq())
	var re *pipeline.RetryableError
	require.ErrorAs(t, err, &re)
	require.NotErrorAs(t, err, new(*pipeline.UnusableAnswerError))
	require.False(t, pipeline.IsJobSpecific(err))
	require.Equal(t, int64(4), prim.calls.Load())
}
