-- pace.lua keeps one VK token's pace for every instance that sends with
-- it: the time of the token's next call slot, the interval between slots
-- (lowered by error 6, recovering), and a pause (a captcha asked).
--
-- KEYS[1]  the token's pace hash: n (next slot, µs), i (interval, µs),
--          s (when the interval was last raised, µs), p (paused until, µs)
-- ARGV[1]  the operation: "wait" (take the next slot), "slow" (VK refused
--          a call for the pace), "pause" (no call before ARGV[5] µs from
--          now; the next wait after it probes), "resume" (the probe went
--          through)
-- ARGV[2]  the base interval, µs (1 s / VK_RATE, with the margin)
-- ARGV[3]  the longest interval, µs
-- ARGV[4]  the interval's half-life back towards the base, µs
-- ARGV[5]  the pause, µs: how long a captcha pauses the token, and how
--          long the others wait for a probe's answer
--
-- Reply: {wait µs, kind}: kind 0 is a slot (call after wait), 1 a slot for
-- the probe after a pause (call after wait, with one reply), 2 a pause
-- (no slot: ask again after wait). Other operations answer {0, 0}.
-- The clock is Redis's TIME, which every instance shares.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local key, op = KEYS[1], ARGV[1]
local base, most, half = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local h = redis.call('HMGET', key, 'n', 'i', 's', 'p')
local interval = tonumber(h[2]) or base
local since = tonumber(h[3]) or now
if interval > base then
  interval = base + (interval - base) * math.pow(0.5, (now - since) / half)
end
-- num writes a number of µs exactly (tostring would round it to 14 digits).
local function num(x)
  return string.format('%.0f', x)
end
local function keep()
  redis.call('PEXPIRE', key, 3600000)
end
if op == 'slow' then
  redis.call('HSET', key, 'i', num(math.min(interval * 2, most)), 's', num(now))
  keep()
  return {0, 0}
elseif op == 'pause' then
  redis.call('HSET', key, 'p', num(now + tonumber(ARGV[5])))
  keep()
  return {0, 0}
elseif op == 'resume' then
  redis.call('HDEL', key, 'p')
  return {0, 0}
end
local paused = tonumber(h[4])
local kind = 0
if paused then
  if now < paused then
    return {math.floor(paused - now), 2}
  end
  -- The pause is over: this caller probes; the others wait as if the
  -- probe failed, until it says otherwise (resume, or pause again).
  redis.call('HSET', key, 'p', num(now + tonumber(ARGV[5])))
  kind = 1
end
local slot = math.max(tonumber(h[1]) or now, now)
redis.call('HSET', key, 'n', num(slot + interval))
if interval > base then
  redis.call('HSET', key, 'i', num(interval), 's', num(now))
elseif h[2] or h[3] then
  redis.call('HDEL', key, 'i', 's')
end
keep()
return {math.floor(slot - now), kind}
