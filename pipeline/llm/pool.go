package llm

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// waits reports whether a request of class c waits for capacity: every
// class but interactive (a moderator waiting on a screen), which may take
// reserved slots and is refused at once instead of queueing.
func waits(c pipeline.Class) bool { return c != pipeline.ClassInteractive }

// gate is a counting semaphore with a reserve for interactive work. Waiters
// are woken by closing a broadcast channel on every release; with tens of
// waiters per pool the herd is cheap and the code stays obviously correct.
type gate struct {
	clk      clock.Clock // times a wait for a slot
	mu       sync.Mutex
	max      int
	reserved int
	inUse    int
	wake     chan struct{}
}

func newGate(max, reserved int, clk clock.Clock) *gate {
	return &gate{clk: clk, max: max, reserved: reserved, wake: make(chan struct{})}
}

func (g *gate) tryAcquire(c pipeline.Class) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	limit := g.max
	if waits(c) {
		// An adaptive limit may fall to the reserve: batch keeps one slot.
		limit -= min(g.reserved, g.max-1)
	}
	if g.inUse < limit {
		g.inUse++
		return true
	}
	return false
}

// waitCh returns a channel closed at the next release.
func (g *gate) waitCh() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.wake
}

func (g *gate) release() {
	g.mu.Lock()
	g.inUse--
	close(g.wake)
	g.wake = make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) used() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inUse
}

// acquire waits up to wait for a slot; it returns false on timeout or when
// ctx ends.
func (g *gate) acquire(ctx context.Context, c pipeline.Class, wait time.Duration) bool {
	if g.tryAcquire(c) {
		return true
	}
	if wait <= 0 {
		return false
	}
	t := g.clk.NewTimer(wait)
	defer t.Stop()
	for {
		ch := g.waitCh()
		if g.tryAcquire(c) {
			return true
		}
		select {
		case <-ch:
		case <-t.Chan():
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// BreakerState is a circuit breaker's state.
type BreakerState int

// The breaker states; the values are what the state gauge reports.
const (
	BreakerClosed   BreakerState = 0
	BreakerHalfOpen BreakerState = 1
	BreakerOpen     BreakerState = 2
)

// String names the state.
func (s BreakerState) String() string {
	switch s {
	case BreakerHalfOpen:
		return "half_open"
	case BreakerOpen:
		return "open"
	default:
		return "closed"
	}
}

// breaker opens after a run of consecutive failures, refuses calls for
// openFor, then lets up to probes calls through; a probe's success closes
// it, a failure opens it again.
type breaker struct {
	mu        sync.Mutex
	threshold int
	openFor   time.Duration
	probes    int

	state     BreakerState
	fails     int
	openUntil time.Time
	inProbe   int
}

// allow reports whether a call may start now and, if so, takes a probe slot
// when half-open (the caller must report the call with done).
func (b *breaker) allow(now time.Time, take bool) (ok, probe bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == BreakerOpen && !now.Before(b.openUntil) {
		b.state = BreakerHalfOpen
		b.inProbe = 0
	}
	switch b.state {
	case BreakerClosed:
		return true, false
	case BreakerHalfOpen:
		if b.inProbe >= b.probes {
			return false, false
		}
		if take {
			b.inProbe++
		}
		return true, true
	default:
		return false, false
	}
}

// until returns when an open breaker lets probes through (zero if not open).
func (b *breaker) until() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == BreakerOpen {
		return b.openUntil
	}
	return time.Time{}
}

// done records the result of a call. neutral results (cancelled by the
// caller, throttled, invalid answers) say nothing about the pool's health
// but still free a probe slot.
func (b *breaker) done(now time.Time, probe bool, failed, neutral bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe && b.inProbe > 0 {
		b.inProbe--
	}
	switch {
	case neutral:
		return
	case !failed:
		b.fails = 0
		if b.state == BreakerHalfOpen && probe {
			b.state = BreakerClosed
		}
	default:
		b.fails++
		if (b.state == BreakerHalfOpen && probe) || (b.state == BreakerClosed && b.fails >= b.threshold) {
			b.state = BreakerOpen
			b.openUntil = now.Add(b.openFor)
		}
	}
}

func (b *breaker) current(now time.Time) BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == BreakerOpen && !now.Before(b.openUntil) {
		return BreakerHalfOpen
	}
	return b.state
}

// cooldown is a shared "do not call before" time; a later signal may extend
// it, never shorten it.
type cooldown struct{ until atomic.Int64 }

func (c *cooldown) extend(t time.Time) {
	n := t.UnixNano()
	for {
		cur := c.until.Load()
		if n <= cur || c.until.CompareAndSwap(cur, n) {
			return
		}
	}
}

func (c *cooldown) end() time.Time { return time.Unix(0, c.until.Load()) }

func (c *cooldown) active(now time.Time) bool { return now.UnixNano() < c.until.Load() }

// pool is one model endpoint with its shared state.
type pool struct {
	cfg      PoolConfig
	clk      clock.Clock // the router's
	client   *openai.Client
	gate     *gate
	breaker  *breaker
	cooldown cooldown
	// adaptive moves gate's limit when AdaptiveConfig is enabled (nil
	// otherwise); waiting is the pool's last scraped waiting queue.
	adaptive *adaptiveLimit
	waiting  atomic.Int64
	// leases bounds the pool's calls fleet-wide (the primary's, when
	// FleetConfig sets a limit); nil otherwise.
	leases *fleet
}

func newPool(cfg PoolConfig, clk clock.Clock) *pool {
	rt := cfg.Transport
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Keep a warm connection per slot: a stage call is short and TLS
		// handshakes to the managed API are not.
		t.MaxIdleConns = 2 * cfg.MaxConcurrency
		t.MaxIdleConnsPerHost = cfg.MaxConcurrency
		t.IdleConnTimeout = 90 * time.Second
		t.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		t.TLSHandshakeTimeout = 5 * time.Second
		rt = t
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	// No client timeout: it would cut long streams. Each attempt has its
	// own context deadline instead.
	oc.HTTPClient = &headerCapture{c: &http.Client{Transport: rt}}
	p := &pool{
		cfg:     cfg,
		clk:     clk,
		client:  openai.NewClientWithConfig(oc),
		gate:    newGate(cfg.MaxConcurrency, cfg.ReservedInteractive, clk),
		breaker: &breaker{threshold: cfg.BreakerFailures, openFor: cfg.BreakerOpenFor, probes: cfg.HalfOpenProbes},
	}
	if cfg.Adaptive.Enabled {
		p.adaptive = newAdaptiveLimit(cfg.Adaptive, p.gate.setMax)
	}
	return p
}

// unavailable says why the pool cannot take a call now ("" when it can) and
// until when.
func (p *pool) unavailable(now time.Time) (string, time.Time) {
	if p.cooldown.active(now) {
		return reasonCooldown, p.cooldown.end()
	}
	if ok, _ := p.breaker.allow(now, false); !ok {
		u := p.breaker.until()
		if u.IsZero() {
			// Half-open with every probe slot taken: look again soon.
			u = now.Add(50 * time.Millisecond)
		}
		return reasonBreakerOpen, u
	}
	return "", time.Time{}
}

// attemptMeta carries what the transport saw of one attempt's HTTP
// response, since go-openai's errors do not expose headers.
type attemptMeta struct {
	retryAfter, retryAfterMS string
}

type metaKey struct{}

// headerCapture is the pool's HTTP client: it records Retry-After of
// throttled answers into the attempt's attemptMeta.
type headerCapture struct{ c *http.Client }

func (h *headerCapture) Do(req *http.Request) (*http.Response, error) {
	if n, ok := req.Context().Value(priorityKey{}).(int); ok {
		if err := withPriority(req, n); err != nil {
			return nil, err
		}
	}
	resp, err := h.c.Do(req)
	if err == nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if m, ok := req.Context().Value(metaKey{}).(*attemptMeta); ok {
			m.retryAfter = resp.Header.Get("Retry-After")
			m.retryAfterMS = resp.Header.Get("retry-after-ms")
		}
	}
	return resp, err
}
