// Package redislimits keeps the fleet-wide limits in Redis: a lease
// semaphore per name as a sorted set (member = lease id, score = expiry in
// Redis's own milliseconds, so pods' clocks never matter), and GCRA rate
// budgets: go-redis/redis_rate's algorithm and keys, with a Keep that a
// take must leave (pipeline.Rate). Each operation is one script call,
// atomic in Redis.
package redislimits

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/pipeline"
)

var (
	_ pipeline.LeaseSemaphore = (*Limits)(nil)
	_ pipeline.RateBudget     = (*Limits)(nil)
)

// Limits is the Redis store of the fleet-wide limits. Names get Prefix
// in front: "<prefix>lease:<name>" (a sorted set) and "rate:<prefix><name>"
// (the theoretical arrival time, as redis_rate keeps it, so pods of the
// previous release share the budget during a rollout).
type Limits struct {
	rdb    redis.UniversalClient
	prefix string
}

// New returns the store over rdb (whose options bound every call's
// dial, read and write time) with key prefix prefix (e.g. "chatguard:fleet:").
func New(rdb redis.UniversalClient, prefix string) *Limits {
	return &Limits{rdb: rdb, prefix: prefix}
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
	// takeScript is redis_rate's GCRA (seconds since 2017 in Redis's
	// clock, the same key and value) with ARGV[5], Keep: the decision
	// counts Keep units as taken too, the stored time only the cost.
	takeScript = redis.NewScript(`
local burst = tonumber(ARGV[1])
local emission = tonumber(ARGV[3]) / tonumber(ARGV[2])
local cost = tonumber(ARGV[4])
local keep = tonumber(ARGV[5])
local t = redis.call('TIME')
local now = (tonumber(t[1]) - 1483228800) + tonumber(t[2]) / 1000000
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
tat = math.max(tat, now)
local new_tat = tat + emission * cost
local burst_offset = emission * burst
local diff = now - (new_tat + emission * keep - burst_offset)
if diff < -1e-9 * emission then
  local rem = math.floor((now - (tat - burst_offset)) / emission + 1e-9)
  return {0, math.max(rem, 0), tostring(-diff)}
end
local reset_after = new_tat - now
if reset_after > 0 then
  redis.call('SET', KEYS[1], new_tat, 'EX', math.ceil(reset_after))
end
return {1, math.floor((now - (new_tat - burst_offset)) / emission + 1e-9), '0'}
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
	if rate.PerMinute <= 0 {
		return pipeline.RateResult{}, fmt.Errorf("redislimits: take %s: rate %d per minute must be positive", name, rate.PerMinute)
	}
	v, err := takeScript.Run(ctx, l.rdb, []string{"rate:" + l.prefix + name},
		rate.Burst, rate.PerMinute, time.Minute.Seconds(), n, max(rate.Keep, 0)).Slice()
	if err != nil {
		return pipeline.RateResult{}, fmt.Errorf("redislimits: take %s: %w", name, err)
	}
	if len(v) != 3 {
		return pipeline.RateResult{}, fmt.Errorf("redislimits: take %s: unexpected reply %v", name, v)
	}
	allowed, ok1 := v[0].(int64)
	remaining, ok2 := v[1].(int64)
	after, ok3 := v[2].(string)
	if !ok1 || !ok2 || !ok3 {
		return pipeline.RateResult{}, fmt.Errorf("redislimits: take %s: unexpected reply %v", name, v)
	}
	out := pipeline.RateResult{Allowed: allowed == 1, Remaining: max(int(remaining), 0)}
	if !out.Allowed {
		secs, err := strconv.ParseFloat(after, 64)
		if err != nil {
			return pipeline.RateResult{}, fmt.Errorf("redislimits: take %s: retry after %q: %w", name, after, err)
		}
		out.RetryAfter = max(time.Duration(secs*float64(time.Second)), 0)
	}
	return out, nil
}
