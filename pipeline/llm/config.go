// Package llm is chatguard's LLM router: one call per stage attempt, over
// two model pools (self-hosted vLLM "primary", managed API "fallback"), with
// a concurrency gate per pool shared by every caller in the process, a
// per-attempt timeout, a shared cooldown on 429/503 that honours
// Retry-After, a circuit breaker with half-open probes, bounded attempts with
// full-jitter backoff, and one repair try for an invalid answer. Answers are
// streamed so time to first token is measured.
//
// Retries happen here and only here: go-openai has none of its own, and the
// job loop only redelivers a whole review after the router gave up.
package llm

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// PoolConfig configures one model pool.
type PoolConfig struct {
	// Name is the pool's role; New sets it from the field it sits in.
	Name pipeline.Pool
	// BaseURL is the OpenAI-compatible base URL, ending in /v1.
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none (a local vLLM).
	APIKey string
	// Model is the model id requested.
	Model string
	// Pseudonymize sends a request's messages through its Pseudonyms (when
	// it has them) before they leave for this pool: on for a third-party
	// API, so contact details never reach it.
	Pseudonymize bool
	// MaxConcurrency bounds the calls in flight to this pool from this
	// process (every job shares it).
	MaxConcurrency int
	// ReservedInteractive slots of MaxConcurrency only pipeline.ClassInteractive
	// requests may take, so batch work cannot starve a moderator.
	ReservedInteractive int
	// GateWait bounds how long a batch caller waits for a free slot on the
	// primary before it goes to the fallback (the fallback is waited for
	// until the caller's deadline).
	GateWait time.Duration
	// AttemptTimeout bounds one attempt, stream included; zero takes the
	// router's Config.AttemptTimeout, which both pools share.
	AttemptTimeout time.Duration
	// BreakerFailures consecutive failures open the breaker.
	BreakerFailures int
	// BreakerOpenFor is how long an open breaker refuses calls before it
	// lets half-open probes through.
	BreakerOpenFor time.Duration
	// HalfOpenProbes is how many probes may be in flight while half-open.
	HalfOpenProbes int
	// DefaultCooldown applies after a 429/503 without a usable Retry-After.
	DefaultCooldown time.Duration
	// MaxCooldown caps a server's Retry-After.
	MaxCooldown time.Duration
	// Transport replaces the tuned HTTP transport (tests, benchmarks).
	Transport http.RoundTripper
	// Adaptive makes the concurrency limit follow the pool's latency
	// (adaptive.go); off, it is MaxConcurrency.
	Adaptive AdaptiveConfig
	// Price is what this pool's calls cost (price.go); zero is free.
	Price Price
	// ServerPriority sends each call's traffic class as the request's
	// priority (vLLM's `priority` field, lower served first: the class's
	// Rank). Off by default: vLLM refuses a non-zero priority unless it
	// runs with --scheduling-policy priority.
	ServerPriority bool
}

// Enabled reports whether the pool is configured at all; a fallback with no
// base URL is switched off.
func (p PoolConfig) Enabled() bool { return p.BaseURL != "" }

// The pool defaults applied to zero fields by WithDefaults.
const (
	DefaultMaxConcurrency  = 64
	DefaultGateWait        = 250 * time.Millisecond
	DefaultAttemptTimeout  = 60 * time.Second
	DefaultBreakerFailures = 5
	DefaultBreakerOpenFor  = 30 * time.Second
	DefaultHalfOpenProbes  = 1
	DefaultCooldown        = 5 * time.Second
	DefaultMaxCooldown     = 5 * time.Minute
)

// WithDefaults returns p with zero fields set to the defaults.
func (p PoolConfig) WithDefaults() PoolConfig {
	if p.MaxConcurrency == 0 {
		p.MaxConcurrency = DefaultMaxConcurrency
	}
	if p.GateWait == 0 {
		p.GateWait = DefaultGateWait
	}
	if p.AttemptTimeout == 0 {
		p.AttemptTimeout = DefaultAttemptTimeout
	}
	if p.BreakerFailures == 0 {
		p.BreakerFailures = DefaultBreakerFailures
	}
	if p.BreakerOpenFor == 0 {
		p.BreakerOpenFor = DefaultBreakerOpenFor
	}
	if p.HalfOpenProbes == 0 {
		p.HalfOpenProbes = DefaultHalfOpenProbes
	}
	if p.DefaultCooldown == 0 {
		p.DefaultCooldown = DefaultCooldown
	}
	if p.MaxCooldown == 0 {
		p.MaxCooldown = DefaultMaxCooldown
	}
	if p.Adaptive.Enabled {
		p.Adaptive = p.Adaptive.withDefaults(p.MaxConcurrency)
	}
	return p
}

func (p PoolConfig) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("llm: %s pool: "+format, append([]any{p.Name}, args...)...))
	}
	if u, err := url.Parse(p.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("base URL %q is not an http(s) URL", p.BaseURL)
	}
	if p.Model == "" {
		bad("model is missing")
	}
	if p.MaxConcurrency < 1 {
		bad("max concurrency %d is below 1", p.MaxConcurrency)
	}
	if p.ReservedInteractive < 0 || p.ReservedInteractive >= p.MaxConcurrency {
		bad("reserved interactive %d is outside 0..max concurrency-1", p.ReservedInteractive)
	}
	if p.GateWait < 0 {
		bad("gate wait %s is negative", p.GateWait)
	}
	if p.AttemptTimeout <= 0 {
		bad("attempt timeout %s is not positive", p.AttemptTimeout)
	}
	if p.BreakerFailures < 1 {
		bad("breaker failures %d is below 1", p.BreakerFailures)
	}
	if p.BreakerOpenFor <= 0 {
		bad("breaker open-for %s is not positive", p.BreakerOpenFor)
	}
	if p.HalfOpenProbes < 1 {
		bad("half-open probes %d is below 1", p.HalfOpenProbes)
	}
	if p.DefaultCooldown <= 0 || p.MaxCooldown < p.DefaultCooldown {
		bad("cooldown default %s / max %s: want 0 < default <= max", p.DefaultCooldown, p.MaxCooldown)
	}
	if err := p.Adaptive.validate(p.MaxConcurrency); err != nil {
		bad("%v", err)
	}
	if err := p.Price.Validate(); err != nil {
		bad("%w", err)
	}
	return errors.Join(errs...)
}

// Config configures the router. Fallback is optional: leave its BaseURL
// empty to run on the primary alone.
type Config struct {
	Primary  PoolConfig
	Fallback PoolConfig
	// AttemptTimeout bounds one attempt on a pool that sets no timeout of
	// its own: one setting for both pools, declared once.
	AttemptTimeout time.Duration
	// MaxAttempts bounds the calls for one stage across both pools, repair
	// tries included.
	MaxAttempts int
	// BaseBackoff and MaxBackoff shape the full-jitter backoff
	// (internal/retry) before a retry on the pool that just failed.
	BaseBackoff, MaxBackoff time.Duration
	// Fleet shares the pools' limits across replicas (fleet.go); its zero
	// value shares nothing.
	Fleet FleetConfig
	// DailyBudget is the USD the fleet means to spend on model calls in a
	// day, exported as chatguard_llm_daily_budget_dollars so that the
	// budget alerts can compare the spend's burn rate with it; the router
	// never refuses a call over it. Zero sets no budget (no alert).
	DailyBudget float64
}

// The router defaults applied to zero fields by WithDefaults.
const (
	DefaultMaxAttempts = 4
	DefaultBaseBackoff = 200 * time.Millisecond
	DefaultMaxBackoff  = 5 * time.Second
)

// WithDefaults returns c with zero fields (and the pools' zero fields) set
// to the defaults.
func (c Config) WithDefaults() Config {
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	for _, p := range []*PoolConfig{&c.Primary, &c.Fallback} {
		if p.AttemptTimeout == 0 {
			p.AttemptTimeout = c.AttemptTimeout
		}
	}
	c.Primary = c.Primary.WithDefaults()
	c.Primary.Name = pipeline.PoolPrimary
	if c.Fallback.Enabled() {
		c.Fallback = c.Fallback.WithDefaults()
	}
	c.Fallback.Name = pipeline.PoolFallback
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.BaseBackoff == 0 {
		c.BaseBackoff = DefaultBaseBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.Fleet.enabled() {
		c.Fleet = c.Fleet.withDefaults()
	}
	return c
}

// Validate reports every problem at once. Call it on WithDefaults' result.
func (c Config) Validate() error {
	errs := []error{c.Primary.validate()}
	if c.Fallback.Enabled() {
		errs = append(errs, c.Fallback.validate())
	}
	if c.Fleet.enabled() {
		errs = append(errs, c.Fleet.validate())
	}
	if c.AttemptTimeout <= 0 {
		errs = append(errs, fmt.Errorf("llm: attempt timeout %s is not positive", c.AttemptTimeout))
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 20 {
		errs = append(errs, fmt.Errorf("llm: max attempts %d is outside 1..20", c.MaxAttempts))
	}
	if c.BaseBackoff <= 0 || c.MaxBackoff < c.BaseBackoff {
		errs = append(errs, fmt.Errorf("llm: backoff base %s / max %s: want 0 < base <= max", c.BaseBackoff, c.MaxBackoff))
	}
	if math.IsNaN(c.DailyBudget) || math.IsInf(c.DailyBudget, 0) || c.DailyBudget < 0 {
		errs = append(errs, fmt.Errorf("llm: daily budget %v is not a finite amount of at least 0", c.DailyBudget))
	}
	return errors.Join(errs...)
}
