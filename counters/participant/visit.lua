-- Visit: record keys as seen now, drop expired keys, count what is left.
--
-- KEYS[1]    the name's sorted set: member = key, score = last seen (Unix s)
-- ARGV[1]    timeout, whole seconds (>= 1)
-- ARGV[2]    now, Unix seconds; empty to use the server's TIME
-- ARGV[3]    "1" to refuse a new name: a set that does not exist
-- ARGV[4..]  the keys, at least one; a key may repeat
--
-- Reply: {active, added}: the set's size after the visit, and how many
-- distinct keys were not active before it (a key is active while
-- last_seen + timeout >= now); nil, changing nothing, for a new name
-- refused.
local set = KEYS[1]
if ARGV[3] == '1' and redis.call('EXISTS', set) == 0 then
  return false
end
local timeout = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
if not now then
  now = tonumber(redis.call('TIME')[1])
end
local score = string.format('%d', now)

-- Newness is read before anything changes, once per distinct key.
local added = 0
local seen_keys = {}
local zadd = {} -- score, member, score, member, ...
for i = 4, #ARGV do
  local key = ARGV[i]
  if not seen_keys[key] then
    seen_keys[key] = true
    local seen = redis.call('ZSCORE', set, key)
    if not (seen and tonumber(seen) + timeout >= now) then
      added = added + 1
    end
    zadd[#zadd + 1] = score
    zadd[#zadd + 1] = key
  end
end

redis.call('ZREMRANGEBYSCORE', set, '-inf', '(' .. string.format('%d', now - timeout))
-- unpack is limited by Lua's C stack (8000 values in Redis): 1000
-- members (2000 values) per ZADD stays well under it.
local chunk = 2000
for i = 1, #zadd, chunk do
  redis.call('ZADD', set, unpack(zadd, i, math.min(i + chunk - 1, #zadd)))
end
-- Every entry left expires within timeout + 1 seconds of this write.
redis.call('EXPIRE', set, timeout + 1)
return {redis.call('ZCARD', set), added}
