-- layout.lua notes when the compact layout began in this Redis: the first
-- Load of a Store writes Redis's clock to the marker, and every Load reads
-- it. Until the former layout's keys have all expired since (see
-- Store.Load), the counting scripts read them.
--
-- KEYS[1]  the marker: the unix second the layout began, without a TTL
--
-- Reply: the marker's second, an integer.
redis.call('SET', KEYS[1], redis.call('TIME')[1], 'NX')
return tonumber(redis.call('GET', KEYS[1])) or -1
