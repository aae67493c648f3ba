-- add.lua appends one reply to a community's outbox stream unless the
-- stream already holds the maximum, so a backlog cannot grow without bound.
--
-- KEYS[1]  the outbox stream
-- ARGV[1]  the most entries the stream may hold
-- ARGV[2…] the entry's field/value pairs
--
-- Reply: the new entry id, or the error "OUTBOX_FULL <length>".
local len = redis.call('XLEN', KEYS[1])
if len >= tonumber(ARGV[1]) then
  return redis.error_reply('OUTBOX_FULL ' .. len)
end
return redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2))
