-- drop.lua: release everything the given holders hold of the counter
-- (their connections closed). Running it twice is harmless. It succeeds
-- at maxmemory: its first write frees (purge's HDEL or a holding's own),
-- as release.lua's does.
-- ARGV: interval s, holder...
-- Reply: the resources released.
local I = tonumber(ARGV[1])
if redis.call('EXISTS', K) == 0 then
  return 0
end
purge(I, '', true)
local released = 0
for i = 2, #ARGV do
  local holder = ARGV[i]
  local held = num('h:' .. holder)
  if held > 0 then
    redis.call('HDEL', K, 'h:' .. holder)
    released = released + held
  end
end
-- Chunks keep unpack within Lua's stack.
for first = 2, #ARGV, 1000 do
  redis.call('ZREM', L, unpack(ARGV, first, math.min(first + 999, #ARGV)))
end
if released > 0 then
  release(released, now, I)
end
expire(I)
return released
