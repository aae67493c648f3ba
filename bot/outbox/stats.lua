-- stats.lua reads an outbox stream's length and the id of its oldest entry
-- in one call.
--
-- KEYS[1]  the outbox stream
--
-- Reply: {length, oldest id or ""}.
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
local oldest = ''
if first then oldest = first[1] end
return {redis.call('XLEN', KEYS[1]), oldest}
