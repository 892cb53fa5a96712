package shadow

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// Budget is the fleet-wide spend allowed to shadow traffic, kept in a
// pipeline.RateBudget every pod shares (storage/redislimits). A shadow
// review's cost is known only once it has run, so each review is charged
// afterwards; a charge the budget refuses pauses this pod's shadowing until
// the budget says it has room again, and offers meanwhile are dropped and
// counted. Each pod overshoots by at most the reviews it had in flight.
type Budget struct {
	// Store is the shared budget; nil: no budget.
	Store pipeline.RateBudget
	// Name prefixes the budget's keys (the candidate's name is a good one).
	Name string
	// TokensPerMinute bounds the candidate's tokens (prompt and
	// completion) a minute across the fleet; 0: no bound.
	TokensPerMinute int
	// USDPerDay bounds the candidate's cost a day across the fleet, spent
	// at most a day's worth at once; 0: no bound.
	USDPerDay float64
	// CallTimeout bounds one charge (a Redis round trip).
	CallTimeout time.Duration
}

// budgetRetry is how long shadowing pauses after a charge the store could
// not answer, or a refusal that names no time: shadow traffic is the first
// thing to give up when the fleet's limits are in doubt.
const budgetRetry = time.Minute

// microUSD is the unit of the daily budget: the store counts integers.
const microUSD = 1e6

// Limited reports whether any bound is set.
func (b Budget) Limited() bool { return b.Store != nil && (b.TokensPerMinute > 0 || b.USDPerDay > 0) }

// validate reports the budget's problems.
func (b Budget) validate() error {
	var errs []error
	if b.TokensPerMinute < 0 || b.USDPerDay < 0 || math.IsNaN(b.USDPerDay) {
		errs = append(errs, errors.New("shadow budget must not be negative"))
	}
	if b.Limited() && b.CallTimeout <= 0 {
		errs = append(errs, errors.New("shadow budget call timeout must be positive"))
	}
	return errors.Join(errs...)
}

// gate is the pod's view of the budget: open, or paused until a time.
type gate struct {
	mu    sync.Mutex
	until time.Time
}

func (g *gate) open(now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !now.Before(g.until)
}

func (g *gate) pause(until time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if until.After(g.until) {
		g.until = until
	}
}

// charge takes what a shadow review spent from the budget and returns how
// long shadowing should pause (0: not at all). It never blocks beyond the
// budget's call timeout; ctx is not the review's (a canceled review was
// still paid for).
func (b Budget) charge(ctx context.Context, tokens int, usd float64) time.Duration {
	if !b.Limited() {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, b.CallTimeout)
	defer cancel()
	var pause time.Duration
	take := func(suffix string, rate pipeline.Rate, n int) {
		if n <= 0 || rate.PerMinute <= 0 {
			return
		}
		res, err := b.Store.Take(ctx, b.Name+":"+suffix, rate, min(n, rate.Burst))
		switch {
		case err != nil:
			pause = max(pause, budgetRetry)
		case !res.Allowed:
			pause = max(pause, res.RetryAfter, time.Second)
		}
	}
	take("tokens", pipeline.Rate{PerMinute: b.TokensPerMinute, Burst: b.TokensPerMinute}, tokens)
	day := int(math.Round(b.USDPerDay * microUSD))
	take("usd", pipeline.Rate{PerMinute: max(day/(24*60), 1), Burst: day}, int(math.Ceil(usd*microUSD)))
	return pause
}
