-- forget.lua removes replies set aside (later.lua) that are finished: VK
-- accepted or refused them for good. Repeating it changes nothing.
--
-- KEYS[1]  the later set
-- KEYS[2]  its ages (the Unix ms each reply was stored)
-- KEYS[3…] the flooded peers' lists
-- ARGV[…]  two per reply: its member, the index in KEYS of its peer's
--          list or 0
--
-- Reply: the earliest due time left in Unix ms, or -1.
for i = 1, #ARGV, 2 do
  redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('ZREM', KEYS[2], ARGV[i])
  local list = tonumber(ARGV[i + 1])
  if list > 0 then
    redis.call('LREM', KEYS[list], 1, ARGV[i])
  end
end
return earliest(KEYS[1])[1]
