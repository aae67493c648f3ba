-- acquire.lua: Acquire for one holder.
-- KEYS[3] (B): the birth of the store's data in this slot (see birth.lua).
-- ARGV: holder, resources, maximum, interval s, lease ms, name, backdate
-- ms (see birth.lua), and the headroom percent to check the server's
-- used_memory with before a new counter is created (see headroom.lua; "0":
-- no check).
-- Reply: {status, created, before}: status 1 acquired, 0 not available,
-- -1 the holder's earlier holding of this counter had expired (its lease
-- was lost; nothing acquired), -2 not available because the store's data
-- in this slot is younger than one lease (Redis lost it: see birth.lua;
-- a fourth element then says in how many ms acquires are granted again),
-- -3 a new counter, or a new holding of one that exists, refused past the
-- headroom (nothing changed);
-- created 1 when this call created the counter; before what the holder
-- held of it before the call (0 when its holding had expired, whichever
-- script dropped it), so that the instance can tell when Redis holds less
-- for the holder than it believes.
--
-- The first write is one that Redis refuses under maxmemory, so that an
-- acquire is refused whole then: the new counter's HSET (before the DEL
-- of a stale lease set), purge's release (an HSET before its HDEL), or
-- the acquire's own HSET; a refusal by the maximum writes only expiries.
local holder, res, max = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local I, lease, name = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local birth = born(KEYS[3], tonumber(ARGV[7]))
if birth > now_ms - lease then
  -- Checked before anything else, so that a refusal writes no counter.
  return {-2, 0, num('h:' .. holder), birth + lease - now_ms}
end
local created = 0
if redis.call('EXISTS', K) == 0 then
  if headroom_full(ARGV[8]) then
    return {-3, 0, 0}
  end
  redis.call('HSET', K, 'n', name, 'c', 0, 'm', 0, 'u', now)
  redis.call('DEL', L)
  created = 1
elseif purge(I, holder, false) then
  expire(I)
  return {-1, 0, 0}
elseif redis.call('HEXISTS', K, 'h:' .. holder) == 0 and headroom_full(ARGV[8]) then
  -- A new holding grows Redis (a hash field and a lease member) as a new
  -- counter does. Checked after purge, which may have freed some.
  expire(I)
  return {-3, 0, 0}
end
local before = num('h:' .. holder)
local c, m, u = num('c'), num('m'), num('u')
local sum = c + res
if sum > max then
  -- Only an existing counter can refuse: a new one starts at 0 and
  -- resources <= maximum.
  expire(I)
  return {0, 0, before}
end
if u < boundary(now, I) then
  m = sum
elseif sum > m then
  m = sum
end
redis.call('HSET', K, 'c', sum, 'm', m, 'u', now)
redis.call('HINCRBY', K, 'h:' .. holder, res)
local deadline = now_ms + lease
local old = redis.call('ZSCORE', L, holder)
if old and tonumber(old) > deadline then
  deadline = tonumber(old)
end
redis.call('ZADD', L, deadline, holder)
expire(I)
return {1, created, before}
