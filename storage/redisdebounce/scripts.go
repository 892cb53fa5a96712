package redisdebounce

import "github.com/redis/go-redis/v9"

// The scripts keep every decision about one room atomic in Redis. Each
// declares its keys (the room's hash, its seen set, its shard's due set),
// and they share one hash tag, so every call touches one Cluster slot.
// Times are milliseconds of the trigger's clock, passed in by the caller:
// window bounds come from the trigger, never from a producer's sent_at.
//
// The seen set scores each message id by its sent_at, so that a window
// reaching back over an earlier one could count the messages it knows in
// the overlap. The late set holds the late messages: each gets a window
// of its own from the trigger instead of pulling the room's next window
// back over what is covered, and a redelivery of one answers late again,
// so that its own window is published again (the same window) until the
// trigger settles it.
//
// Room hash fields:
//
//	first, last  arrival of the first and last unreviewed message
//	mins, maxs   smallest and largest sent_at among them
//	n            how many there are
//	ps, pe       the pending window (claimed, not yet acknowledged)
//	reason, pn   its fire reason and message count
//	pd           its double-covered count (see claimScript)
//	owner        the token of the claim that holds it
//	ahead        the largest sent_at the pending window does not reach
//	wm           the watermark: the end of the last acknowledged window
var (
	// recordScript: KEYS room, seen, due, late; ARGV room, message id,
	// now, sent, quiet, max delay, seen cap, ttl. A message sent before
	// the watermark, or before the window being published, is late: it
	// goes to the late set and leaves the room's next window alone.
	recordScript = redis.NewScript(`
if redis.call('ZSCORE', KEYS[2], ARGV[2]) then
  if redis.call('ZSCORE', KEYS[4], ARGV[2]) then return 'late' end
  return 'duplicate'
end
local now, sent, ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[8])
local cap = tonumber(ARGV[7])
redis.call('ZADD', KEYS[2], sent, ARGV[2])
if redis.call('ZCARD', KEYS[2]) > cap then redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(cap + 1)) end
redis.call('PEXPIRE', KEYS[2], ttl)
local h = redis.call('HMGET', KEYS[1], 'ps', 'pe', 'wm', 'first', 'mins', 'maxs')
local ps, pe, wm = tonumber(h[1]), tonumber(h[2]), tonumber(h[3])
if ps and sent >= ps and sent < pe then
  redis.call('PEXPIRE', KEYS[1], ttl)
  return 'pending'
end
if (wm and sent < wm) or (ps and sent < ps) then
  redis.call('ZADD', KEYS[4], sent, ARGV[2])
  if redis.call('ZCARD', KEYS[4]) > cap then redis.call('ZREMRANGEBYRANK', KEYS[4], 0, -(cap + 1)) end
  redis.call('PEXPIRE', KEYS[4], ttl)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return 'late'
end
local first, mins, maxs = tonumber(h[4]), tonumber(h[5]), tonumber(h[6])
if not first then first, mins, maxs = now, sent, sent end
mins, maxs = math.min(mins or sent, sent), math.max(maxs or sent, sent)
redis.call('HSET', KEYS[1], 'first', first, 'last', now, 'mins', mins, 'maxs', maxs)
redis.call('HINCRBY', KEYS[1], 'n', 1)
redis.call('PEXPIRE', KEYS[1], ttl)
if not ps then
  redis.call('ZADD', KEYS[3], math.min(now + tonumber(ARGV[5]), first + tonumber(ARGV[6])), ARGV[1])
end
return 'new'
`)

	// claimScript: KEYS room, due, seen, late; ARGV room, now, token,
	// lease, max window, slack, quiet, max delay, ttl. Returns nil, 'gone'
	// when the room is due but its state is not there (evicted, or lost
	// in a failover; the room leaves the due set), or {start, end,
	// reason, messages, republish, double-covered}.
	//
	// A window never starts before the watermark: a late message has a
	// window of its own and does not pull the room's next one back. Should
	// one start before it all the same, double-covered counts the
	// messages of the seen set sent in the overlap [start, watermark),
	// less the late ones; it is fixed at the first claim, so a republish
	// answers the same count.
	claimScript = redis.NewScript(`
local now = tonumber(ARGV[2])
local score = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]))
if not score or score > now then return false end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 'gone'
end
local lease, ttl = tonumber(ARGV[4]), tonumber(ARGV[9])
local h = redis.call('HMGET', KEYS[1], 'ps', 'pe', 'reason', 'pn', 'first', 'last', 'mins', 'maxs', 'n', 'wm', 'pd')
if h[1] then
  redis.call('HSET', KEYS[1], 'owner', ARGV[3])
  redis.call('ZADD', KEYS[2], now + lease, ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {tonumber(h[1]), tonumber(h[2]), h[3], tonumber(h[4]) or 0, 1, tonumber(h[11]) or 0}
end
local first = tonumber(h[5])
if not first then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return false
end
local last, mins, maxs, n, wm = tonumber(h[6]), tonumber(h[7]), tonumber(h[8]), tonumber(h[9]) or 0, tonumber(h[10])
local reason = 'quiet'
if first + tonumber(ARGV[8]) < last + tonumber(ARGV[7]) then reason = 'max_delay' end
local e = now
local s = first - tonumber(ARGV[6])
if wm and s < wm then s = wm end
if mins and mins < s then s = mins end
if s < e - tonumber(ARGV[5]) then s = e - tonumber(ARGV[5]) end
if s >= e then e = s + 1 end
local dbl = 0
if wm and s < wm then
  local upto = '(' .. math.min(wm, e)
  dbl = redis.call('ZCOUNT', KEYS[3], s, upto) - redis.call('ZCOUNT', KEYS[4], s, upto)
  if dbl < 0 then dbl = 0 end
end
redis.call('HDEL', KEYS[1], 'first', 'last', 'mins', 'maxs', 'n')
redis.call('HSET', KEYS[1], 'ps', s, 'pe', e, 'reason', reason, 'pn', n, 'owner', ARGV[3], 'pd', dbl)
if maxs and maxs >= e then redis.call('HSET', KEYS[1], 'ahead', maxs) end
redis.call('ZADD', KEYS[2], now + lease, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
return {s, e, reason, n, 0, dbl}
`)

	// ackScript: KEYS room, due; ARGV room, token, start, end, now, quiet,
	// max delay, ttl. Returns 1, 0 when the claim was lost, or -1 when
	// the room's state is gone.
	ackScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local h = redis.call('HMGET', KEYS[1], 'owner', 'ps', 'pe', 'ahead', 'first', 'last', 'maxs')
if h[1] ~= ARGV[2] or tonumber(h[2]) ~= tonumber(ARGV[3]) or tonumber(h[3]) ~= tonumber(ARGV[4]) then return 0 end
local pe, now = tonumber(ARGV[4]), tonumber(ARGV[5])
local quiet, maxd, ttl = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
redis.call('HDEL', KEYS[1], 'ps', 'pe', 'reason', 'pn', 'owner', 'ahead', 'pd')
redis.call('HSET', KEYS[1], 'wm', pe)
local ahead, first, last, maxs = tonumber(h[4]), tonumber(h[5]), tonumber(h[6]), tonumber(h[7])
local due = nil
if first then due = math.min(last + quiet, first + maxd) end
if ahead and ahead >= pe then
  if not first then first, last = now, now end
  maxs = math.max(maxs or ahead, ahead)
  redis.call('HSET', KEYS[1], 'first', first, 'last', last, 'maxs', maxs)
  due = math.min(math.max(last, ahead) + quiet, first + maxd)
end
if due then redis.call('ZADD', KEYS[2], due, ARGV[1]) else redis.call('ZREM', KEYS[2], ARGV[1]) end
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
`)
)
