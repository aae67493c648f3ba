-- window.lua (run after headroom.lua and runlist's count.lua) records one
-- hit on a window counter and answers how many earlier hits are still
-- inside its window of whole seconds.
--
-- KEYS[1]  list of the seconds the counter was hit in, oldest first,
--          run-length encoded: "sec" is one hit, "sec:n" is n hits
-- KEYS[2]  running total of the hits in KEYS[1]
-- ARGV[1]  window in seconds: a hit at t is expired when t <= now - window
-- ARGV[2]  TTL of KEYS[1] and KEYS[2] in seconds (the window plus a margin)
-- ARGV[3]  the unix second to hit at, or "" to read the clock with TIME
-- ARGV[4]  the headroom percent to check the server's used_memory with
--          before the counter is created or its list grows (see
--          headroom.lua); "" or "0": no check
--
-- Reply: the hits inside the window before this one, an integer. Refused
-- past the headroom, changing nothing: nil for a counter that has no keys,
-- headroom_growth for a hit that would add an entry (a new second) while
-- none leaves the window.
local at = ARGV[3]
local pct = ARGV[4] or ''
if pct ~= '' and pct ~= '0' then
  if redis.call('EXISTS', KEYS[1], KEYS[2]) == 0 then
    if headroom_full(pct) then return false end
  else
    -- One clock reading for the check and the count.
    local now = clock(at)
    at = string.format('%d', now)
    local tail = parse(redis.call('LINDEX', KEYS[1], -1) or '')
    local grows = not (tail and tail >= now)
    if grows then
      local head = parse(redis.call('LINDEX', KEYS[1], 0) or '')
      grows = not (head and head <= now - tonumber(ARGV[1]))
    end
    if grows and headroom_full(pct) then return headroom_growth end
  end
end
-- count's first write may be a deletion (what left the window), after which
-- Redis lets every write through under maxmemory. A first write that changes
-- nothing but that Redis refuses under maxmemory makes it refuse the hit
-- whole: INCRBY 0 of the total, or SET of a total of 0 (count then sets it).
local total = redis.call('GET', KEYS[2])
if not total then
  redis.call('SET', KEYS[2], 0, 'EX', ARGV[2])
elseif string.match(total, '^%d+$') then
  redis.call('INCRBY', KEYS[2], 0)
end
return count(KEYS[1], KEYS[2], nil, tonumber(ARGV[1]), tonumber(ARGV[2]), 0, at, '')[1]
