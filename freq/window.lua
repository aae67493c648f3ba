-- window.lua counts one occurrence of a text in a sliding window of whole
-- seconds and answers how many earlier occurrences are still inside it.
--
-- KEYS[1]  list of the seconds the text occurred in, oldest first, run-length
--          encoded: "sec" is one occurrence, "sec:n" is n occurrences
-- KEYS[2]  running total of the occurrences in KEYS[1]
-- KEYS[3]  optional event key: present only when the event has an id; holds
--          "previous:time" so that a retried event gets the same answer
-- ARGV[1]  window in seconds: an occurrence at t is expired when t <= now - window
-- ARGV[2]  TTL of KEYS[1] and KEYS[2] in seconds (the window plus a margin)
-- ARGV[3]  TTL of KEYS[3] in milliseconds
-- ARGV[4]  the unix second to count at, or "" to read the clock with TIME
--
-- Reply: {previous, duplicate, time}, all integers: the occurrences inside the
-- window before this one, 1 when the event was already counted (and nothing
-- changed) else 0, and the unix second the occurrence was recorded at.
local list_key, total_key, event_key = KEYS[1], KEYS[2], KEYS[3]
local window = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local event_ttl = tonumber(ARGV[3])
local at = ARGV[4]

-- parse splits "a:b" into two numbers; a bare "a" is a single occurrence.
local function parse(entry)
  local sep = string.find(entry, ':', 1, true)
  if sep then
    return tonumber(string.sub(entry, 1, sep - 1)), tonumber(string.sub(entry, sep + 1))
  end
  return tonumber(entry), 1
end

if event_key then
  local seen = redis.call('GET', event_key)
  if seen then
    local previous, time = parse(seen)
    return {previous, 1, time}
  end
end

local now
if at == '' then
  -- Redis before 5.0 refuses writes after TIME unless effects are replicated.
  if redis.replicate_commands then redis.replicate_commands() end
  now = tonumber(redis.call('TIME')[1])
else
  now = tonumber(at)
end

local tail = redis.call('LINDEX', list_key, -1)
local tail_sec, tail_n
if tail then
  tail_sec, tail_n = parse(tail)
  -- A clock behind the tail (a failover to a replica whose clock lags) counts
  -- at the tail's second, so the list stays ordered and trimming stays right.
  if now < tail_sec then now = tail_sec end
end

local cutoff = now - window
local total = 0
if tail and tail_sec <= cutoff then
  -- The newest entry is expired, so all are: drop the list in one step.
  redis.call('DEL', list_key)
  tail = nil
elseif tail then
  -- The tail is inside the window, so this loop stops before the list empties.
  local expired = 0
  while true do
    local sec, n = parse(redis.call('LINDEX', list_key, 0))
    if sec > cutoff then break end
    redis.call('LPOP', list_key)
    expired = expired + n
  end
  total = tonumber(redis.call('GET', total_key))
  if total then total = total - expired end
  if not total or total < 1 then
    -- The total was lost (e.g. evicted) or is inconsistent: recount the list.
    total = 0
    for _, entry in ipairs(redis.call('LRANGE', list_key, 0, -1)) do
      local _, n = parse(entry)
      total = total + n
    end
  end
end

if tail and tail_sec == now then
  redis.call('LSET', list_key, -1, now .. ':' .. (tail_n + 1))
else
  redis.call('RPUSH', list_key, now)
end
redis.call('EXPIRE', list_key, ttl)
redis.call('SET', total_key, total + 1, 'EX', ttl)
if event_key then
  redis.call('SET', event_key, total .. ':' .. now, 'PX', event_ttl)
end
return {total, 0, now}
