-- done.lua acknowledges entries of an outbox stream in one call, the
-- replies VK accepted or refused for good, and removes the finished
-- entries at the head of the stream (after trim.lua). Repeating it changes
-- nothing. It answers with the stream's reading (after reading.lua), so the
-- figures /stats shows follow the sends without a call of their own.
--
-- KEYS[1]  the outbox stream
-- KEYS[2]  its later set
-- KEYS[3]  its later set's ages
-- ARGV[1]  the consumer group
-- ARGV[2…] the entry ids
--
-- Reply: {length, oldest id or ""}, as stats.lua.
redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 2))
return reading(KEYS[1], KEYS[2], KEYS[3], trim(KEYS[1], ARGV[1]))
