package llmsim

// The serving model: how a vLLM replica's latency follows its load, and how
// a managed API refuses traffic over its per-minute limits.
//
//   - TTFT = time in the waiting queue (the scheduler) + Config.TTFT + a
//     prefill time of Config.PrefillPerToken per uncached prompt token.
//   - The inter-token latency grows with the running batch: at a full batch
//     (MaxRunning sequences) a token takes ITL·(1+BatchSlowdown). Each
//     sequence gets slower but the replica's total token rate still grows
//     with the batch, so it serves most at MaxRunning: that is the
//     simulator's maximum a client can be measured against (MaxGoodput).
//   - Running sequences hold their prompt and answer tokens in the KV cache;
//     vllm:kv_cache_usage_perc is that over KVCacheTokens.
//   - With RPM or TPM set, requests over the limit get 429 with Retry-After
//     before they reach the scheduler, as OpenAI-style APIs answer.

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// OutcomeRateLimited counts requests refused over the RPM or TPM limit.
const OutcomeRateLimited = "rate_limited"

// defaultKVTokensPerSeq sizes the KV cache when Config.KVCacheTokens is 0.
const defaultKVTokensPerSeq = 2048

// serving is a Server's load-dependent state.
type serving struct {
	mu       sync.Mutex
	kvHeld   int64
	requests bucket // RPM
	tokens   bucket // TPM
	tpot     prometheus.Histogram
}

// init registers the serving model's metrics on s's registry.
func (v *serving) init(s *Server, model string) {
	labels := prometheus.Labels{"model_name": model}
	v.tpot = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "vllm:time_per_output_token_seconds", Help: "Histogram of time per output token in seconds.", ConstLabels: labels,
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1},
	})
	s.metrics.reg.MustRegister(v.tpot,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "vllm:kv_cache_usage_perc", Help: "KV-cache usage. 1 means 100 percent usage.", ConstLabels: labels,
		}, func() float64 { return s.KVCacheUsage() }),
	)
}

// uncachedPromptTokens is how many prompt tokens the request must prefill:
// the prompt less what the prefix cache (prefixcache.go) holds of it, as
// generate looked it up.
func (s *Server) uncachedPromptTokens(c *call) int {
	return max(c.promptTokens-c.cachedTokens, 0)
}

// prefillTime is the prefill's share of TTFT for c.
func (s *Server) prefillTime(c *call) time.Duration {
	return time.Duration(s.uncachedPromptTokens(c)) * c.cfg.PrefillPerToken
}

// tokenLatency is the inter-token latency now, for the batch running now.
func (s *Server) tokenLatency(c *call) time.Duration {
	if c.cfg.BatchSlowdown <= 0 || c.cfg.MaxRunning <= 0 {
		return c.itl
	}
	load := float64(s.sched.nRunning.Load()) / float64(c.cfg.MaxRunning)
	return time.Duration(float64(c.itl) * (1 + c.cfg.BatchSlowdown*min(load, 1)))
}

// observeTPOT records n output tokens that took d.
func (s *Server) observeTPOT(d time.Duration, n int) {
	if n > 0 {
		s.serving.tpot.Observe(d.Seconds() / float64(n))
	}
}

// holdKV takes n tokens of KV cache for a running sequence and returns the
// function that frees them.
func (s *Server) holdKV(n int) func() {
	v := &s.serving
	v.mu.Lock()
	v.kvHeld += int64(n)
	v.mu.Unlock()
	return func() {
		v.mu.Lock()
		v.kvHeld -= int64(n)
		v.mu.Unlock()
	}
}

// KVCacheUsage is the share of the KV cache the running sequences hold, in
// [0, 1] (vllm:kv_cache_usage_perc).
func (s *Server) KVCacheUsage() float64 {
	cfg := s.cfg.Load()
	capTokens := cfg.KVCacheTokens
	if capTokens <= 0 {
		capTokens = cfg.MaxRunning * defaultKVTokensPerSeq
	}
	s.serving.mu.Lock()
	held := s.serving.kvHeld
	s.serving.mu.Unlock()
	return min(float64(held)/float64(capTokens), 1)
}

// MaxGoodput is the most streamed requests per second the configured
// replica can finish for answers of outTokens tokens and prompts of
// promptTokens uncached tokens: MaxRunning sequences, each taking TTFT,
// prefill and, after the first chunk (which comes with TTFT), the rest of
// its tokens at the full-batch inter-token latency. A client's goodput is
// judged against it.
func (c Config) MaxGoodput(promptTokens, outTokens int) float64 {
	itl := float64(c.ITL) * (1 + max(c.BatchSlowdown, 0))
	per := float64(c.TTFT) + float64(promptTokens)*float64(c.PrefillPerToken) + float64(max(outTokens-c.TokensPerChunk, 0))*itl
	if per <= 0 {
		return math.Inf(1)
	}
	return float64(c.MaxRunning) / (per / float64(time.Second))
}

// bucket is a per-minute limit as a token bucket: limit per minute refilled
// continuously, holding at most what window earns, so a burst after a quiet
// spell is bounded as a managed API bounds it.
type bucket struct {
	level float64
	last  time.Time
	init  bool
}

// take removes n units if the bucket holds them and otherwise says how long
// until it will. capacity is limit·window/minute.
func (b *bucket) take(now time.Time, limit int, window time.Duration, n int) (ok bool, wait time.Duration, remaining int) {
	capacity := float64(limit) * window.Seconds() / 60
	rate := float64(limit) / 60 // per second
	if !b.init {
		b.level, b.last, b.init = capacity, now, true
	}
	b.level = min(capacity, b.level+now.Sub(b.last).Seconds()*rate)
	b.last = now
	need := float64(n)
	if need > capacity {
		// Never fits: a managed API answers 429 too; wait a whole window.
		return false, window, int(b.level)
	}
	if b.level >= need {
		b.level -= need
		return true, 0, int(b.level)
	}
	return false, time.Duration((need - b.level) / rate * float64(time.Second)), int(b.level)
}

// refuseOverRate answers 429 with Retry-After when c would pass the RPM or
// TPM limit, and reports whether it did. A request counts max_tokens (or
// its prompt size when it sets none) against TPM up front, as managed APIs
// do. Within the limits it sets OpenAI's x-ratelimit-* headers.
func (s *Server) refuseOverRate(w http.ResponseWriter, c *call) bool {
	cfg := c.cfg
	if cfg.RPM <= 0 && cfg.TPM <= 0 {
		return false
	}
	window := cfg.RateWindow
	if window <= 0 {
		window = time.Minute
	}
	cost := c.promptTokens + c.req.maxTokens()
	now := time.Now()
	v := &s.serving
	v.mu.Lock()
	var wait time.Duration
	okR, okT := true, true
	var remR, remT int
	// Check both before taking either, so a refused request costs nothing.
	if cfg.RPM > 0 {
		probe := v.requests
		okR, wait, remR = probe.take(now, cfg.RPM, window, 1)
	}
	if cfg.TPM > 0 {
		probe := v.tokens
		var w2 time.Duration
		okT, w2, remT = probe.take(now, cfg.TPM, window, cost)
		wait = max(wait, w2)
	}
	if okR && okT {
		if cfg.RPM > 0 {
			_, _, remR = v.requests.take(now, cfg.RPM, window, 1)
		}
		if cfg.TPM > 0 {
			_, _, remT = v.tokens.take(now, cfg.TPM, window, cost)
		}
	}
	v.mu.Unlock()
	h := w.Header()
	if cfg.RPM > 0 {
		h.Set("x-ratelimit-limit-requests", strconv.Itoa(cfg.RPM))
		h.Set("x-ratelimit-remaining-requests", strconv.Itoa(remR))
	}
	if cfg.TPM > 0 {
		h.Set("x-ratelimit-limit-tokens", strconv.Itoa(cfg.TPM))
		h.Set("x-ratelimit-remaining-tokens", strconv.Itoa(remT))
	}
	if okR && okT {
		return false
	}
	s.count(EndpointChat, c.model, c.stage, OutcomeRateLimited)
	setRetryAfter(h, max(wait, time.Millisecond))
	what := "requests"
	if !okT {
		what = "tokens"
	}
	writeError(w, http.StatusTooManyRequests, what, "rate_limit_exceeded", "", "Rate limit reached for "+what+" per min (simulated). Please try again later.")
	return true
}
