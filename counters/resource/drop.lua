-- drop.lua: release everything one holder holds of the counter (its
-- connection closed). Running it twice is harmless.
-- ARGV: holder, interval s.
-- Reply: the resources released.
local holder, I = ARGV[1], tonumber(ARGV[2])
if redis.call('EXISTS', K) == 0 then
  return 0
end
purge(I, holder)
local held = num('h:' .. holder)
if held > 0 then
  release(held, now, I)
  redis.call('HDEL', K, 'h:' .. holder)
end
redis.call('ZREM', L, holder)
expire(I)
return held
