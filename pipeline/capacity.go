package pipeline

import (
	"context"
	"time"
)

// Limits shared by every worker replica (the fleet): a lease semaphore
// bounds the calls in flight to a self-hosted pool across pods, a rate
// budget bounds a managed API's requests and tokens per minute. The router
// (pipeline/llm) is the only user; storage/redislimits implements both on
// Redis and pipeline/capacity in process (tests, and each pod's static
// share while Redis is unreachable).

// LeaseSemaphore is a counting semaphore whose slots are leases that
// expire unless renewed, so a pod that dies holding leases frees them
// within one TTL. The limit is given per call: callers of different
// classes ask the same semaphore with different limits (interactive L,
// batch L − R), which reserves R slots for the first class fleet-wide.
//
// Every method returns ctx's error when ctx ends first, and an error when
// the store cannot be reached; callers treat any error as "the store is
// unavailable", never as "full".
type LeaseSemaphore interface {
	// Acquire takes a lease named id on semaphore name when fewer than
	// limit unexpired leases are held, expiring after ttl. It reports
	// whether it took one and how many are held after the call.
	Acquire(ctx context.Context, name, id string, limit int, ttl time.Duration) (ok bool, held int, err error)
	// Renew pushes the expiry of the leases ids still held to now + ttl and
	// returns how many of them were still held (the rest had expired and
	// are not taken again).
	Renew(ctx context.Context, name string, ids []string, ttl time.Duration) (int, error)
	// Release gives lease id back; releasing a lease not held is not an
	// error.
	Release(ctx context.Context, name, id string) error
}

// Rate is a budget of PerMinute units a minute, of which Burst may be
// spent at once.
type Rate struct {
	PerMinute int
	Burst     int
	// Keep is what a take must leave of the burst: a take that would leave
	// fewer than Keep units at once is refused, with RetryAfter until it
	// would not. It is how a lower class leaves a reserve to a higher one
	// on one shared budget (a higher class takes with a smaller Keep, so it
	// is also served first from every refill). 0 spends the whole burst.
	Keep int
}

// RateResult is a budget's answer.
type RateResult struct {
	// Allowed is true when the units were taken.
	Allowed bool
	// Remaining is what may still be taken at once after this call.
	Remaining int
	// RetryAfter is how long until the units asked for would be allowed
	// (0 when allowed).
	RetryAfter time.Duration
}

// RateBudget is a GCRA (leaky bucket) budget shared by the fleet.
type RateBudget interface {
	// Take takes n units of budget name at rate when they fit and says
	// when they would otherwise. A refused call takes nothing. The error
	// contract is LeaseSemaphore's.
	Take(ctx context.Context, name string, rate Rate, n int) (RateResult, error)
}
