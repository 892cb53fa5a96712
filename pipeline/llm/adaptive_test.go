package llm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// limiterUnderTest returns a limiter and the limits it published.
func limiterUnderTest(cfg AdaptiveConfig) (*adaptiveLimit, *[]int) {
	var published []int
	a := newAdaptiveLimit(cfg.withDefaults(64), func(n int) { published = append(published, n) })
	return a, &published
}

// window feeds one full window of samples at ttft with inFlight calls.
func window(a *adaptiveLimit, t0 *time.Time, ttft time.Duration, inFlight int) {
	for range minWindowSamples {
		a.observe(*t0, ttft, inFlight)
		*t0 = t0.Add(a.cfg.Window/minWindowSamples + time.Nanosecond)
	}
	a.observe(*t0, ttft, inFlight)
}

func TestAdaptiveGrowsWhileSaturatedAndFast(t *testing.T) {
	a, published := limiterUnderTest(AdaptiveConfig{Enabled: true, Min: 4, Max: 10})
	t0 := time.Unix(0, 0)
	for range 20 {
		window(a, &t0, 50*time.Millisecond, a.current())
	}
	require.Equal(t, 10, a.current(), "bounded by max")
	require.Equal(t, []int{4, 5, 6, 7, 8, 9, 10}, *published)
}

func TestAdaptiveDoesNotGrowWhenTheLimitIsNotWhatHoldsCallsBack(t *testing.T) {
	a, _ := limiterUnderTest(AdaptiveConfig{Enabled: true, Min: 8, Max: 32})
	t0 := time.Unix(0, 0)
	for range 10 {
		window(a, &t0, 50*time.Millisecond, 2)
	}
	require.Equal(t, 8, a.current())
}

func TestAdaptiveShrinksWhenTTFTShowsAQueue(t *testing.T) {
	a, _ := limiterUnderTest(AdaptiveConfig{Enabled: true, Min: 2, Max: 64, Initial: 40})
	t0 := time.Unix(0, 0)
	window(a, &t0, 50*time.Millisecond, 40) // the unloaded baseline
	require.Equal(t, 41, a.current())
	window(a, &t0, 150*time.Millisecond, 41) // 3x: over tolerance 1.5
	require.Equal(t, 20, a.current(), "cut by tolerance/ratio = 1/2")
	window(a, &t0, 1500*time.Millisecond, 20) // 30x: at most halved
	require.Equal(t, 10, a.current())
	for range 10 {
		window(a, &t0, 10*time.Second, 10)
	}
	require.Equal(t, 2, a.current(), "bounded by min")
	// Back to fast: it probes upwards again.
	window(a, &t0, 50*time.Millisecond, 2)
	require.Equal(t, 3, a.current())
}

func TestAdaptiveWaitingQueueCutsAtOnceAndHoldsGrowth(t *testing.T) {
	a, _ := limiterUnderTest(AdaptiveConfig{Enabled: true, Min: 1, Max: 64, Initial: 50, MaxWaiting: 4})
	t0 := time.Unix(0, 0)
	a.observeWaiting(t0, 4)
	require.Equal(t, 50, a.current(), "a small queue is tolerated")
	a.observeWaiting(t0, 20)
	require.Equal(t, 45, a.current())
	window(a, &t0, 50*time.Millisecond, 45)
	require.Equal(t, 45, a.current(), "no growth while the pool reports a queue")
	a.observeWaiting(t0, 0)
	window(a, &t0, 50*time.Millisecond, 45)
	require.Equal(t, 46, a.current())
}

func TestAdaptiveFreshScrapeWithoutAQueueOverridesATTFTRise(t *testing.T) {
	a, _ := limiterUnderTest(AdaptiveConfig{Enabled: true, Min: 1, Max: 64, Initial: 30, ScrapeEvery: time.Second})
	t0 := time.Unix(0, 0)
	window(a, &t0, 50*time.Millisecond, 30) // baseline
	require.Equal(t, 31, a.current())
	a.observeWaiting(t0, 0)
	window(a, &t0, 200*time.Millisecond, 31) // 4x, but the server has no queue
	require.Equal(t, 32, a.current())
	t0 = t0.Add(3 * time.Second) // the scrape is stale: TTFT decides again
	window(a, &t0, 200*time.Millisecond, 32)
	require.Equal(t, 16, a.current())
}

func TestAdaptiveConfigValidate(t *testing.T) {
	good := AdaptiveConfig{Enabled: true}.withDefaults(16)
	require.NoError(t, good.validate(16))
	require.Equal(t, 16, good.Max)
	require.Error(t, AdaptiveConfig{Enabled: true, Min: 8, Max: 4}.withDefaults(16).validate(16))
	require.Error(t, AdaptiveConfig{Enabled: true, Max: 32}.withDefaults(16).validate(16))
	require.Error(t, AdaptiveConfig{Enabled: true, Tolerance: 0.9}.withDefaults(16).validate(16))
	require.NoError(t, AdaptiveConfig{Max: 99}.validate(16), "off: not checked")
}

func TestGateSetMaxWakesWaitersAndKeepsABatchSlot(t *testing.T) {
	g := newGate(1, 1, clock.Real())
	require.True(t, g.tryAcquire(pipeline.ClassInteractive))
	ch := g.waitCh()
	g.setMax(3)
	select {
	case <-ch:
	default:
		t.Fatal("raising the limit did not wake waiters")
	}
	require.True(t, g.tryAcquire(pipeline.ClassBatch))
	require.False(t, g.tryAcquire(pipeline.ClassBatch), "one slot stays reserved")
	require.True(t, g.tryAcquire(pipeline.ClassInteractive))
	g.setMax(1)
	require.Equal(t, 1, g.capacity())
	require.False(t, g.tryAcquire(pipeline.ClassInteractive))
}

func TestParseWaiting(t *testing.T) {
	page := `# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 3
vllm:num_requests_waiting{engine="1",model_name="m"} 4.0
vllm:num_requests_waiting_other 100
vllm:num_requests_running{model_name="m"} 64
`
	w, err := parseWaiting(strings.NewReader(page))
	require.NoError(t, err)
	require.Equal(t, 7.0, w)
	_, err = parseWaiting(strings.NewReader("vllm:num_requests_running 1\n"))
	require.Error(t, err)
}

func TestScrapedQueuePullsTheLimitDown(t *testing.T) {
	t.Parallel()
	var scrapes atomic.Int64
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if scrapes.Add(1) == 3 {
			defer close(done)
		}
		_, _ = w.Write([]byte("vllm:num_requests_waiting{model_name=\"m\"} 50\n"))
	}))
	defer srv.Close()
	prim := newFake(t, answer(okAnswer))
	r, err := New(Config{Primary: PoolConfig{BaseURL: prim.url(), Model: "m", MaxConcurrency: 100,
		Adaptive: AdaptiveConfig{Enabled: true, Initial: 100, MetricsURL: srv.URL, ScrapeEvery: time.Millisecond}}}, prometheus.NewRegistry())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	<-done
	cancel()
	require.NoError(t, <-ran)
	// At least two scrapes have cut it before the third answered.
	require.LessOrEqual(t, r.primary.gate.capacity(), 81)
	require.EqualValues(t, 50, r.primary.waiting.Load())
}

func TestScrapeErrorsAreCountedAndLeaveTheLimit(t *testing.T) {
	t.Parallel()
	var scrapes atomic.Int64
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if scrapes.Add(1) == 2 {
			defer close(done)
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	prim := newFake(t, answer(okAnswer))
	reg := prometheus.NewRegistry()
	r, err := New(Config{Primary: PoolConfig{BaseURL: prim.url(), Model: "m", MaxConcurrency: 10,
		Adaptive: AdaptiveConfig{Enabled: true, Initial: 10, MetricsURL: srv.URL, ScrapeEvery: time.Millisecond}}}, reg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	<-done
	cancel()
	require.NoError(t, <-ran)
	require.Equal(t, 10, r.primary.gate.capacity())
	require.GreaterOrEqual(t, metricValue(t, reg, "chatguard_llm_scrape_errors_total"), 1.0)
	require.Equal(t, 10.0, metricValue(t, reg, "chatguard_llm_concurrency_limit"))
}
