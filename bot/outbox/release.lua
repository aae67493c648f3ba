-- release.lua hands entries a consumer took back to the outbox, for any
-- consumer to read at once: each one still pending under the consumer is
-- added again as a new entry with the same fields, then acknowledged; the
-- finished entries at the head of the stream are removed (after
-- trim.lua). An entry the consumer no longer holds (another took it over,
-- or it was sent and acknowledged) is left as it is. Running it again
-- changes nothing more: what it released is no longer pending under the
-- consumer.
--
-- KEYS[1]  the outbox stream
-- ARGV[1]  the consumer group
-- ARGV[2]  the consumer
-- ARGV[3]  the most entries to release when no ids follow
-- ARGV[4…] the entries to release; none means every entry pending under
--          the consumer (up to ARGV[3], oldest first)
--
-- Reply: {released, looked at}: how many entries were added again, and
-- how many pending entries were looked at.
local ids = {}
local check = redis.pcall('XPENDING', KEYS[1], ARGV[1])
if check.err then
  return redis.error_reply(check.err) -- NOGROUP: the stream was lost
end
if #ARGV > 3 then
  for i = 4, #ARGV do
    if redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1, ARGV[2])[1] then
      ids[#ids + 1] = ARGV[i]
    end
  end
else
  for _, p in ipairs(redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', ARGV[3], ARGV[2])) do
    ids[#ids + 1] = p[1]
  end
end
local released = 0
for _, id in ipairs(ids) do
  local e = redis.call('XRANGE', KEYS[1], id, id)[1]
  if e then
    redis.call('XADD', KEYS[1], '*', unpack(e[2]))
    released = released + 1
  end
  redis.call('XACK', KEYS[1], ARGV[1], id)
end
if #ids > 0 then
  trim(KEYS[1], ARGV[1])
end
return {released, #ids}
