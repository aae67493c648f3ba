-- done.lua acknowledges and deletes entries of an outbox stream in one
-- call: the replies VK accepted or refused for good. Repeating it changes
-- nothing.
--
-- KEYS[1]  the outbox stream
-- ARGV[1]  the consumer group
-- ARGV[2…] the entry ids
redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 2))
redis.call('XDEL', KEYS[1], unpack(ARGV, 2))
return 0
