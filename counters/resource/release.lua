-- release.lua: Release for one holder.
-- ARGV: holder, resources, interval s.
-- Reply: 1 released, -1 no such counter, -2 the holder holds fewer than
-- resources (or none), -3 the holder's holding had expired (lease lost).
--
-- A release succeeds at maxmemory: its first write frees (purge's HDEL,
-- or the holding's own HDEL before anything is set), and Redis refuses a
-- write that may grow memory only as a script's first write.
local holder, res, I = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if redis.call('EXISTS', K) == 0 then
  return -1
end
if purge(I, holder, true) then
  expire(I)
  return -3
end
local held = num('h:' .. holder)
if held == 0 or res > held then
  expire(I)
  return -2
end
redis.call('HDEL', K, 'h:' .. holder)
if held == res then
  redis.call('ZREM', L, holder)
else
  redis.call('HSET', K, 'h:' .. holder, held - res)
end
release(res, now, I)
expire(I)
return 1
