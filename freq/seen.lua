-- seen.lua (run after text.lua) answers how many occurrences of a text
-- are inside the window at a second: the previous that count.lua would
-- answer for the text's next message at that second. It writes nothing: it
-- reads the text's bucket, its key and the clock.
--
-- KEYS[1]  the text's key (text.lua)
-- KEYS[2]  the text's bucket (text.lua)
-- ARGV[1]  window in seconds: an occurrence at t is expired when t <= now - window
-- ARGV[2]  the unix second to read at, or "" to read the clock with TIME
--
-- Reply: the number of occurrences inside the window, an integer.
local c = text(KEYS[1], KEYS[2], ARGV[1] + 0)
local key, window = c.key, c.window
local clk = clock(ARGV[2])
local st = find(c)

if st.typ == 'bucket' then
  -- One occurrence, as count_text counts it.
  local sec = st.sec
  if sec > math.max(clk, sec) - window then return 1 end
  return 0
end
if st.typ ~= 'list' then return 0 end
-- The list form, as add_list counts it: the header's total, less the
-- occurrences from the head on that left the window.
local h = redis.pcall('LRANGE', key, 0, 2)
if h.err then return 0 end
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
