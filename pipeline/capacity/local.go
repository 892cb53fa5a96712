// Package capacity holds Local, the in-process implementation of the
// fleet-wide limits (pipeline.LeaseSemaphore and pipeline.RateBudget). The
// router uses it for a pod's static share while the shared store (Redis)
// is unreachable, and tests use it as the fake; capacitytest.Run checks it
// against the same contract as the Redis adapter.
package capacity

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

var (
	_ pipeline.LeaseSemaphore = (*Local)(nil)
	_ pipeline.RateBudget     = (*Local)(nil)
)

// ErrUnavailable is what a Local set to fail (SetFailing) returns, as a
// store that cannot be reached would.
var ErrUnavailable = errors.New("capacity: store unavailable (simulated)")

// Local keeps leases and budgets in memory. It is safe for concurrent use.
type Local struct {
	clk clock.Clock

	mu      sync.Mutex
	leases  map[string]map[string]time.Time // name -> id -> expiry
	tats    map[string]float64              // name -> GCRA theoretical arrival time (s)
	failing bool
}

// NewLocal returns an empty Local keeping time on c (nil: the wall
// clock), so that tests move lease expiry and budget refill by hand.
func NewLocal(c clock.Clock) *Local { return &Local{clk: clock.Or(c)} }

// SetFailing makes every later call fail with ErrUnavailable (true) or
// work again (false): the fake's outage switch.
func (l *Local) SetFailing(failing bool) {
	l.mu.Lock()
	l.failing = failing
	l.mu.Unlock()
}

// check returns the error a call gets before it does anything. Callers
// hold mu.
func (l *Local) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.failing {
		return ErrUnavailable
	}
	return nil
}

// live returns name's leases with the expired ones removed. Callers hold mu.
func (l *Local) live(name string, now time.Time) map[string]time.Time {
	if l.leases == nil {
		l.leases = make(map[string]map[string]time.Time)
	}
	m := l.leases[name]
	if m == nil {
		m = make(map[string]time.Time)
		l.leases[name] = m
	}
	for id, exp := range m {
		if !exp.After(now) {
			delete(m, id)
		}
	}
	return m
}

// Acquire implements pipeline.LeaseSemaphore. Acquiring an id already held
// renews it and succeeds.
func (l *Local) Acquire(ctx context.Context, name, id string, limit int, ttl time.Duration) (bool, int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(ctx); err != nil {
		return false, 0, err
	}
	now := l.clk.Now()
	m := l.live(name, now)
	if _, held := m[id]; !held && len(m) >= limit {
		return false, len(m), nil
	}
	m[id] = now.Add(ttl)
	return true, len(m), nil
}

// Renew implements pipeline.LeaseSemaphore.
func (l *Local) Renew(ctx context.Context, name string, ids []string, ttl time.Duration) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(ctx); err != nil {
		return 0, err
	}
	now := l.clk.Now()
	m := l.live(name, now)
	n := 0
	for _, id := range ids {
		if _, ok := m[id]; ok {
			m[id] = now.Add(ttl)
			n++
		}
	}
	return n, nil
}

// Release implements pipeline.LeaseSemaphore.
func (l *Local) Release(ctx context.Context, name, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(ctx); err != nil {
		return err
	}
	delete(l.live(name, l.clk.Now()), id)
	return nil
}

// Take implements pipeline.RateBudget with the GCRA that storage/redislimits
// runs in Redis (redis_rate's, with Keep), so that both answer alike.
func (l *Local) Take(ctx context.Context, name string, rate pipeline.Rate, n int) (pipeline.RateResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(ctx); err != nil {
		return pipeline.RateResult{}, err
	}
	if l.tats == nil {
		l.tats = make(map[string]float64)
	}
	now := float64(l.clk.Now().UnixNano()) / 1e9
	next, res := gcra(l.tats[name], now, rate, n)
	if res.Allowed {
		l.tats[name] = next
	}
	return res, nil
}

// gcra is one GCRA decision at time now (seconds) for a stored theoretical
// arrival time tat (0 when none): the tat to store when allowed, and the
// answer.
func gcra(tat, now float64, rate pipeline.Rate, n int) (float64, pipeline.RateResult) {
	emission := 60 / float64(max(rate.PerMinute, 1))
	burstOffset := emission * float64(rate.Burst)
	tat = math.Max(tat, now)
	next := tat + emission*float64(n)
	// The decision counts Keep as if it were taken too; only n is stored.
	diff := now - (next + emission*float64(max(rate.Keep, 0)) - burstOffset)
	if diff < -1e-9*emission {
		rem := math.Floor((now-(tat-burstOffset))/emission + 1e-9)
		return next, pipeline.RateResult{
			Allowed:    false,
			Remaining:  int(math.Max(rem, 0)),
			RetryAfter: time.Duration(-diff * float64(time.Second)),
		}
	}
	remaining := math.Floor((now-(next-burstOffset))/emission + 1e-9)
	return next, pipeline.RateResult{Allowed: true, Remaining: int(remaining)}
}
