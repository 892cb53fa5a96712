package rediscampaign

import "github.com/redis/go-redis/v9"

// observeScript counts one shard's marks of one review, atomically, in one
// Cluster slot. KEYS: the shard's hash (field: a mark's 12 bytes, value: its
// state) and its recency set (member: the same field, score: the last time
// the mark was seen, in seconds). ARGV: now (s), now (hour), window
// (hours), exact cap, shard cap, ttl (ms), room (32-bit), then a field and a
// sender (32-bit) per mark. It answers rooms and senders per mark, then how
// many marks it evicted over the shard cap and how many it dropped as unseen
// for a whole window.
//
// A mark's state is two lists, rooms and senders, of (32-bit hash, hour
// last seen), each with a threshold tau: entries older than the window are
// dropped at every touch; a list keeps every hash while it holds at most
// the exact cap (tau 0: the count is exact), and above it only the cap
// smallest hashes, tau becoming the smallest one dropped. From then on a
// hash at or above tau is not kept, so the list is a uniform sample of the
// distinct hashes with rate tau/2^32 and the count is its length divided by
// that rate (a bottom-k, or KMV, estimate, a few hundred bytes at most).
// An emptied list starts exact again.
var observeScript = redis.NewScript(`
local now, hour, win = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local cap, shardCap, ttl, room = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

local function decode(v)
  local st = {rt = 0, st = 0, r = {}, s = {}}
  if not v then return st end
  local rt, stau, nr, ns, pos = struct.unpack('>I4I4I2I2', v)
  st.rt, st.st = rt, stau
  for i = 1, nr do
    local h, hr
    h, hr, pos = struct.unpack('>I4I4', v, pos)
    st.r[i] = {h, hr}
  end
  for i = 1, ns do
    local h, hr
    h, hr, pos = struct.unpack('>I4I4', v, pos)
    st.s[i] = {h, hr}
  end
  return st
end

local function encode(st)
  local parts = {struct.pack('>I4I4I2I2', st.rt, st.st, #st.r, #st.s)}
  for _, e in ipairs(st.r) do parts[#parts + 1] = struct.pack('>I4I4', e[1], e[2]) end
  for _, e in ipairs(st.s) do parts[#parts + 1] = struct.pack('>I4I4', e[1], e[2]) end
  return table.concat(parts)
end

local function touch(list, tau, h)
  local kept, found = {}, false
  for _, e in ipairs(list) do
    if hour - e[2] < win then
      if e[1] == h then e[2] = hour; found = true end
      kept[#kept + 1] = e
    end
  end
  if #kept == 0 then tau = 0 end
  if not found and (tau == 0 or h < tau) then kept[#kept + 1] = {h, hour} end
  if #kept > cap then
    table.sort(kept, function(a, b) return a[1] < b[1] end)
    tau = math.max(kept[cap + 1][1], 1)
    for i = #kept, cap + 1, -1 do kept[i] = nil end
  end
  return kept, tau
end

local function count(list, tau)
  if tau == 0 then return #list end
  return math.floor(#list * 4294967296 / tau + 0.5)
end

local out = {}
for i = 8, #ARGV, 2 do
  local field, sender = ARGV[i], tonumber(ARGV[i + 1])
  local st = decode(redis.call('HGET', KEYS[1], field))
  st.r, st.rt = touch(st.r, st.rt, room)
  st.s, st.st = touch(st.s, st.st, sender)
  redis.call('HSET', KEYS[1], field, encode(st))
  redis.call('ZADD', KEYS[2], now, field)
  out[#out + 1] = count(st.r, st.rt)
  out[#out + 1] = count(st.s, st.st)
end

local expired = 0
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. (now - win * 3600), 'LIMIT', 0, 64)
if #old > 0 then
  redis.call('HDEL', KEYS[1], unpack(old))
  redis.call('ZREM', KEYS[2], unpack(old))
  expired = #old
end
local evicted = 0
local over = math.min(redis.call('ZCARD', KEYS[2]) - shardCap, 256)
if over > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[2], over)
  local fields = {}
  for j = 1, #popped, 2 do fields[#fields + 1] = popped[j] end
  redis.call('HDEL', KEYS[1], unpack(fields))
  evicted = #fields
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
out[#out + 1] = evicted
out[#out + 1] = expired
return out
`)
