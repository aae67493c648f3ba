-- Leave: forget a key and count what is left.
--
-- KEYS[1]  the name's sorted set
-- ARGV[1]  key
--
-- Reply: {active, removed}: the set's size after the call, and 1 if key
-- was in the set.
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
return {redis.call('ZCARD', KEYS[1]), removed}
