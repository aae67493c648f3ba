-- text.lua is the layout of freq.Store's texts and the functions that count
-- in it. The Go code puts it in front of every script of the package that
-- reads or counts a text (count.lua, record.lua, seen.lua); it is not a
-- script by itself.
--
-- A text is in one of two places, never both:
--   * while it occurred once in the window (or its occurrences left it):
--     a field of its bucket, a hash shared by the texts whose digests
--     begin with the same bits (keys.go): the field is the last 9 bytes of
--     the text's key name, its value the second. Redis keeps a hash of up
--     to hash-max-listpack-entries fields (512) as one listpack, about 17
--     bytes a text, where a key of its own costs about 140;
--   * from the second occurrence: the text's own key, a list of integers
--     [total, tail, head, e...]: how many occurrences it holds, the newest
--     second, the oldest second (one occurrence there), then an entry per
--     step: a positive d is one occurrence d seconds after the second
--     before it, a negative -k is k more occurrences at the second before
--     it. Redis stores a small integer in 2 bytes, so a text seen every
--     second of a day costs about 175 KB. When every occurrence of the
--     list left the window, the next one deletes it and starts the text
--     anew in its bucket.
-- Every read compares the stored seconds with the window, never a TTL, so
-- the window is exact to the second. The list expires a margin after its
-- newest occurrence left the window: its TTL is set when the key is
-- written anew, and moved on only when the newest second enters a new
-- margin-long step (see refresh), not on every occurrence. A bucket also
-- holds two fields of its own: 'o', a second no later than its oldest
-- text's, and 'e', the slack-long step (below) its TTL was last set in:
-- moved on only when a write is in a new step, to the window, a margin
-- and a slack, so it outlasts its newest text by the window and a margin
-- (a bucket is written hours apart on a day of 20,000 texts: a
-- margin-long step, as a list's, cost an EXPIRE on every write); a write
-- that finds 'o' a quarter of the window past the window (6 hours of a
-- day), the slack, drops the bucket's expired texts (purge), so a
-- bucket holds no text that left the window more than that before its
-- latest write, and is purged at most once in that time. A quarter,
-- not a 24th (an hour): at 20,000 texts a day a bucket is written every
-- 2.5 hours, and a 24th purged on 42 % of the writes, 25 % at 100,000,
-- making Redis's CPU per message on a steady day 17-37 % dearer than on
-- the first; a quarter purges on 23 % and 7 %, the buckets holding 23 %
-- and 16 % more texts than the window's, not 13 % and 4 % (BENCHMARKS.md,
-- "The buckets' steady state").

-- digits returns the decimal string of the integer n, to hand to
-- redis.call. Redis 7.0 formats a number argument with "%.17g" (a tenth of
-- the record script's CPU when each message's values were), and tostring
-- with "%.14g": both go through the C library's floating-point printing,
-- two to three times the cost of "%d" (BENCHMARKS.md, "Numbers written as
-- digits"). The integers written on every message go through it; those of
-- the rare writes (expiries, a bucket's own fields, a sequence's block)
-- are left as numbers.
local function digits(n)
  return string.format('%d', n)
end

-- The numbers a caller always gives as digits (the window, a TTL, the
-- margin, a period, the clock; reply.lua's stream maximum, sequence start
-- and mark) are read with "+ 0", not tonumber: Lua 5.1's tonumber parses a
-- string twice (lua_isnumber, then lua_tonumber), each time with the C
-- library's strtod, 5 % of the record script's instructions (BENCHMARKS.md,
-- "Instructions, not microseconds"). What is read from Redis keeps
-- tonumber, which gives nil for a value no script of the layout wrote,
-- where "+ 0" would fail the script.

-- clock returns the unix second at, or Redis's clock when at is "", as a
-- number and as the string it was read from, which the scripts write
-- where a second is the clock's (see digits).
local function clock(at)
  if at == '' then at = redis.call('TIME')[1] end
  return at + 0, at
end

-- count_at returns the second an occurrence at clk (clks: the same as a
-- string, see clock) is counted at in a text whose newest second is sec,
-- as a number and a string: clk, or sec when the clock is behind it (a
-- failover to a replica whose clock lags), so that the text's seconds stay
-- in order. One call where math.max and a choice of string took two.
local function count_at(clk, clks, sec)
  if sec > clk then return sec, digits(sec) end
  return clk, clks
end

-- period returns, of a pair of hashes that hold what happened in periods of
-- span seconds by turns (even, odd), the one of the period of clk, the
-- other one (the period before), and the TTL the first gets when it is
-- new: to the end of the next period, so that what it holds is remembered
-- between one and two periods.
local function period(even, odd, span, clk)
  local b = math.floor(clk / span)
  local ttl = (b + 2) * span - clk
  if b % 2 == 0 then return even, odd, ttl end
  return odd, even, ttl
end

-- text returns a call's text c: its key, its bucket, its field there (the
-- key name's last 9 bytes: keys.go's textHashBytes), the window and, to
-- write, a new list's TTL and the margin, in seconds; slack is how long
-- past the window the bucket's oldest text waits for a purge.
local function text(key, hash, window, ttl, margin)
  return {key = key, bucket = hash, field = string.sub(key, -9), window = window, ttl = ttl, margin = margin,
    slack = math.max(1, math.floor(window / 4))}
end

-- bucket reads the text's bucket into st: sec, the text's second there
-- (nil when it has no field), o and e, the bucket's own fields (nil for a
-- new bucket), and bad: the bucket is not a hash (only a foreign write
-- makes one; replaced when written). It returns st.
local function bucket(c, st)
  local b = redis.pcall('HMGET', c.bucket, c.field, 'o', 'e')
  st.bad = b.err ~= nil
  if st.bad then b = {false, false, false} end
  st.sec, st.o, st.e = tonumber(b[1]), tonumber(b[2]), tonumber(b[3])
  return st
end

-- find reads the text's key, and its bucket unless the key is a list
-- (bucket), and returns its state {typ, sec, o, e, bad, stale}: typ is
-- 'list' (any type GET refuses: one command as for the other forms;
-- add_list finds a foreign type), 'bucket' (sec its second there), 'none',
-- or 'foreign' (a value no script of the layout wrote at the key, replaced
-- when counted; stale when the text is in its bucket too).
local function find(c)
  local v = redis.pcall('GET', c.key)
  if type(v) == 'table' and v.err then return {typ = 'list'} end
  -- The fields bucket fills in are listed (see reply_args in reply.lua).
  local st = bucket(c, {typ = 'none', stale = v and true, bad = nil, sec = nil, o = nil, e = nil})
  if st.sec then
    st.typ = 'bucket'
  elseif v then
    st.typ = 'foreign'
  end
  return st
end

-- purge drops the bucket's texts whose second left the window at clk and
-- returns the oldest second of the others (nil for none).
local function purge(c, clk)
  local cutoff = clk - c.window
  local all = redis.call('HGETALL', c.bucket)
  local gone, oldest = {}, nil
  for i = 1, #all, 2 do
    local f = all[i]
    if f ~= 'o' and f ~= 'e' then
      local sec = tonumber(all[i + 1])
      if not sec or sec <= cutoff then
        gone[#gone + 1] = f
      elseif not oldest or sec < oldest then
        oldest = sec
      end
    end
  end
  for i = 1, #gone, 1000 do
    redis.call('HDEL', c.bucket, unpack(gone, i, math.min(i + 999, #gone)))
  end
  return oldest
end

-- add_bucket writes the text's field at clk (clks: the same as a string,
-- see clock) into its bucket (st from find), purging the bucket first when
-- its oldest second is a slack past the window, and moves the bucket's TTL
-- on when clk is in a new step.
local function add_bucket(c, st, clk, clks)
  local o, e = st.o, st.e
  if st.bad then
    redis.call('DEL', c.bucket)
    o, e = nil, nil
  end
  local args = {c.field, clks}
  if o and o <= clk - c.window - c.slack then
    o = purge(c, clk)
    if o and o < clk then
      args[3], args[4] = 'o', o
    else
      args[3], args[4] = 'o', clks
    end
  elseif not o or clk < o then
    args[3], args[4] = 'o', clks
  end
  local step = math.floor(clk / c.slack)
  if e ~= step then
    args[#args + 1], args[#args + 2] = 'e', step
  end
  redis.call('HSET', c.bucket, unpack(args))
  if e ~= step then
    redis.call('EXPIRE', c.bucket, c.ttl + c.slack)
  end
end

-- refresh moves the list's expiry on when its newest second went from
-- tail to now across a step of margin seconds: the TTL set, the window and
-- two margins from now, then outlasts every newest second of that step by
-- the window and a margin at least.
local function refresh(c, tail, now)
  if math.floor(tail / c.margin) ~= math.floor(now / c.margin) then
    redis.call('EXPIRE', c.key, c.ttl + c.margin)
  end
end

-- add_list counts one occurrence at clk (clks: the same as a string, see
-- clock) in the text's list form and returns the occurrences before it
-- inside the window and the second it was recorded at; nil when nothing of
-- the list is left in the window (or it is not of the list form), and the
-- caller starts the text anew.
local function add_list(c, clk, clks)
  local h = redis.pcall('LRANGE', c.key, 0, 2)
  if h.err then return nil end
  local total, tail, head = tonumber(h[1]), tonumber(h[2]), tonumber(h[3])
  if not (total and tail and head) then return nil end
  -- A clock behind the tail counts at the tail's second, so that trimming
  -- stays right too.
  local now, nows = count_at(clk, clks, tail)
  local cutoff = now - c.window
  if tail <= cutoff then return nil end
  local popped = head <= cutoff
  if popped then
    -- Pop the header and the expired steps; the first one left becomes the
    -- head, as an absolute second.
    redis.call('LPOP', c.key, 3)
    local expired = 1
    while true do
      local v = tonumber(redis.call('LINDEX', c.key, 0))
      if not v then return nil end
      if v < 0 then
        expired = expired - v
        redis.call('LPOP', c.key)
      else
        head = head + v
        if head > cutoff then
          redis.call('LSET', c.key, 0, digits(head))
          break
        end
        expired = expired + 1
        redis.call('LPOP', c.key)
      end
    end
    total = total - expired
  end
  if tail == now then
    local last = tonumber(redis.call('LINDEX', c.key, -1))
    if last < 0 then
      redis.call('LSET', c.key, -1, digits(last - 1))
    else
      redis.call('RPUSH', c.key, '-1')
    end
  else
    redis.call('RPUSH', c.key, digits(now - tail))
  end
  if popped then
    redis.call('LPUSH', c.key, nows, digits(total + 1))
  else
    redis.call('LSET', c.key, 0, digits(total + 1))
    redis.call('LSET', c.key, 1, nows)
  end
  refresh(c, tail, now)
  return total, now
end

-- count_text counts one occurrence of the text c (its state st, from
-- find) at clk (clks: the same as a string, see clock) and returns the
-- occurrences before it inside the window and the second it was recorded
-- at.
local function count_text(c, st, clk, clks)
  if st.typ == 'bucket' then
    local now, nows = count_at(clk, clks, st.sec)
    if st.sec > now - c.window then
      -- The second occurrence: the text moves out to a list of its own.
      local step = now - st.sec
      if step == 0 then step = -1 end
      redis.call('HDEL', c.bucket, c.field)
      if st.stale then redis.call('DEL', c.key) end
      redis.call('RPUSH', c.key, '2', nows, digits(st.sec), digits(step))
      redis.call('EXPIRE', c.key, c.ttl + c.margin)
      return 1, now
    end
  elseif st.typ == 'list' then
    local previous, now = add_list(c, clk, clks)
    if previous then return previous, now end
  end
  -- The first occurrence in the window: into the bucket, the key gone.
  if st.typ == 'list' then
    redis.call('DEL', c.key)
    bucket(c, st)
  elseif st.typ == 'foreign' then
    redis.call('DEL', c.key)
  end
  add_bucket(c, st, clk, clks)
  return 0, clk
end
