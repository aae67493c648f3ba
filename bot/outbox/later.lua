-- later.lua sets replies aside until a due time, out of the stream: each
-- is acknowledged in the stream (a reply taken from it) or removed from
-- the later set under its former member (a reply set aside before), and
-- added to the later set under its new member (the entry with its retry
-- state) with its due time as the score. The stream's finished head is
-- trimmed (after trim.lua), so a reply set aside for long pins nothing.
-- A reply of a peer under flood control is also kept in that peer's list,
-- oldest first; past the bound, the oldest are dropped from the set.
-- Repeating it changes nothing more: the acknowledgement, ZREM, ZADD and
-- the list's LSET are idempotent, and a member already listed is not
-- listed twice.
--
-- KEYS[1]  the outbox stream
-- KEYS[2]  the later set
-- KEYS[3]  its ages: each member scored by the Unix ms it was stored, for
--          the outbox's oldest reply (reading.lua)
-- KEYS[4…] the flooded peers' lists
-- ARGV[1]  the consumer group
-- ARGV[2]  the most replies kept per flooded peer
-- ARGV[3]  how long a flooded peer's list lives after its last change, in ms
-- ARGV[4…] six per reply: its stream id or "", its former member or "",
--          its new member, its due time in Unix ms, the index in KEYS of
--          its peer's list or 0, the Unix ms it was stored
--
-- Reply: {earliest due time in Unix ms or -1, dropped member, …}.
local acked = false
local dropped = {}
local bound = tonumber(ARGV[2])
for i = 4, #ARGV, 6 do
  local id, old, new, due, list = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4])
  if id ~= '' then
    redis.call('XACK', KEYS[1], ARGV[1], id)
    acked = true
  end
  if old ~= '' then
    redis.call('ZREM', KEYS[2], old)
    redis.call('ZREM', KEYS[3], old)
  end
  redis.call('ZADD', KEYS[2], due, new)
  redis.call('ZADD', KEYS[3], ARGV[i + 5], new)
  if list > 0 then
    local key = KEYS[list]
    local pos = old ~= '' and redis.call('LPOS', key, old)
    if pos then
      redis.call('LSET', key, pos, new)
    elseif not redis.call('LPOS', key, new) then
      redis.call('RPUSH', key, new)
    end
    redis.call('PEXPIRE', key, ARGV[3])
    while redis.call('LLEN', key) > bound do
      local oldest = redis.call('LPOP', key)
      redis.call('ZREM', KEYS[2], oldest)
      redis.call('ZREM', KEYS[3], oldest)
      dropped[#dropped + 1] = oldest
    end
  end
end
if acked then
  trim(KEYS[1], ARGV[1])
end
return earliest(KEYS[2], dropped)
