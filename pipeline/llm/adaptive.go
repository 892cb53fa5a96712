package llm

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// AdaptiveConfig makes a pool's concurrency limit follow the pool's latency
// instead of staying at MaxConcurrency. A vLLM replica does not refuse work
// it cannot run: it queues it, and the queue shows as time to first token.
// The limit grows by one per window while the calls are using it and the
// window's mean TTFT stays within Tolerance of the pool's unloaded TTFT,
// and shrinks in proportion when it does not (a gradient limiter). When
// MetricsURL is set, the pool's own vllm:num_requests_waiting pulls the
// limit down before the queue shows in TTFT, and while fresh scrapes show
// no queue a TTFT rise alone does not shrink the limit.
type AdaptiveConfig struct {
	// Enabled switches the adaptive limit on; off, the limit is
	// MaxConcurrency.
	Enabled bool
	// Min and Max bound the limit; Max 0 means MaxConcurrency, Min 0 one.
	Min, Max int
	// Initial is the limit at start; 0 means Min.
	Initial int
	// Tolerance is how far the window's mean TTFT may rise over the
	// unloaded TTFT before the limit shrinks (1.5 = 50 % above); 0 means
	// DefaultTolerance.
	Tolerance float64
	// Window is the shortest span of samples one decision reads; 0 means
	// DefaultAdaptiveWindow.
	Window time.Duration
	// MetricsURL is the pool's Prometheus endpoint (vLLM: http://host/metrics);
	// empty scrapes nothing.
	MetricsURL string
	// ScrapeEvery is the scrape interval; 0 means DefaultScrapeEvery.
	ScrapeEvery time.Duration
	// MaxWaiting is the pool's waiting queue (summed over its replicas)
	// above which each scrape cuts the limit by a tenth; 0 means
	// DefaultMaxWaiting.
	MaxWaiting int
}

// The adaptive defaults.
const (
	DefaultTolerance      = 1.5
	DefaultAdaptiveWindow = 100 * time.Millisecond
	DefaultScrapeEvery    = 250 * time.Millisecond
	DefaultMaxWaiting     = 2
)

// baselineDrift is how much the unloaded-TTFT estimate rises per window
// when no window is as fast: it follows a slower prompt mix within about
// a minute, yet a queue that builds in seconds still reads as a queue.
const baselineDrift = 0.002

// minWindowSamples is how many samples a decision needs at least.
const minWindowSamples = 3

func (a AdaptiveConfig) withDefaults(maxConcurrency int) AdaptiveConfig {
	if a.Max == 0 {
		a.Max = maxConcurrency
	}
	if a.Min == 0 {
		a.Min = 1
	}
	if a.Initial == 0 {
		a.Initial = a.Min
	}
	if a.Tolerance == 0 {
		a.Tolerance = DefaultTolerance
	}
	if a.Window == 0 {
		a.Window = DefaultAdaptiveWindow
	}
	if a.ScrapeEvery == 0 {
		a.ScrapeEvery = DefaultScrapeEvery
	}
	if a.MaxWaiting == 0 {
		a.MaxWaiting = DefaultMaxWaiting
	}
	return a
}

func (a AdaptiveConfig) validate(maxConcurrency int) error {
	if !a.Enabled {
		return nil
	}
	var errs []error
	if a.Min < 1 || a.Max < a.Min || a.Max > maxConcurrency {
		errs = append(errs, fmt.Errorf("adaptive min %d / max %d: want 1 <= min <= max <= max concurrency %d", a.Min, a.Max, maxConcurrency))
	}
	if a.Initial < a.Min || a.Initial > a.Max {
		errs = append(errs, fmt.Errorf("adaptive initial %d is outside min..max", a.Initial))
	}
	if a.Tolerance <= 1 {
		errs = append(errs, fmt.Errorf("adaptive tolerance %v is not above 1", a.Tolerance))
	}
	if a.Window <= 0 || a.ScrapeEvery <= 0 || a.MaxWaiting < 0 {
		errs = append(errs, errors.New("adaptive window and scrape interval must be positive, max waiting not negative"))
	}
	return errors.Join(errs...)
}

// adaptiveLimit is a gradient concurrency limiter on time to first token.
// It is safe for concurrent use; set is called with the new limit (under
// the limiter's lock) whenever its integer value changes.
type adaptiveLimit struct {
	mu    sync.Mutex
	cfg   AdaptiveConfig
	set   func(int)
	limit float64
	base  float64 // unloaded TTFT estimate in seconds; 0 until the first window

	// The current window.
	start time.Time
	sum   float64
	n     int
	peak  int // most calls in flight seen in the window

	waiting   float64   // the pool's waiting queue at the last scrape, -1 unknown
	scrapedAt time.Time // when waiting was read
}

func newAdaptiveLimit(cfg AdaptiveConfig, set func(int)) *adaptiveLimit {
	a := &adaptiveLimit{cfg: cfg, set: set, limit: float64(cfg.Initial), waiting: -1}
	set(cfg.Initial)
	return a
}

// current is the limit now.
func (a *adaptiveLimit) current() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return int(a.limit)
}

// observe records one call's TTFT and how many calls were in flight when it
// started, and decides once a window is complete.
func (a *adaptiveLimit) observe(now time.Time, ttft time.Duration, inFlight int) {
	if ttft <= 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.start.IsZero() {
		a.start = now
	}
	a.sum += ttft.Seconds()
	a.n++
	a.peak = max(a.peak, inFlight)
	if now.Sub(a.start) < a.cfg.Window || a.n < minWindowSamples {
		return
	}
	short := a.sum / float64(a.n)
	saturated := a.peak >= int(a.limit)-1
	a.start, a.sum, a.n, a.peak = now, 0, 0, 0
	switch {
	case a.base == 0 || short < a.base:
		a.base = short
	default:
		a.base = min(a.base*(1+baselineDrift), short)
	}
	prev := int(a.limit)
	// A fresh scrape that shows no queue is the server's own word: a TTFT
	// rise is then not a queue at this pool (the client's CPU, the network,
	// longer prompts) and shrinking would only waste the pool.
	noQueue := a.waiting >= 0 && a.waiting <= float64(a.cfg.MaxWaiting) && now.Sub(a.scrapedAt) <= 2*a.cfg.ScrapeEvery
	if ratio := short / a.base; ratio > a.cfg.Tolerance && !noQueue {
		// Calls queue at the server: shrink in proportion, at most by half.
		a.limit *= math.Max(0.5, a.cfg.Tolerance/ratio)
	} else if saturated && a.waiting <= float64(a.cfg.MaxWaiting) {
		// The limit is what holds the calls back and the server keeps up:
		// probe one more.
		a.limit++
	}
	a.clampAndPublish(prev)
}

// observeWaiting takes a scraped waiting-queue length: above MaxWaiting the
// limit shrinks by a tenth at once, ahead of the TTFT it will cost.
func (a *adaptiveLimit) observeWaiting(now time.Time, waiting float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.waiting, a.scrapedAt = waiting, now
	if waiting <= float64(a.cfg.MaxWaiting) {
		return
	}
	prev := int(a.limit)
	a.limit *= 0.9
	a.clampAndPublish(prev)
}

// clampAndPublish bounds the limit and tells the gate when its integer value
// changed. Callers hold mu.
func (a *adaptiveLimit) clampAndPublish(prev int) {
	a.limit = math.Min(math.Max(a.limit, float64(a.cfg.Min)), float64(a.cfg.Max))
	if n := int(a.limit); n != prev {
		a.set(n)
	}
}

// setMax changes the gate's limit; a raised limit wakes waiters at once,
// and a lowered one lets calls in flight finish (no new ones start until
// they fall under it).
func (g *gate) setMax(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	raised := n > g.max
	g.max = n
	if raised {
		close(g.wake)
		g.wake = make(chan struct{})
	}
}

// capacity is the gate's limit now.
func (g *gate) capacity() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.max
}
