package main

import (
	"errors"
	"strings"

	"github.com/chatguard/chatguard/cmd/internal/cli"
)

// defaultAdaptiveMin is the lowest adaptive primary limit unless
// --primary-adaptive-min says otherwise.
const defaultAdaptiveMin = 4

// capacityFlags binds the worker's share of the model pools in this
// process, the interactive reserve and the adaptive primary limit, to the
// primary pool's own configuration (the prefetch is the job loop's,
// jobloop.Config.Prefetch). The limits shared by every replica through
// Redis are the router's too (depflags.Pools.FleetFlags, --fleet-*).
func (c *Config) capacityFlags(fs *cli.FlagSet) {
	p := &c.LLM.Primary
	fs.IntVar(&p.ReservedInteractive, "primary-reserved-interactive", "primary slots of this process only interactive calls may take")
	fs.BoolVar(&p.Adaptive.Enabled, "primary-adaptive", "let the primary's limit in this process follow its TTFT between --primary-adaptive-min and --primary-concurrency")
	fs.IntVar(&p.Adaptive.Min, "primary-adaptive-min", "lowest adaptive primary limit")
	fs.StringVar(&p.Adaptive.MetricsURL, "primary-metrics-url", "the primary's Prometheus endpoint (vLLM /metrics), scraped for its waiting queue; empty: TTFT only")
}

// validateCapacity names the capacity flags in what llm.New would refuse.
func (c Config) validateCapacity() error {
	p := c.LLM.Primary
	var errs []error
	if p.ReservedInteractive < 0 || p.ReservedInteractive >= p.MaxConcurrency {
		errs = append(errs, errors.New("--primary-reserved-interactive must be in 0..--primary-concurrency-1"))
	}
	if p.Adaptive.Enabled && (p.Adaptive.Min < 1 || p.Adaptive.Min > p.MaxConcurrency) {
		errs = append(errs, errors.New("--primary-adaptive-min must be in 1..--primary-concurrency"))
	}
	if u := p.Adaptive.MetricsURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		errs = append(errs, errors.New("--primary-metrics-url must be an http(s) URL"))
	}
	return errors.Join(errs...)
}
