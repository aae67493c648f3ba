-- common.lua: prepended to every resource counter script.
--
-- KEYS[1] (K) is the counter's hash: n = name, c = consumption,
-- m = maximum consumption in the interval of u, u = Unix second of the last
-- acquire or release, and h:<holder> = what that holder holds. KEYS[2] (L)
-- is the lease set: member <holder>, score = the Redis TIME in milliseconds
-- at which the holder's holding expires unless renewed. Both keys carry the
-- same Redis Cluster hash tag. c is always the sum of the h: fields.
--
-- Every script reads the clock with TIME, drops the holdings whose lease
-- has ended (each as a release at its lease's end), and finally sets both
-- keys to expire at the first interval boundary after the counter can be
-- garbage: the last touch when c = 0, the last lease otherwise.
local K, L = KEYS[1], KEYS[2]
local t = redis.call('TIME')
local now = tonumber(t[1])
local now_ms = now * 1000 + math.floor(tonumber(t[2]) / 1000)

-- boundary returns the start of the interval of I seconds holding sec.
local function boundary(sec, I)
  return sec - (sec % I)
end

local function num(field)
  return tonumber(redis.call('HGET', K, field) or '0')
end

-- release takes n out of the counter as a release at Unix second sec.
local function release(n, sec, I)
  local c, m, u = num('c'), num('m'), num('u')
  if u < boundary(sec, I) then
    -- First touch of this interval: its maximum so far is what was held
    -- when it began.
    m = c
  end
  if sec > u then
    u = sec
  end
  redis.call('HSET', K, 'c', c - n, 'm', m, 'u', u)
end

-- purge drops every holding whose lease ended before now, and reports
-- whether the holding of self was one of them. With frees_first, each
-- holding's HDEL comes before the HSET of its release: a script whose
-- first write frees runs whole at maxmemory (Redis refuses a write that
-- may grow memory only as a script's first write: HDEL, ZREM, DEL and
-- EXPIREAT are never refused). Without it (an acquire), the HSET comes
-- first, so that an acquire at maxmemory is refused whole.
local function purge(I, self, frees_first)
  local gone = redis.call('ZRANGEBYSCORE', L, '-inf', '(' .. now_ms, 'WITHSCORES')
  local lost = false
  for i = 1, #gone, 2 do
    local holder = gone[i]
    local held = num('h:' .. holder)
    if frees_first then
      redis.call('HDEL', K, 'h:' .. holder)
    end
    release(held, math.floor(tonumber(gone[i + 1]) / 1000), I)
    if not frees_first then
      redis.call('HDEL', K, 'h:' .. holder)
    end
    if holder == self then
      lost = true
    end
  end
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', L, '-inf', '(' .. now_ms)
  end
  return lost
end

-- expire sets when K and L disappear: GC without a sweeper.
local function expire(I)
  local at = boundary(num('u'), I) + I
  local last = redis.call('ZRANGE', L, -1, -1, 'WITHSCORES')
  if num('c') > 0 and #last == 2 then
    at = boundary(math.floor(tonumber(last[2]) / 1000), I) + I
    redis.call('EXPIREAT', L, at)
  end
  redis.call('EXPIREAT', K, at)
end

-- born returns the birth of the store's data in the slot of the birth key
-- B (see birth.lua), writing it, backdate ms in the past, if missing.
local function born(B, backdate)
  local b = redis.call('GET', B)
  if b then
    return tonumber(b)
  end
  b = now_ms - backdate
  redis.call('SET', B, string.format('%d', b))
  return b
end
