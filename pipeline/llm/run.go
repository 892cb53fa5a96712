package llm

import (
	"context"
	"sync"
)

// Run runs the router's background work until ctx ends: the scrapes of
// the pools' /metrics for adaptive limits. It returns nil once every
// goroutine it started has returned. Without Run the router still works;
// adaptive limits then follow TTFT alone.
func (r *Router) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, p := range r.pools() {
		if p.adaptive != nil && p.cfg.Adaptive.MetricsURL != "" {
			wg.Go(func() { p.scrapeLoop(ctx, r.m) })
		}
	}
	wg.Wait()
	return nil
}
