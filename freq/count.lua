-- count.lua is the sliding-window counter's library: the functions the
-- counting scripts (window.lua, record.lua) are built from. The Go code
-- puts it in front of each script; it is not a script by itself.
--
-- Keys of one text: a list of the seconds it occurred in, oldest first,
-- run-length encoded ("sec" is one occurrence, "sec:n" is n occurrences);
-- the running total of the occurrences in the list; and, per message, an
-- optional dedupe key holding "previous:time" (and ":q" once the message's
-- reply is queued by record.lua), so that the same message counted again
-- gets the same answer.

-- parse splits "a:b" into two numbers; a bare "a" is a single occurrence.
local function parse(entry)
  local sep = string.find(entry, ':', 1, true)
  if sep then
    return tonumber(string.sub(entry, 1, sep - 1)), tonumber(string.sub(entry, sep + 1))
  end
  return tonumber(entry), 1
end

-- seen returns what the dedupe key remembers: the answer, the second and
-- whether the reply is queued; nil when the key is absent (or there is none).
local function seen(event_key)
  if not event_key then return nil end
  local v = redis.call('GET', event_key)
  if not v then return nil end
  local queued = string.sub(v, -2) == ':q'
  if queued then v = string.sub(v, 1, -3) end
  local previous, time = parse(v)
  return previous, time, queued
end

-- clock returns the unix second at, or Redis's clock when at is "".
local function clock(at)
  if at ~= '' then return tonumber(at) end
  -- Redis before 5.0 refuses writes after TIME unless effects are replicated.
  if redis.replicate_commands then redis.replicate_commands() end
  return tonumber(redis.call('TIME')[1])
end

-- trim pops the occurrences at or before cutoff from the head of the list,
-- whose tail is after cutoff (so the loop stops before the list empties),
-- and returns the total of those left: the total key minus what was popped
-- or, when the total was lost (e.g. evicted) or is inconsistent, a recount
-- of the list. It also returns whether it recounted and how many it popped;
-- it writes no total.
local function trim(list_key, total_key, cutoff)
  local expired = 0
  while true do
    local sec, n = parse(redis.call('LINDEX', list_key, 0))
    if sec > cutoff then break end
    redis.call('LPOP', list_key)
    expired = expired + n
  end
  local total = tonumber(redis.call('GET', total_key))
  if total then total = total - expired end
  if total and total >= 1 then return total, false, expired end
  total = 0
  for _, entry in ipairs(redis.call('LRANGE', list_key, 0, -1)) do
    local _, n = parse(entry)
    total = total + n
  end
  return total, true, expired
end

-- count records one occurrence in the list and total keys at the second at
-- ("" reads Redis's clock) and returns {previous, 0, time}: the occurrences
-- inside the window before this one, and the second it was recorded at.
-- It remembers the answer in event_key (if any) for event_ttl ms, followed
-- by mark. window is in seconds (an occurrence at t is expired when
-- t <= now - window), ttl the list and total keys' TTL in seconds.
local function count(list_key, total_key, event_key, window, ttl, event_ttl, at, mark)
  local now = clock(at)

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
    total = trim(list_key, total_key, cutoff)
  end

  if tail and tail_sec == now then
    redis.call('LSET', list_key, -1, now .. ':' .. (tail_n + 1))
  else
    redis.call('RPUSH', list_key, now)
  end
  redis.call('EXPIRE', list_key, ttl)
  redis.call('SET', total_key, total + 1, 'EX', ttl)
  if event_key then
    redis.call('SET', event_key, total .. ':' .. now .. mark, 'PX', event_ttl)
  end
  return {total, 0, now}
end
