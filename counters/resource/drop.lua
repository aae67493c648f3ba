-- drop.lua: release everything one holder holds of the counter (its
-- connection closed). Running it twice is harmless. It succeeds at
-- maxmemory: its first write frees (purge's HDEL or the holding's own),
-- as release.lua's does.
-- ARGV: holder, interval s.
-- Reply: the resources released.
local holder, I = ARGV[1], tonumber(ARGV[2])
if redis.call('EXISTS', K) == 0 then
  return 0
end
purge(I, holder, true)
local held = num('h:' .. holder)
redis.call('HDEL', K, 'h:' .. holder)
redis.call('ZREM', L, holder)
if held > 0 then
  release(held, now, I)
end
expire(I)
return held
