-- Visit: record a key as seen now, drop expired keys, count what is left.
--
-- KEYS[1]  the name's sorted set: member = key, score = last seen (Unix s)
-- ARGV[1]  key
-- ARGV[2]  timeout, whole seconds (>= 1)
-- ARGV[3]  now, Unix seconds; empty to use the server's TIME
--
-- Reply: {active, is_new}: the set's size after the visit, and 1 if key
-- was not active before it (a key is active while last_seen + timeout >= now).
local set = KEYS[1]
local key = ARGV[1]
local timeout = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
if not now then
  now = tonumber(redis.call('TIME')[1])
end

local is_new = 1
local seen = redis.call('ZSCORE', set, key)
if seen and tonumber(seen) + timeout >= now then
  is_new = 0
end
redis.call('ZREMRANGEBYSCORE', set, '-inf', '(' .. string.format('%d', now - timeout))
redis.call('ZADD', set, string.format('%d', now), key)
-- Every entry left expires within timeout + 1 seconds of this write.
redis.call('EXPIRE', set, timeout + 1)
return {redis.call('ZCARD', set), is_new}
