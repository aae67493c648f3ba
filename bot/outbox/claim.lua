-- claim.lua is a step of a takeover: it hands a consumer the entries of the
-- outbox stream idle for at least a given time, whoever they are pending
-- under (its own name too: an entry whose read was lost without a failure
-- anybody saw), from a cursor on (XAUTOCLAIM), and reads the later set's
-- earliest due time in the same call: for an idle sender, the takeover of
-- a dead instance's replies and the look for the replies another instance
-- set aside are one command.
--
-- KEYS[1]  the outbox stream
-- KEYS[2]  the community's later set
-- ARGV[1]  the consumer group
-- ARGV[2]  the consumer
-- ARGV[3]  the least idle time of an entry taken over, in milliseconds
-- ARGV[4]  the cursor to start from ('0-0' at a takeover's start)
-- ARGV[5]  the most entries to take over
--
-- Reply: {cursor, earliest, entry, …}: the cursor where the next step
-- starts ('0-0' when the stream was looked at to its end); the later set's
-- earliest due time in Unix ms, or '-1' when it is empty; then the entries
-- taken over as XAUTOCLAIM returns them ({id, {field, value, …}}; Redis
-- before 7 gives false for an entry deleted meanwhile). An error NOGROUP
-- when the stream or its group is gone.
local claimed = redis.pcall('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], 'COUNT', ARGV[5])
if claimed.err then
  return redis.error_reply(claimed.err)
end
local out = earliest(KEYS[2], claimed[2])
table.insert(out, 1, claimed[1])
return out
