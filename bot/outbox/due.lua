-- due.lua hands out the replies set aside (later.lua) whose due time has
-- come, oldest due first: each gets a new due time, when it comes due
-- again unless the sender finishes or sets it aside meanwhile, so that no
-- other call hands it out while it is being sent, and another instance
-- takes it over if this one dies with it.
--
-- KEYS[1]  the later set
-- ARGV[1]  now, in Unix ms
-- ARGV[2]  the most replies to hand out
-- ARGV[3]  their new due time, in Unix ms
--
-- Reply: {earliest due time left in Unix ms or -1, member, …}.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, m in ipairs(due) do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[3], m)
end
return earliest(KEYS[1], due)
