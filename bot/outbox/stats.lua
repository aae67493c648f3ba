-- stats.lua reads how many replies an outbox holds and when the oldest was stored
-- in one call (after reading.lua).
--
-- KEYS[1]  the outbox stream
-- KEYS[2]  its later set
-- KEYS[3]  its later set's ages (the Unix ms each reply was stored)
--
-- Reply: {length, oldest id or ""}.
return reading(KEYS[1], KEYS[2], KEYS[3])
