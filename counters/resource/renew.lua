-- renew.lua: extend the leases of the given holders of the counter to
-- now + lease. A holder whose holding is gone (expired, or never there) is
-- not brought back. Running it twice is harmless.
-- ARGV: lease ms, interval s, holder...
-- Reply: the holders whose holding is gone.
local lease, I = tonumber(ARGV[1]), tonumber(ARGV[2])
local lost = {}
if redis.call('EXISTS', K) == 0 then
  for i = 3, #ARGV do
    lost[#lost + 1] = ARGV[i]
  end
  return lost
end
purge(I, '')
local deadline = now_ms + lease
for i = 3, #ARGV do
  local old = redis.call('ZSCORE', L, ARGV[i])
  if not old then
    lost[#lost + 1] = ARGV[i]
  elseif tonumber(old) < deadline then
    redis.call('ZADD', L, deadline, ARGV[i])
  end
end
expire(I)
return lost
