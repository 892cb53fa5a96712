// Package redislimits keeps the fleet-wide limits in Redis: a lease
// semaphore per name as a sorted set (member = lease id, score = expiry in
// Redis's own milliseconds, so pods' clocks never matter), and GCRA rate
// budgets with go-redis/redis_rate. Each operation is one script call,
// atomic in Redis.
package redislimits

import (
	"context"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/pipeline"
)

var (
	_ pipeline.LeaseSemaphore = (*Limits)(nil)
	_ pipeline.RateBudget     = (*Limits)(nil)
)

// Limits is the Redis store of the fleet-wide limits. Names get Prefix
// in front: "<prefix>lease:<name>" (a sorted set) and redis_rate's
// "rate:<prefix><name>".
type Limits struct {
	rdb    redis.UniversalClient
	prefix string
	rate   *redis_rate.Limiter
}

// New returns the store over rdb (whose options bound every call's
// dial, read and write time) with key prefix prefix (e.g. "chatguard:fleet:").
func New(rdb redis.UniversalClient, prefix string) *Limits {
	return &Limits{rdb: rdb, prefix: prefix, rate: redis_rate.NewLimiter(rdb)}
}

// Scripts read Redis's clock: every pod agrees on when a lease expires.
// The key itself expires a while after its last write, so names no
// longer used leave nothing behind.
var (
	acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == false and held >= tonumber(ARGV[2]) then
  return {0, held}
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl * 2)
return {1, redis.call('ZCARD', KEYS[1])}
`)
	renewScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = 0
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) ~= false then
    redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
    n = n + 1
  end
end
if n > 0 then redis.call('PEXPIRE', KEYS[1], ttl * 2) end
return n
`)
)

func (l *Limits) leaseKey(name string) string { return l.prefix + "lease:" + name }

// Acquire implements pipeline.LeaseSemaphore.
func (l *Limits) Acquire(ctx context.Context, name, id string, limit int, ttl time.Duration) (bool, int, error) {
	v, err := acquireScript.Run(ctx, l.rdb, []string{l.leaseKey(name)}, id, limit, max(ttl.Milliseconds(), 1)).Int64Slice()
	if err != nil {
		return false, 0, fmt.Errorf("redislimits: acquire %s: %w", name, err)
	}
	if len(v) != 2 {
		return false, 0, fmt.Errorf("redislimits: acquire %s: unexpected reply %v", name, v)
	}
	return v[0] == 1, int(v[1]), nil
}

// Renew implements pipeline.LeaseSemaphore.
func (l *Limits) Renew(ctx context.Context, name string, ids []string, ttl time.Duration) (int, error) {
	if len(ids) == 0 {
		return 0, ctx.Err()
	}
	args := make([]any, 0, 1+len(ids))
	args = append(args, max(ttl.Milliseconds(), 1))
	for _, id := range ids {
		args = append(args, id)
	}
	n, err := renewScript.Run(ctx, l.rdb, []string{l.leaseKey(name)}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("redislimits: renew %s: %w", name, err)
	}
	return n, nil
}

// Release implements pipeline.LeaseSemaphore.
func (l *Limits) Release(ctx context.Context, name, id string) error {
	if err := l.rdb.ZRem(ctx, l.leaseKey(name), id).Err(); err != nil {
		return fmt.Errorf("redislimits: release %s: %w", name, err)
	}
	return nil
}

// Take implements pipeline.RateBudget.
func (l *Limits) Take(ctx context.Context, name string, rate pipeline.Rate, n int) (pipeline.RateResult, error) {
	res, err := l.rate.AllowN(ctx, l.prefix+name, redis_rate.Limit{Rate: rate.PerMinute, Burst: rate.Burst, Period: time.Minute}, n)
	if err != nil {
		return pipeline.RateResult{}, fmt.Errorf("redislimits: take %s: %w", name, err)
	}
	out := pipeline.RateResult{Allowed: res.Allowed > 0, Remaining: max(res.Remaining, 0)}
	if !out.Allowed {
		out.RetryAfter = max(res.RetryAfter, 0)
	}
	return out, nil
}
