-- reading.lua is the library stats.lua and done.lua share: what /stats and
-- /metrics show of an outbox stream.

-- reading returns the stream's length and the id of its oldest entry ("" if
-- none).
local function reading(key)
  local first = redis.call('XRANGE', key, '-', '+', 'COUNT', 1)[1]
  local oldest = ''
  if first then oldest = first[1] end
  return {redis.call('XLEN', key), oldest}
end
