package llm

import (
	"context"
	"sync"
)

// Run runs the router's background work until ctx ends: the scrapes of
// the pools' /metrics for adaptive limits and the renewal of fleet leases.
// It returns nil once every goroutine it started has returned. Without Run
// the router still works, but adaptive limits follow TTFT alone and fleet
// leases expire after FleetConfig.LeaseTTL even while their calls run.
func (r *Router) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, p := range r.pools() {
		if p.adaptive != nil && p.cfg.Adaptive.MetricsURL != "" {
			wg.Go(func() { p.scrapeLoop(ctx, r.m) })
		}
	}
	if r.fleet != nil {
		wg.Go(func() { r.fleet.renewLoop(ctx) })
	}
	wg.Wait()
	return nil
}
