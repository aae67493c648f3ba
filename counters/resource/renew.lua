-- renew.lua: extend the leases of the given holders of the counter to
-- now + lease. A holder whose holding is gone (expired, or never there) is
-- not brought back. Running it twice is harmless.
-- ARGV: lease ms, interval s, holder...
-- Reply: the holders whose holding is gone.
--
-- Two commands per chunk of holders, whatever their number (ZMSCORE and
-- ZADD XX GT, Redis 6.2 and later): a counter held by hundreds of
-- connections renews in one step, not one command pair per holder.
--
-- A renewal succeeds at maxmemory (a holding kept alive grows nothing):
-- its first write is an EXPIREAT (or purge's HDEL), which Redis never
-- refuses, and Redis refuses a write that may grow memory (the ZADD) only
-- as a script's first write.
local lease, I = tonumber(ARGV[1]), tonumber(ARGV[2])
local lost = {}
if redis.call('EXISTS', K) == 0 then
  for i = 3, #ARGV do
    lost[#lost + 1] = ARGV[i]
  end
  return lost
end
purge(I, '', true)
expire(I)
local deadline = now_ms + lease
-- Chunks keep unpack within Lua's stack.
local chunk = 1000
for first = 3, #ARGV, chunk do
  local last = math.min(first + chunk - 1, #ARGV)
  local holders, pairs = {}, {}
  for i = first, last do
    holders[#holders + 1] = ARGV[i]
    pairs[#pairs + 1] = deadline
    pairs[#pairs + 1] = ARGV[i]
  end
  local scores = redis.call('ZMSCORE', L, unpack(holders))
  for i, s in ipairs(scores) do
    if not s then
      lost[#lost + 1] = holders[i]
    end
  end
  -- XX: only the holdings that exist; GT: a deadline only moves later.
  redis.call('ZADD', L, 'XX', 'GT', unpack(pairs))
end
expire(I)
return lost
