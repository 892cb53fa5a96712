package storetest

import (
	"context"
	"sync"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

var _ pipeline.ReviewClaims = (*Claims)(nil)

// Claims is an in-memory pipeline.ReviewClaims with the MySQL adapter's
// semantics (expiries truncated to microseconds, an expired claim taken over
// by anyone). It is safe for concurrent use. Err, when set, is returned by
// every call instead of doing the work, to inject an outage.
type Claims struct {
	clk  clock.Clock
	mu   sync.Mutex
	rows map[pipeline.ReviewKey]pipeline.Claim
	Err  func() error
}

// NewClaims returns an empty claim table on the clock c (nil: the wall
// clock).
func NewClaims(c clock.Clock) *Claims {
	return &Claims{clk: clock.Or(c), rows: map[pipeline.ReviewKey]pipeline.Claim{}}
}

// Claim implements pipeline.ReviewClaims.
func (c *Claims) Claim(ctx context.Context, k pipeline.ReviewKey, owner string, ttl time.Duration) (pipeline.Claim, error) {
	if err := ctx.Err(); err != nil {
		return pipeline.Claim{}, err
	}
	if c.Err != nil {
		if err := c.Err(); err != nil {
			return pipeline.Claim{}, err
		}
	}
	k = norm(k)
	now := c.clk.Now().UTC().Truncate(time.Microsecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.rows[k]
	if !ok || cur.Owner == owner || !cur.Expires.After(now) {
		cur = pipeline.Claim{Owner: owner, Expires: now.Add(ttl)}
		c.rows[k] = cur
	}
	cur.Held = cur.Owner == owner
	return cur, nil
}

// Release implements pipeline.ReviewClaims.
func (c *Claims) Release(ctx context.Context, k pipeline.ReviewKey, owner string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.Err != nil {
		if err := c.Err(); err != nil {
			return err
		}
	}
	k = norm(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.rows[k]; ok && cur.Owner == owner {
		delete(c.rows, k)
	}
	return nil
}

// Len returns how many claims are held or expired but not released.
func (c *Claims) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.rows)
}
