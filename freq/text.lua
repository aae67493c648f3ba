-- text.lua (run after count.lua, whose functions it uses) is the compact
-- layout of freq.Store's texts, and the functions that count in it. The Go
-- code puts it in front of the scripts that count texts (textcount.lua, and
-- those of other packages that count and do more in the same run: NewScript);
-- it is not a script by itself.
--
-- One key per text (KEYS[1]) holds:
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
-- A message's dedupe state is a field of one of two hashes per cluster
-- slot (KEYS[2] for the even buckets of dedupe-TTL seconds, KEYS[3] for
-- the odd ones): the field is the message's 7-byte hash, the value
-- "previous:time" (earlier versions added ":q" once the message's reply was
-- queued: it is read and ignored). A bucket's hash expires
-- at the end of the next bucket, so a message is remembered between one
-- and two dedupe TTLs.
-- The keys of the former layout (count.lua's list and total, KEYS[4] and
-- KEYS[5], and a dedupe key per message, KEYS[6]) are read: a dedupe key
-- answers its message, and the list and total are merged into the text's
-- key, and deleted, when the text is next counted.

-- text_args reads the arguments common to the scripts that count texts:
-- KEYS[1..6] as above (KEYS[6] only with a dedupe key), and
-- ARGV[1]  window in seconds: an occurrence at t is expired when t <= now - window
-- ARGV[2]  TTL of KEYS[1] in seconds (the window plus a margin)
-- ARGV[3]  the dedupe buckets' length in seconds (the dedupe TTL)
-- ARGV[4]  the unix second to count at, or "" to read the clock with TIME
-- ARGV[5]  the message's 7-byte hash, or "" when it has no dedupe key
-- ARGV[6]  "1" to read the former layout's keys, "" once none can be left
--          (freq.Store.Load): then KEYS[4..6] are passed and not read
-- A script that counts and does more reads its own keys after c.nkeys (5,
-- or 6 with a dedupe key) and its own arguments after the sixth.
local function text_args()
  local c = {key = KEYS[1], even = KEYS[2], odd = KEYS[3], old_list = KEYS[4], old_total = KEYS[5],
    window = tonumber(ARGV[1]), ttl = tonumber(ARGV[2]), span = tonumber(ARGV[3]), at = ARGV[4], hash = ARGV[5], nkeys = 5}
  if c.hash == '' then c.hash = nil else c.old_event, c.nkeys = KEYS[6], 6 end
  if ARGV[6] ~= '1' then c.old_list, c.old_event = nil, nil end
  return c
end

-- remember stores the message's answer in the dedupe bucket of the clock.
local function remember(c, clk, previous, time)
  local b = math.floor(clk / c.span)
  local k = c.odd
  if b % 2 == 0 then k = c.even end
  redis.call('HSET', k, c.hash, previous .. ':' .. time)
  redis.call('EXPIRE', k, (b + 2) * c.span - clk)
end

-- find reads the text's key, and when the message has a dedupe key, its
-- dedupe state. It returns the key's state {typ, sec} and, when the
-- message was counted already, {previous, time}. It writes nothing.
local function find(c)
  local st = {typ = redis.call('TYPE', c.key).ok}
  if st.typ == 'string' then
    st.sec = tonumber(redis.call('GET', c.key))
    if not st.sec then st.typ = 'foreign' end
  end
  if not c.hash then return st end
  if c.old_event then
    local previous, time = seen(c.old_event)
    if previous then return st, {previous = previous, time = time} end
  end
  for _, k in ipairs({c.even, c.odd}) do
    local v = redis.call('HGET', k, c.hash)
    if v then
      if string.sub(v, -2) == ':q' then v = string.sub(v, 1, -3) end
      local previous, time = parse(v)
      if previous then return st, {previous = previous, time = time} end
    end
  end
  return st
end

-- decode returns the occurrences of the list form as {sec, n} pairs, oldest
-- first; nil when the list is not of that form.
local function decode(key)
  local l = redis.call('LRANGE', key, 0, -1)
  local sec = tonumber(l[3])
  if not sec then return nil end
  local out = {{sec, 1}}
  for i = 4, #l do
    local v = tonumber(l[i])
    if not v or v == 0 then return nil end
    if v < 0 then
      out[#out][2] = out[#out][2] - v
    else
      sec = sec + v
      out[#out + 1] = {sec, 1}
    end
  end
  return out
end

-- encode writes pairs (sorted, distinct seconds, at least one) as the list
-- form of key, with its TTL.
local function encode(c, pairs)
  local total = 0
  for _, p in ipairs(pairs) do total = total + p[2] end
  local l = {total, pairs[#pairs][1]}
  local prev
  for _, p in ipairs(pairs) do
    if prev then l[#l + 1] = p[1] - prev else l[#l + 1] = p[1] end
    if p[2] > 1 then l[#l + 1] = 1 - p[2] end
    prev = p[1]
  end
  redis.call('DEL', c.key)
  for i = 1, #l, 1000 do
    redis.call('RPUSH', c.key, unpack(l, i, math.min(i + 999, #l)))
  end
  redis.call('EXPIRE', c.key, c.ttl)
end

-- convert merges the former layout's list of the text into its key (which
-- becomes a list, or disappears when nothing is left in the window) and
-- deletes the former list and total. It returns the key's new state.
local function convert(c, st, clk)
  local all = {}
  for _, e in ipairs(redis.call('LRANGE', c.old_list, 0, -1)) do
    local sec, n = parse(e)
    if sec then all[#all + 1] = {sec, n} end
  end
  redis.call('DEL', c.old_list, c.old_total)
  if st.typ == 'string' then
    all[#all + 1] = {st.sec, 1}
  elseif st.typ == 'list' then
    for _, p in ipairs(decode(c.key) or {}) do all[#all + 1] = p end
  end
  table.sort(all, function(a, b) return a[1] < b[1] end)
  local cutoff = math.max(clk, (all[#all] or {clk})[1]) - c.window
  local pairs = {}
  for _, p in ipairs(all) do
    local last = pairs[#pairs]
    if p[1] <= cutoff then
      -- expired
    elseif last and last[1] == p[1] then
      last[2] = last[2] + p[2]
    else
      pairs[#pairs + 1] = {p[1], p[2]}
    end
  end
  if #pairs == 0 then
    redis.call('DEL', c.key)
    return {typ = 'none'}
  end
  encode(c, pairs)
  return {typ = 'list'}
end

-- add_list counts one occurrence at clk in the text's list form and returns
-- the occurrences before it inside the window and the second it was
-- recorded at; nil when nothing of the list is left in the window (or it
-- is not of the list form), and the caller starts the text anew.
local function add_list(c, clk)
  local h = redis.call('LRANGE', c.key, 0, 2)
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
  redis.call('EXPIRE', c.key, c.ttl)
  return total, now
end

-- count_text counts one occurrence of the text at clk (the key's state st,
-- from find) and returns the occurrences before it inside the window and
-- the second it was recorded at.
local function count_text(c, st, clk)
  if c.old_list and redis.call('EXISTS', c.old_list) == 1 then st = convert(c, st, clk) end
  if st.typ == 'string' then
    local now = math.max(clk, st.sec)
    if st.sec > now - c.window then
      -- The second occurrence: the text becomes a list.
      local step = now - st.sec
      if step == 0 then step = -1 end
      redis.call('DEL', c.key)
      redis.call('RPUSH', c.key, 2, now, st.sec, step)
      redis.call('EXPIRE', c.key, c.ttl)
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

-- add counts one occurrence of the text at clk (the key's state st, from
-- find) and remembers the message's answer when it has a dedupe key. It
-- returns {previous, 0, time}.
local function add(c, st, clk)
  local previous, now = count_text(c, st, clk)
  if c.hash then remember(c, clk, previous, now) end
  return {previous, 0, now}
end
