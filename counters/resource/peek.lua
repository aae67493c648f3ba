-- peek.lua: a counter's state for Get and Dump (after dropping expired
-- holdings, which is harmless to repeat).
-- ARGV: interval s.
-- Reply: false if there is no such counter, else {name, consumption,
-- maximum consumption in the current interval}.
local I = tonumber(ARGV[1])
if redis.call('EXISTS', K) == 0 then
  return false
end
purge(I, '', true)
expire(I)
if redis.call('EXISTS', K) == 0 then
  return false
end
local c, m = num('c'), num('m')
if num('u') < boundary(now, I) then
  m = c
end
return {redis.call('HGET', K, 'n'), c, m}
