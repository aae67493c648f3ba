-- textpeek.lua (run after count.lua and text.lua) answers how many
-- occurrences of a text are inside the window at a second: the previous
-- that textcount.lua would answer for the text's next message at that
-- second. It writes nothing: it reads the text's keys and the clock.
--
-- KEYS[1]  the text's key (text.lua)
-- KEYS[2]  the former layout's list of the text (count.lua), read as
--          count_text reads it before converting it
-- ARGV[1]  window in seconds: an occurrence at t is expired when t <= now - window
-- ARGV[2]  the unix second to read at, or "" to read the clock with TIME
-- ARGV[3]  "1" to read the former layout's list, "" once no such key can
--          be left (freq.Store.Load)
--
-- Reply: the number of occurrences inside the window, an integer.
local key, old_list = KEYS[1], KEYS[2]
local window = tonumber(ARGV[1])
local clk = clock(ARGV[2])
local typ = redis.call('TYPE', key).ok

if ARGV[3] == '1' and redis.call('EXISTS', old_list) == 1 then
  -- As convert merges them: every occurrence of both layouts, counted
  -- after the newest second (or the clock) less the window.
  local all = {}
  for _, e in ipairs(redis.call('LRANGE', old_list, 0, -1)) do
    local sec, n = parse(e)
    if sec then all[#all + 1] = {sec, n} end
  end
  if typ == 'string' then
    local sec = tonumber(redis.call('GET', key))
    if sec then all[#all + 1] = {sec, 1} end
  elseif typ == 'list' then
    for _, p in ipairs(decode(key) or {}) do all[#all + 1] = p end
  end
  local newest = clk
  for _, p in ipairs(all) do newest = math.max(newest, p[1]) end
  local total = 0
  for _, p in ipairs(all) do
    if p[1] > newest - window then total = total + p[2] end
  end
  return total
end

if typ == 'string' then
  -- One occurrence, as count_text counts it.
  local sec = tonumber(redis.call('GET', key))
  if sec and sec > math.max(clk, sec) - window then return 1 end
  return 0
end
if typ ~= 'list' then return 0 end

-- The list form, as add_list counts it: the header's total, less the
-- occurrences from the head on that left the window.
local h = redis.call('LRANGE', key, 0, 2)
local total, tail, head = tonumber(h[1]), tonumber(h[2]), tonumber(h[3])
if not (total and tail and head) then return 0 end
local cutoff = math.max(clk, tail) - window
if tail <= cutoff then return 0 end
if head > cutoff then return total end
local expired = 1
local i = 3
while true do
  local steps = redis.call('LRANGE', key, i, i + 255)
  if #steps == 0 then return 0 end
  for _, s in ipairs(steps) do
    local v = tonumber(s)
    if not v then return 0 end
    if v < 0 then
      expired = expired - v
    else
      head = head + v
      if head > cutoff then return total - expired end
      expired = expired + 1
    end
  end
  i = i + #steps
end
