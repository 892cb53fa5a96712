package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/depflags"
	"github.com/chatguard/chatguard/cmd/internal/reviewers"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/pipeline/shadow"
	"github.com/chatguard/chatguard/storage/redislimits"
)

// ShadowConfig is the shadow traffic's: a sampled share of live reviews
// mirrored to a candidate endpoint after their verdicts commit, the
// candidate's answers written to the lake (pipeline/shadow). Off unless
// --shadow-rate and --shadow-base-url are set.
type ShadowConfig struct {
	// Rate is the share of live reviews mirrored (0..1, by review key).
	Rate float64
	// BaseURL, Model and APIKey are the candidate endpoint's; the key is
	// read from CHATGUARD_SHADOW_API_KEY like the fallback's.
	BaseURL, Model, APIKey string
	// Price is what a candidate call costs (as --fallback-price reads).
	Price llm.Price
	// Pseudonymize sends the candidate pseudonymised chats, as the
	// third-party fallback is; on by default.
	Pseudonymize bool
	// Concurrency bounds the shadow reviews in flight on this pod.
	Concurrency int
	// Timeout bounds one shadow review.
	Timeout time.Duration
	// BudgetTPM and BudgetUSDPerDay bound the candidate's tokens a minute
	// and cost a day across the fleet (Redis, --redis-addr); 0: unbounded.
	BudgetTPM       int
	BudgetUSDPerDay float64
}

// defaultShadow is off, pseudonymised, with a few slots.
func defaultShadow() ShadowConfig {
	return ShadowConfig{Pseudonymize: true, Concurrency: 4, Timeout: 2 * time.Minute}
}

// on reports whether shadow traffic is configured.
func (s ShadowConfig) on() bool { return s.Rate > 0 && s.BaseURL != "" }

func (c *Config) shadowFlags(fs *cli.FlagSet) {
	s := &c.Shadow
	fs.Float64Var(&s.Rate, "shadow-rate", "share of live reviews (0..1, sampled by review key so pods and reruns agree) also sent to the shadow candidate after their verdicts commit; 0: no shadow traffic")
	fs.StringVar(&s.BaseURL, "shadow-base-url", "shadow candidate's OpenAI-compatible base URL, ending in /v1; empty: no shadow traffic")
	fs.StringVar(&s.Model, "shadow-model", "shadow candidate's model id (also its name in shadow_verdict events)")
	fs.StringVar(&s.APIKey, "shadow-api-key", "shadow candidate's API key (prefer the environment variable, from a Secret)")
	depflags.PriceVar(fs, &s.Price, "shadow-price", "what a shadow candidate call costs, as --fallback-price reads; empty: free")
	fs.BoolVar(&s.Pseudonymize, "shadow-pseudonymize", "replace contact details with placeholders in requests to the shadow candidate (keep on for a third party)")
	fs.IntVar(&s.Concurrency, "shadow-concurrency", "shadow reviews in flight on this pod at most; an offer beyond is dropped and counted")
	fs.DurationVar(&s.Timeout, "shadow-timeout", "deadline of one shadow review")
	fs.IntVar(&s.BudgetTPM, "shadow-budget-tpm", "shadow candidate tokens per minute across every replica (Redis); over it shadow offers are dropped and counted; 0: unbounded")
	fs.Float64Var(&s.BudgetUSDPerDay, "shadow-budget-usd-per-day", "shadow candidate USD per day across every replica (Redis, by --shadow-price); over it shadow offers are dropped and counted; 0: unbounded")
}

// validateShadow names every problem of the --shadow-* flags.
func (c Config) validateShadow() error {
	s := c.Shadow
	var errs []error
	if s.Rate < 0 || s.Rate > 1 {
		errs = append(errs, fmt.Errorf("--shadow-rate %v must be in 0..1", s.Rate))
	}
	if !s.on() {
		return errors.Join(errs...)
	}
	if u, err := url.Parse(s.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("--shadow-base-url %q must be an http(s) URL", s.BaseURL))
	}
	if s.Model == "" {
		errs = append(errs, errors.New("--shadow-model is required with --shadow-base-url"))
	}
	if s.Concurrency < 1 {
		errs = append(errs, errors.New("--shadow-concurrency must be at least 1"))
	}
	if s.Timeout <= 0 {
		errs = append(errs, errors.New("--shadow-timeout must be positive"))
	}
	if s.BudgetTPM < 0 || s.BudgetUSDPerDay < 0 {
		errs = append(errs, errors.New("--shadow-budget-tpm and --shadow-budget-usd-per-day must not be negative"))
	}
	if (s.BudgetTPM > 0 || s.BudgetUSDPerDay > 0) && c.RedisAddr == "" {
		errs = append(errs, errors.New("--shadow-budget-* need --redis-addr"))
	}
	if err := s.Price.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--shadow-price: %w", err))
	}
	return errors.Join(errs...)
}

// shadowPools is the candidate's router configuration: the live pools'
// shared settings (attempt timeout, attempts), the candidate as the only
// pool, no fallback and no fleet leases (the shadow budget is its own).
func (c Config) shadowPools() depflags.Pools {
	s := c.Shadow
	p := depflags.DefaultPools(s.Concurrency, s.Concurrency)
	p.LLM.AttemptTimeout, p.LLM.MaxAttempts = c.LLM.AttemptTimeout, c.LLM.MaxAttempts
	p.LLM.Primary = llm.PoolConfig{BaseURL: s.BaseURL, Model: s.Model, APIKey: s.APIKey, Price: s.Price,
		Pseudonymize: s.Pseudonymize, MaxConcurrency: s.Concurrency}
	p.LLM.Fallback = llm.PoolConfig{}
	return p
}

// shadowTraffic is the candidate's stage engine and the runner that feeds
// it; both end with close.
type shadowTraffic struct {
	engine *reviewers.Engine
	runner *shadow.Runner
	close  func() error
}

// newShadow builds the candidate's stage engine with the same factory and
// privacy options as the live one, in the shadow class, and the runner
// that publishes its answers to events. The candidate's own metrics carry
// a shadow_ prefix; its inference logs are not published (its tokens and
// cost are in each shadow_verdict event). The candidate reads account
// history through live's lookup: it weighs what the live review weighed,
// from the cache the live review just filled, at no second query (history
// is the store, for a live engine without a lookup).
func newShadow(cfg Config, events pipeline.EventSink, reg prometheus.Registerer, live *reviewers.Engine, history func() pipeline.AccountHistory) (*shadowTraffic, error) {
	s := cfg.Shadow
	p := reviewers.Params{Component: "worker shadow", Class: pipeline.ClassShadow, Pools: cfg.shadowPools(),
		Options: cfg.Options, Redis: cfg.RedisOptions, Registerer: prometheus.WrapRegistererWithPrefix("shadow_", reg), History: history}
	if live != nil {
		p.SharedHistory = live.HistoryLookup()
	}
	engine, err := reviewers.New(p)
	if err != nil {
		return nil, fmt.Errorf("shadow: %w", err)
	}
	closers := []func() error{engine.Close}
	closeAll := func() error {
		var errs []error
		for _, c := range closers {
			errs = append(errs, c())
		}
		return errors.Join(errs...)
	}
	budget := shadow.Budget{Name: "shadow:" + s.Model, TokensPerMinute: s.BudgetTPM, USDPerDay: s.BudgetUSDPerDay, CallTimeout: 2 * time.Second}
	if s.BudgetTPM > 0 || s.BudgetUSDPerDay > 0 {
		rdb, err := cfg.RedisOptions.Client(cli.FleetProfile)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("shadow budget: %w", err), closeAll())
		}
		closers = append(closers, rdb.Close)
		budget.Store = redislimits.New(rdb, strings.TrimSuffix(cfg.LLM.Fleet.Name, ":")+":")
	}
	// The live path's primary is what the candidate is compared with: when
	// one is pseudonymised and the other not, they saw different text.
	runner, err := shadow.New(shadow.Config{Rate: s.Rate, Concurrency: s.Concurrency, Timeout: s.Timeout, Candidate: s.Model, Model: s.Model,
		TextDiffers: s.Pseudonymize != cfg.LLM.Primary.Pseudonymize, Budget: budget, Registerer: reg}, engine, events, nil)
	if err != nil {
		return nil, errors.Join(err, closeAll())
	}
	return &shadowTraffic{engine: engine, runner: runner, close: closeAll}, nil
}

// stop cancels the shadow reviews in flight (counted canceled, their
// events say so) and waits for them within ctx, then closes the engine.
func (s *shadowTraffic) stop(ctx context.Context) error {
	return errors.Join(s.runner.Close(ctx), s.close())
}
