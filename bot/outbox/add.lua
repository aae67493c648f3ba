-- add.lua appends one reply to a community's outbox stream, once per
-- message, unless the stream already holds the maximum, so a backlog cannot
-- grow without bound.
--
-- KEYS[1]  the outbox stream
-- KEYS[2]  optional: the reply's once-key, present while a reply to the same
--          message was added within ARGV[2] ms; it holds that entry's id
-- ARGV[1]  the most entries the stream may hold
-- ARGV[2]  how long the once-key lives, in milliseconds
-- ARGV[3…] the entry's field/value pairs
--
-- Reply: {id, 1} for a new entry, {id, 0} when the message's reply was
-- added already (nothing changes), or the error "OUTBOX_FULL <length>".
local once = KEYS[2]
if once then
  local id = redis.call('GET', once)
  if id then
    return {id, 0}
  end
end
local len = redis.call('XLEN', KEYS[1])
if len >= tonumber(ARGV[1]) then
  return redis.error_reply('OUTBOX_FULL ' .. len)
end
local id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 3))
if once then
  redis.call('SET', once, id, 'PX', ARGV[2])
end
return {id, 1}
