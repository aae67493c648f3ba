-- peek.lua (run after runlist's count.lua) reads how many hits of a window
-- counter are inside its sliding window of whole seconds, without recording
-- one: the read of window.lua's keys.
-- It drops the occurrences that left the window, as window.lua does, so it
-- writes, but only what window.lua would drop on its next run: running it
-- twice is the same as running it once.
--
-- KEYS[1]  list of the seconds, run-length encoded as window.lua keeps it
-- KEYS[2]  running total of the occurrences in KEYS[1]
-- ARGV[1]  window in seconds: an occurrence at t is expired when t <= now - window
-- ARGV[2]  the unix second to read at, or "" to read the clock with TIME
--
-- Reply: the number of occurrences inside the window, an integer.
local list_key, total_key = KEYS[1], KEYS[2]
local window = tonumber(ARGV[1])
local at = ARGV[2]

-- The clock first: it may switch the script to effects replication,
-- which must come before any write (last may pop entries).
local now = clock(at)
local tail_sec = last(list_key)
if not tail_sec then return 0 end

-- A clock behind the tail reads at the tail's second, as window.lua counts.
if now < tail_sec then now = tail_sec end

local cutoff = now - window
if tail_sec <= cutoff then
  redis.call('DEL', list_key, total_key)
  return 0
end
local total, recounted, expired = trim(list_key, total_key, cutoff)
if recounted then
  -- Keep the recount with the list's expiry.
  local pttl = redis.call('PTTL', list_key)
  if pttl > 0 then
    redis.call('SET', total_key, total, 'PX', pttl)
  else
    redis.call('SET', total_key, total)
  end
elseif expired > 0 then
  -- DECRBY keeps the key's expiry.
  redis.call('DECRBY', total_key, expired)
end
return total
