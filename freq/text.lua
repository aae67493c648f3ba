-- text.lua is the layout of freq.Store's texts and the functions that count
-- in it. The Go code puts it in front of every script of the package that
-- reads or counts a text (count.lua, record.lua, seen.lua); it is not a
-- script by itself.
--
-- One key per text holds:
--   * while the text occurred once in the window: its second, a string
--     Redis keeps as an integer inside the key's object (no allocation of
--     its own);
--   * from the second occurrence: a list of integers [total, tail, head,
--     e...]: how many occurrences it holds, the newest second, the oldest
--     second (one occurrence there), then an entry per step: a positive d
--     is one occurrence d seconds after the second before it, a negative
--     -k is k more occurrences at the second before it. Redis stores a
--     small integer in 2 bytes, so a text seen every second of a day costs
--     about 175 KB.
-- The key expires a margin after its newest occurrence left the window:
-- its TTL is set when the key is written anew, and moved on only when the
-- newest second enters a new margin-long step (see refresh), not on every
-- occurrence.

-- clock returns the unix second at, or Redis's clock when at is "".
local function clock(at)
  if at ~= '' then return tonumber(at) end
  return tonumber(redis.call('TIME')[1])
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

-- find reads the text's key and returns its state {typ, sec}: typ is
-- 'none', 'string' (sec its second), 'list' (any type GET refuses: one
-- command as for the other forms; add_list finds a foreign type), or
-- 'foreign' (a value no script of the layout wrote, replaced when counted).
local function find(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then return {typ = 'list'} end
  if not v then return {typ = 'none'} end
  local sec = tonumber(v)
  if not sec then return {typ = 'foreign'} end
  return {typ = 'string', sec = sec}
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

-- add_list counts one occurrence at clk in the text's list form and returns
-- the occurrences before it inside the window and the second it was
-- recorded at; nil when nothing of the list is left in the window (or it
-- is not of the list form), and the caller starts the text anew.
local function add_list(c, clk)
  local h = redis.pcall('LRANGE', c.key, 0, 2)
  if h.err then return nil end
  local total, tail, head = tonumber(h[1]), tonumber(h[2]), tonumber(h[3])
  if not (total and tail and head) then return nil end
  -- A clock behind the tail (a failover to a replica whose clock lags) counts
  -- at the tail's second, so the list stays ordered and trimming stays right.
  local now = math.max(clk, tail)
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
          redis.call('LSET', c.key, 0, head)
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
      redis.call('LSET', c.key, -1, last - 1)
    else
      redis.call('RPUSH', c.key, -1)
    end
  else
    redis.call('RPUSH', c.key, now - tail)
  end
  if popped then
    redis.call('LPUSH', c.key, now, total + 1)
  else
    redis.call('LSET', c.key, 0, total + 1)
    redis.call('LSET', c.key, 1, now)
  end
  refresh(c, tail, now)
  return total, now
end

-- count_text counts one occurrence of the text at clk (the key's state st,
-- from find) and returns the occurrences before it inside the window and
-- the second it was recorded at. c holds the text's key and the window,
-- the key's TTL and the margin, in seconds.
local function count_text(c, st, clk)
  if st.typ == 'string' then
    local now = math.max(clk, st.sec)
    if st.sec > now - c.window then
      -- The second occurrence: the text becomes a list.
      local step = now - st.sec
      if step == 0 then step = -1 end
      redis.call('DEL', c.key)
      redis.call('RPUSH', c.key, 2, now, st.sec, step)
      redis.call('EXPIRE', c.key, c.ttl + c.margin)
      return 1, now
    end
  elseif st.typ == 'list' then
    local previous, now = add_list(c, clk)
    if previous then return previous, now end
  end
  -- The first occurrence in the window (SET replaces whatever was there).
  redis.call('SET', c.key, clk, 'EX', c.ttl)
  return 0, clk
end
