-- recover.lua hands a consumer the entries pending under its own name that
-- it does not hold and that have been idle for at least a given time:
-- entries Redis delivered to it whose answer never arrived (a connection
-- cut mid-reply). Younger ones may belong to a read of the same consumer
-- still under way, and are left to it. XCLAIM, by the consumer itself,
-- marks those handed out as delivered now, so a second recovery running
-- at the same time finds them young. The entries the consumer holds are
-- not touched: their idle time goes on growing, so that other consumers
-- take them over if it stays stuck with them.
--
-- KEYS[1]  the outbox stream
-- ARGV[1]  the consumer group
-- ARGV[2]  the consumer
-- ARGV[3]  the least idle time of an entry handed out, in milliseconds
-- ARGV[4]  the most pending entries to look at, oldest first
-- ARGV[5]  the most entries to hand out
-- ARGV[6…] the ids of the entries the consumer holds
--
-- Reply: {left, entry, …}: left is 1 when entries may be left to hand out
-- (younger ones, more than ARGV[5], or more pending than looked at), else
-- 0; then the entries handed out, each as XCLAIM returns it ({id, {field,
-- value, …}}). An error NOGROUP when the stream or its group is gone.
local pending = redis.pcall('XPENDING', KEYS[1], ARGV[1], '-', '+', ARGV[4], ARGV[2])
if pending.err then
  return redis.error_reply(pending.err)
end
local held = {}
for i = 6, #ARGV do
  held[ARGV[i]] = true
end
local minIdle, most = tonumber(ARGV[3]), tonumber(ARGV[5])
local left = 0
if #pending >= tonumber(ARGV[4]) then
  left = 1
end
local old = {}
for _, p in ipairs(pending) do
  if held[p[1]] then
    -- being sent by the consumer
  elseif p[3] < minIdle or #old >= most then
    left = 1
  else
    old[#old + 1] = p[1]
  end
end
local out = {left}
if #old > 0 then
  for _, e in ipairs(redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], unpack(old))) do
    out[#out + 1] = e
  end
end
return out
