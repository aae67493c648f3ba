-- release.lua: Release for one holder.
-- ARGV: holder, resources, interval s.
-- Reply: 1 released, -1 no such counter, -2 the holder holds fewer than
-- resources (or none), -3 the holder's holding had expired (lease lost).
local holder, res, I = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if redis.call('EXISTS', K) == 0 then
  return -1
end
if purge(I, holder) then
  expire(I)
  return -3
end
local held = num('h:' .. holder)
if held == 0 or res > held then
  expire(I)
  return -2
end
release(res, now, I)
if held == res then
  redis.call('HDEL', K, 'h:' .. holder)
  redis.call('ZREM', L, holder)
elseif res > 0 then
  -- (Lua writes -0 for a release of 0, which Redis refuses as a number.)
  redis.call('HINCRBY', K, 'h:' .. holder, -res)
end
expire(I)
return 1
