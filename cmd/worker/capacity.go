package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/storage/redislimits"
)

// CapacityConfig is the worker's share of the model pools: the interactive
// reserve, the adaptive primary limit and the limits shared by every
// replica through Redis (--redis-addr).
type CapacityConfig struct {
	Prefetch                   int
	PrimaryReservedInteractive int
	PrimaryAdaptive            bool
	PrimaryAdaptiveMin         int
	PrimaryMetricsURL          string
	FleetPrimaryLimit          int
	FleetPrimaryReserved       int
	FleetFallbackRPM           int
	FleetFallbackTPM           int
	FleetReplicas              int
	FleetKeyPrefix             string
}

func defaultCapacity() CapacityConfig {
	return CapacityConfig{PrimaryAdaptiveMin: 4, FleetReplicas: 1, FleetKeyPrefix: "chatguard:fleet:"}
}

func (c *CapacityConfig) flags(fs *cli.FlagSet) {
	fs.IntVar(&c.Prefetch, "prefetch", "messages received ahead of free slots and held until one frees, so a slot never idles for a receive (0..concurrency)")
	fs.IntVar(&c.PrimaryReservedInteractive, "primary-reserved-interactive", "primary slots of this process only interactive calls may take")
	fs.BoolVar(&c.PrimaryAdaptive, "primary-adaptive", "let the primary's limit in this process follow its TTFT between --primary-adaptive-min and --primary-concurrency")
	fs.IntVar(&c.PrimaryAdaptiveMin, "primary-adaptive-min", "lowest adaptive primary limit")
	fs.StringVar(&c.PrimaryMetricsURL, "primary-metrics-url", "the primary's Prometheus endpoint (vLLM /metrics), scraped for its waiting queue; empty: TTFT only")
	fs.IntVar(&c.FleetPrimaryLimit, "fleet-primary-limit", "primary calls in flight across every replica (Redis leases); 0: no fleet limit")
	fs.IntVar(&c.FleetPrimaryReserved, "fleet-primary-reserved", "of --fleet-primary-limit, leases only interactive calls may take")
	fs.IntVar(&c.FleetFallbackRPM, "fleet-fallback-rpm", "fallback requests per minute across every replica (Redis GCRA); 0: unlimited")
	fs.IntVar(&c.FleetFallbackTPM, "fleet-fallback-tpm", "fallback tokens per minute across every replica (Redis GCRA); 0: unlimited")
	fs.IntVar(&c.FleetReplicas, "fleet-replicas", "replicas the fleet limits are divided by while Redis is unreachable (each pod's static share)")
	fs.StringVar(&c.FleetKeyPrefix, "fleet-key-prefix", "Redis key prefix of the fleet limits; every replica of one deployment uses the same")
}

func (c CapacityConfig) shared() bool {
	return c.FleetPrimaryLimit > 0 || c.FleetFallbackRPM > 0 || c.FleetFallbackTPM > 0
}

func (c Config) validateCapacity() error {
	k := c.Capacity
	var errs []error
	if k.Prefetch < 0 || k.Prefetch > c.Concurrency {
		errs = append(errs, errors.New("--prefetch must be in 0..--concurrency"))
	}
	if k.PrimaryReservedInteractive < 0 || k.PrimaryReservedInteractive >= c.PrimaryConcurrency {
		errs = append(errs, errors.New("--primary-reserved-interactive must be in 0..--primary-concurrency-1"))
	}
	if k.PrimaryAdaptive && (k.PrimaryAdaptiveMin < 1 || k.PrimaryAdaptiveMin > c.PrimaryConcurrency) {
		errs = append(errs, errors.New("--primary-adaptive-min must be in 1..--primary-concurrency"))
	}
	if k.PrimaryMetricsURL != "" && !strings.HasPrefix(k.PrimaryMetricsURL, "http://") && !strings.HasPrefix(k.PrimaryMetricsURL, "https://") {
		errs = append(errs, errors.New("--primary-metrics-url must be an http(s) URL"))
	}
	if k.FleetPrimaryLimit < 0 || k.FleetPrimaryReserved < 0 || (k.FleetPrimaryLimit > 0 && k.FleetPrimaryReserved >= k.FleetPrimaryLimit) {
		errs = append(errs, errors.New("--fleet-primary-reserved must be in 0..--fleet-primary-limit-1"))
	}
	if k.FleetFallbackRPM < 0 || k.FleetFallbackTPM < 0 || k.FleetReplicas < 1 {
		errs = append(errs, errors.New("--fleet-fallback-rpm and --fleet-fallback-tpm must not be negative, --fleet-replicas at least 1"))
	}
	if k.shared() && c.RedisAddr == "" {
		errs = append(errs, errors.New("--fleet-* limits need --redis-addr"))
	}
	return errors.Join(errs...)
}

// capacityRouter adds the capacity settings to the router's configuration;
// the fleet store comes from newFleetStore.
func (c Config) capacityRouter(rc llm.Config) llm.Config {
	k := c.Capacity
	rc.Primary.ReservedInteractive = k.PrimaryReservedInteractive
	if k.PrimaryAdaptive {
		rc.Primary.Adaptive = llm.AdaptiveConfig{Enabled: true, Min: k.PrimaryAdaptiveMin, MetricsURL: k.PrimaryMetricsURL}
	}
	rc.Fleet = llm.FleetConfig{
		PrimaryLimit: k.FleetPrimaryLimit, PrimaryReserved: k.FleetPrimaryReserved,
		FallbackRPM: k.FleetFallbackRPM, FallbackTPM: k.FleetFallbackTPM, Replicas: k.FleetReplicas,
		Name: strings.TrimSuffix(k.FleetKeyPrefix, ":"),
	}
	return rc
}

// newFleetStore connects the fleet limits to Redis when any is set; close
// closes that client. A Redis that is down at start is not an error: the
// router runs on its static share until it answers.
func newFleetStore(c Config, rc *llm.Config) (closeFn func(), err error) {
	if !c.Capacity.shared() {
		return func() {}, nil
	}
	// Its own client: a lease is asked for on every primary call, so the
	// pool is larger than the stop checks', and the router's per-call
	// deadline (100 ms) must bound the socket reads too.
	rdb, err := c.RedisOptions.Client(func(o *redis.Options) {
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = time.Second, time.Second, time.Second, time.Second
		o.MaxRetries, o.PoolSize, o.ContextTimeoutEnabled = 0, 64, true
	})
	if err != nil {
		return nil, fmt.Errorf("fleet limits: %w", err)
	}
	store := redislimits.New(rdb, "")
	rc.Fleet.Leases, rc.Fleet.Budget = store, store
	return func() { _ = rdb.Close() }, nil
}

// runRouter runs the router's background work until the returned stop is
// called; stop waits for it to end.
func runRouter(r *llm.Router) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
