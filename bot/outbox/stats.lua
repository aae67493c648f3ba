-- stats.lua reads an outbox stream's length and the id of its oldest entry
-- in one call (after reading.lua).
--
-- KEYS[1]  the outbox stream
--
-- Reply: {length, oldest id or ""}.
return reading(KEYS[1])
