-- prune.lua removes the consumers of a consumer group that hold nothing
-- and have been idle longer than a limit: every process start joins the
-- group under a new name, and without this the names pile up forever. A
-- consumer holding entries is never removed (that would lose them), and
-- one removed while alive is recreated by its next read.
--
-- KEYS[1]  the outbox stream
-- ARGV[1]  the consumer group
-- ARGV[2]  the idle limit in milliseconds
-- ARGV[3]  a consumer never removed (the caller's own)
--
-- Reply: the number of consumers removed.
local removed = 0
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local f = {}
  for i = 1, #c, 2 do f[c[i]] = c[i + 1] end
  if f['name'] ~= ARGV[3] and tonumber(f['pending']) == 0 and tonumber(f['idle']) > tonumber(ARGV[2]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], f['name'])
    removed = removed + 1
  end
end
return removed
