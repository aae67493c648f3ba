-- Take or renew the lease of a community's poller.
-- KEYS[1] the lease; ARGV[1] the owner; ARGV[2] its time to live in ms.
-- Returns 1 if ARGV[1] holds the lease now, 0 if another owner does.
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
