-- Give up a community's lease if the caller holds it.
-- KEYS[1] the lease; ARGV[1] the owner. Returns 1 if released.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
