-- Visit: record keys as seen now, drop expired keys, count what is left.
-- Runs after headroom.lua (headroom_full, headroom_growth).
--
-- KEYS[1]    the name's sorted set: member = key, score = last seen (Unix s)
-- ARGV[1]    timeout, whole seconds (>= 1)
-- ARGV[2]    now, Unix seconds; empty to use the server's TIME
-- ARGV[3]    the headroom percent to check the server's used_memory with
--            before the set is created or grows (see headroom.lua); "0":
--            no check
-- ARGV[4]    the most keys the set may hold after the visit; "0": no cap
-- ARGV[5..]  the keys, at least one; a key may repeat
--
-- Reply: {active, added}: the set's size after the visit, and how many
-- distinct keys were not active before it (a key is active while
-- last_seen + timeout >= now). Refused, changing nothing: nil for a new
-- name past the headroom, headroom_growth for a visit that would make the
-- set larger past it, {"KEYCAP", size} for one that would take it past the
-- cap on keys (size: the keys it would hold).
--
-- The first write is the ZADD, which Redis refuses under maxmemory, so
-- that a visit is refused whole then; the expired keys go after it.
local set = KEYS[1]
local exists = redis.call('EXISTS', set) == 1
if not exists and headroom_full(ARGV[3]) then
  return false
end
local timeout = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
if not now then
  now = tonumber(redis.call('TIME')[1])
end
local score = string.format('%d', now)
local cutoff = now - timeout -- a key last seen before it has expired

-- unpack is limited by Lua's C stack (8000 values in Redis): 2000 values
-- per call stays well under it.
local chunk = 2000

-- Newness is read before anything changes, once per distinct key: one
-- ZMSCORE per chunk of them, none for a new set.
local keys = {}
local seen_keys = {}
for i = 5, #ARGV do
  local key = ARGV[i]
  if not seen_keys[key] then
    seen_keys[key] = true
    keys[#keys + 1] = key
  end
end
local added = 0
local fresh = 0   -- keys not in the set: each takes a member
local revived = 0 -- keys in the set but expired: the ZADD keeps them
local zadd = {} -- score, member, score, member, ...
for i = 1, #keys, chunk do
  local last = math.min(i + chunk - 1, #keys)
  local scores = {}
  if exists then scores = redis.call('ZMSCORE', set, unpack(keys, i, last)) end
  for j = i, last do
    local seen = scores[j - i + 1]
    if not seen then
      fresh = fresh + 1
      added = added + 1
    elseif tonumber(seen) < cutoff then
      revived = revived + 1
      added = added + 1
    end
    zadd[#zadd + 1] = score
    zadd[#zadd + 1] = keys[j]
  end
end

local max_keys = tonumber(ARGV[4])
if fresh > 0 and (max_keys > 0 or ARGV[3] ~= '0') then
  local size = 0
  if exists then
    local expired = redis.call('ZCOUNT', set, '-inf', '(' .. string.format('%d', cutoff))
    size = redis.call('ZCARD', set) - (expired - revived)
  end
  local after = size + fresh
  if max_keys > 0 and after > max_keys then
    return {'KEYCAP', after}
  end
  if exists and after > redis.call('ZCARD', set) and headroom_full(ARGV[3]) then
    return headroom_growth
  end
end

-- 1000 members (2000 values) per ZADD.
for i = 1, #zadd, chunk do
  redis.call('ZADD', set, unpack(zadd, i, math.min(i + chunk - 1, #zadd)))
end
redis.call('ZREMRANGEBYSCORE', set, '-inf', '(' .. string.format('%d', cutoff))
-- Every entry left expires within timeout + 1 seconds of this write.
redis.call('EXPIRE', set, timeout + 1)
return {redis.call('ZCARD', set), added}
