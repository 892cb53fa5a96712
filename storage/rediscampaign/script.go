package rediscampaign

import "github.com/redis/go-redis/v9"

// observeScript counts one shard's marks of one review, atomically, in one
// Cluster slot. KEYS: the shard's compact hash and large hash (field: a
// mark's 8 bytes, value: its state; a mark is in one of them) and its
// recency set (member: the same field, score: the last time the mark was
// seen, in seconds). ARGV: now (s), now (hour), window (hours), exact cap,
// shard cap, ttl (ms), room (32-bit), the largest compact state (bytes),
// then a field and a sender (32-bit) per mark. It answers rooms and
// senders per mark, then how many marks it evicted over the shard cap and
// how many it dropped as unseen for a whole window.
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
//
// Packed for Redis's compact encodings: two 16-bit list lengths, the high
// bit of each saying a 32-bit tau follows (only above the exact cap), then
// each entry as a 32-bit hash and the hour modulo 2^16 (a window is at
// most 168 hours, so the age modulo 2^16, read as signed, is the age). A
// mark in one room from one sender is 16 bytes. A state over the compact
// bound lives in the large hash, and moves back when it shrinks.
var observeScript = redis.NewScript(`
local now, win, cap = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4])
local hour = tonumber(ARGV[2]) % 65536
local shardCap, ttl, room, compact = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])

-- A list is flat, {hash, hour, hash, hour, ...}, unpacked and packed by
-- one struct call each: a hot mark's 64 entries cost two C calls, not 128
-- calls and 64 tables.
local function decodeList(v, pos, n)
  local tau = 0
  if n >= 32768 then
    n = n - 32768
    tau, pos = struct.unpack('>I4', v, pos)
  end
  if n == 0 then return {}, tau, pos end
  local flat = {struct.unpack('>' .. string.rep('I4I2', n), v, pos)}
  pos = table.remove(flat)
  return flat, tau, pos
end

local function decode(v)
  if not v then return {}, 0, {}, 0 end
  local nr, ns, pos = struct.unpack('>I2I2', v)
  local r, rt, s, st
  r, rt, pos = decodeList(v, pos, nr)
  s, st, pos = decodeList(v, pos, ns)
  return r, rt, s, st
end

local function encodeList(parts, flat, tau)
  if tau > 0 then parts[#parts + 1] = struct.pack('>I4', tau) end
  if #flat > 0 then parts[#parts + 1] = struct.pack('>' .. string.rep('I4I2', #flat / 2), unpack(flat)) end
end

local function encode(r, rt, s, st)
  local parts = {struct.pack('>I2I2', #r / 2 + (rt > 0 and 32768 or 0), #s / 2 + (st > 0 and 32768 or 0))}
  encodeList(parts, r, rt)
  encodeList(parts, s, st)
  return table.concat(parts)
end

-- touch drops the entries older than the window, stamps h's entry with
-- this hour or adds it (when the list is exact or h is below tau), and
-- above the cap drops the largest hashes, tau becoming the smallest one
-- dropped.
local function touch(flat, tau, h)
  local kept, found = {}, false
  for i = 1, #flat, 2 do
    local e, hr = flat[i], flat[i + 1]
    -- The age modulo 2^16, read as signed: an entry stamped in the next
    -- hour by a replica whose clock is a little ahead stays.
    local age = (hour - hr) % 65536
    if age >= 32768 then age = age - 65536 end
    if age < win then
      if e == h then hr = hour; found = true end
      kept[#kept + 1] = e
      kept[#kept + 1] = hr
    end
  end
  if #kept == 0 then tau = 0 end
  if not found and (tau == 0 or h < tau) then
    kept[#kept + 1] = h
    kept[#kept + 1] = hour
  end
  while #kept > 2 * cap do
    local top = 1
    for i = 3, #kept, 2 do
      if kept[i] > kept[top] then top = i end
    end
    tau = math.max(kept[top], 1)
    kept[top], kept[top + 1] = kept[#kept - 1], kept[#kept]
    kept[#kept], kept[#kept - 1] = nil, nil
  end
  return kept, tau
end

local function count(flat, tau)
  if tau == 0 then return #flat / 2 end
  return math.floor(#flat / 2 * 4294967296 / tau + 0.5)
end

-- written says which hash this call wrote: only a written key's expiry
-- moves (a live entry is never older than its key's last write, and the
-- key outlives that write by the window and an hour).
local out, written = {}, {false, false}
for i = 9, #ARGV, 2 do
  local field, sender = ARGV[i], tonumber(ARGV[i + 1])
  local v, large = redis.call('HGET', KEYS[1], field), false
  if not v then
    v = redis.call('HGET', KEYS[2], field)
    large = v and true or false
  end
  local r, rt, s, st = decode(v)
  r, rt = touch(r, rt, room)
  s, st = touch(s, st, sender)
  v = encode(r, rt, s, st)
  if #v <= compact then
    redis.call('HSET', KEYS[1], field, v)
    written[1] = true
    if large then redis.call('HDEL', KEYS[2], field) end
  else
    redis.call('HSET', KEYS[2], field, v)
    written[2] = true
    if not large then redis.call('HDEL', KEYS[1], field) end
  end
  redis.call('ZADD', KEYS[3], now, field)
  out[#out + 1] = count(r, rt)
  out[#out + 1] = count(s, st)
end

local function drop(fields)
  redis.call('HDEL', KEYS[1], unpack(fields))
  redis.call('HDEL', KEYS[2], unpack(fields))
end

local expired = 0
local old = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. (now - win * 3600), 'LIMIT', 0, 64)
if #old > 0 then
  drop(old)
  redis.call('ZREM', KEYS[3], unpack(old))
  expired = #old
end
local evicted = 0
local over = math.min(redis.call('ZCARD', KEYS[3]) - shardCap, 256)
if over > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[3], over)
  local fields = {}
  for j = 1, #popped, 2 do fields[#fields + 1] = popped[j] end
  drop(fields)
  evicted = #fields
end
for k = 1, 2 do
  if written[k] then redis.call('PEXPIRE', KEYS[k], ttl) end
end
redis.call('PEXPIRE', KEYS[3], ttl)
out[#out + 1] = evicted
out[#out + 1] = expired
return out
`)
