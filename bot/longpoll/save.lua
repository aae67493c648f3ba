-- Save a community's ts if the caller holds the lease.
-- KEYS[1] the lease, KEYS[2] the ts; ARGV[1] the owner, ARGV[2] the ts.
-- Returns 1 if saved, 0 if another owner (or nobody) holds the lease.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2])
return 1
