-- Active: count the keys seen within the timeout. Changes nothing.
--
-- KEYS[1]  the name's sorted set
-- ARGV[1]  timeout, whole seconds (>= 1)
-- ARGV[2]  now, Unix seconds; empty to use the server's TIME
--
-- Reply: the number of keys with last_seen >= now - timeout.
local timeout = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
if not now then
  now = tonumber(redis.call('TIME')[1])
end
return redis.call('ZCOUNT', KEYS[1], string.format('%d', now - timeout), '+inf')
