-- reading.lua is the library stats.lua and done.lua share: what /stats and
-- /metrics show of an outbox.

-- reading returns how many replies the outbox holds, in the stream and set
-- aside (later.lua), and when the oldest of them was stored: the id of the
-- stream's oldest entry, or the Unix ms of the oldest reply set aside when
-- that is older ("" if none). A reply set aside leaves the stream, so
-- without the later set a reply VK keeps refusing would look fresh. len is
-- the stream's length when the caller knows it (nil: read with XLEN), and
-- first the id of its first entry (nil: read with XRANGE), as trim
-- returns them.
local function reading(stream, later, age, len, first)
  local oldest = first
  if not oldest then
    local e = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)[1]
    oldest = e and e[1] or ''
  end
  local aside = redis.call('ZCARD', later)
  if aside > 0 then
    local o = redis.call('ZRANGE', age, 0, 0, 'WITHSCORES')[2]
    if o and (oldest == '' or tonumber(o) < tonumber(string.match(oldest, '^%d+'))) then
      oldest = o
    end
  end
  return {(len or redis.call('XLEN', stream)) + aside, oldest}
end
