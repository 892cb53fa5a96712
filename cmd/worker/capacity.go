package main

import (
	"errors"
	"strings"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline/llm"
)

// CapacityConfig is the worker's share of the model pools in this process:
// the interactive reserve and the adaptive primary limit (the prefetch
// is the job loop's, jobloop.Config.Prefetch).
// The limits shared by every replica through Redis are the stage engine's
// (reviewers.Options, --fleet-*).
type CapacityConfig struct {
	PrimaryReservedInteractive int
	PrimaryAdaptive            bool
	PrimaryAdaptiveMin         int
	PrimaryMetricsURL          string
}

func defaultCapacity() CapacityConfig {
	return CapacityConfig{PrimaryAdaptiveMin: 4}
}

func (c *CapacityConfig) flags(fs *cli.FlagSet) {
	fs.IntVar(&c.PrimaryReservedInteractive, "primary-reserved-interactive", "primary slots of this process only interactive calls may take")
	fs.BoolVar(&c.PrimaryAdaptive, "primary-adaptive", "let the primary's limit in this process follow its TTFT between --primary-adaptive-min and --primary-concurrency")
	fs.IntVar(&c.PrimaryAdaptiveMin, "primary-adaptive-min", "lowest adaptive primary limit")
	fs.StringVar(&c.PrimaryMetricsURL, "primary-metrics-url", "the primary's Prometheus endpoint (vLLM /metrics), scraped for its waiting queue; empty: TTFT only")
}

func (c Config) validateCapacity() error {
	k := c.Capacity
	var errs []error
	if k.PrimaryReservedInteractive < 0 || k.PrimaryReservedInteractive >= c.PrimaryConcurrency {
		errs = append(errs, errors.New("--primary-reserved-interactive must be in 0..--primary-concurrency-1"))
	}
	if k.PrimaryAdaptive && (k.PrimaryAdaptiveMin < 1 || k.PrimaryAdaptiveMin > c.PrimaryConcurrency) {
		errs = append(errs, errors.New("--primary-adaptive-min must be in 1..--primary-concurrency"))
	}
	if k.PrimaryMetricsURL != "" && !strings.HasPrefix(k.PrimaryMetricsURL, "http://") && !strings.HasPrefix(k.PrimaryMetricsURL, "https://") {
		errs = append(errs, errors.New("--primary-metrics-url must be an http(s) URL"))
	}
	return errors.Join(errs...)
}

// capacity adds this process's capacity settings to the router's
// configuration (reviewers.Params.Capacity).
func (c Config) capacity(rc *llm.Config) {
	k := c.Capacity
	rc.Primary.ReservedInteractive = k.PrimaryReservedInteractive
	if k.PrimaryAdaptive {
		rc.Primary.Adaptive = llm.AdaptiveConfig{Enabled: true, Min: k.PrimaryAdaptiveMin, MetricsURL: k.PrimaryMetricsURL}
	}
}
