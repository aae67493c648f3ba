-- count.lua is the list-and-total layout's library (Go: runlist.Lua): the
-- functions the scripts of counters/window (window.lua, peek.lua) are built
-- from. The Go code puts it in front of each script; it is not a script by
-- itself.
--
-- Keys of one counter: a list of the seconds it occurred in, oldest first,
-- run-length encoded ("sec" is one occurrence, "sec:n" is n occurrences);
-- the running total of the occurrences in the list; and, per message, an
-- optional dedupe key holding "previous:time" (earlier versions added ":q"
-- once the message's reply was queued: it is read and ignored), so that the
-- same message counted again gets the same answer.
--
-- Only these scripts write the list, so every entry parses; one that does
-- not (a foreign write) is popped when it reaches either end of the list
-- and skipped by a recount, rather than failing every call on the key
-- until it expires.

-- parse splits "a:b" into two numbers; a bare "a" is a single occurrence.
-- It returns nil when entry is neither.
local function parse(entry)
  local sec, n
  local sep = string.find(entry, ':', 1, true)
  if sep then
    sec, n = tonumber(string.sub(entry, 1, sep - 1)), tonumber(string.sub(entry, sep + 1))
  else
    sec, n = tonumber(entry), 1
  end
  if sec and n then return sec, n end
  return nil
end

-- last returns the newest entry of the list, parsed, after popping the
-- entries at the tail that do not parse; nil when the list is (now) empty.
local function last(list_key)
  while true do
    local entry = redis.call('LINDEX', list_key, -1)
    if not entry then return nil end
    local sec, n = parse(entry)
    if sec then return sec, n end
    redis.call('RPOP', list_key)
  end
end

-- seen returns what the dedupe key remembers: the answer and the second; nil
-- when the key is absent (or there is none).
local function seen(event_key)
  if not event_key then return nil end
  local v = redis.call('GET', event_key)
  if not v then return nil end
  if string.sub(v, -2) == ':q' then v = string.sub(v, 1, -3) end
  return parse(v)
end

-- clock returns the unix second at, or Redis's clock when at is "".
local function clock(at)
  if at ~= '' then return tonumber(at) end
  -- Writing after TIME needs the script replicated by its effects, which
  -- every supported server does (docs/OPERATIONS.md, compatibility).
  return tonumber(redis.call('TIME')[1])
end

-- trim pops the occurrences at or before cutoff from the head of the list,
-- whose tail parses and is after cutoff (so the loop stops before the list
-- empties), and the entries there that do not parse (never in the total),
-- and returns the total of those left: the total key minus what was popped
-- or, when the total was lost (e.g. evicted) or is inconsistent, a recount
-- of the list. It also returns whether it recounted and how many
-- occurrences it popped; it writes no total.
local function trim(list_key, total_key, cutoff)
  local expired = 0
  while true do
    local sec, n = parse(redis.call('LINDEX', list_key, 0))
    if sec and sec > cutoff then break end
    redis.call('LPOP', list_key)
    if sec then expired = expired + n end
  end
  local total = tonumber(redis.call('GET', total_key))
  if total then total = total - expired end
  if total and total >= 1 then return total, false, expired end
  total = 0
  for _, entry in ipairs(redis.call('LRANGE', list_key, 0, -1)) do
    local sec, n = parse(entry)
    if sec then total = total + n end
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

  local tail_sec, tail_n = last(list_key)
  -- A clock behind the tail (a failover to a replica whose clock lags) counts
  -- at the tail's second, so the list stays ordered and trimming stays right.
  if tail_sec and now < tail_sec then now = tail_sec end

  local cutoff = now - window
  local total = 0
  if tail_sec and tail_sec <= cutoff then
    -- The newest entry is expired, so all are: drop the list in one step.
    redis.call('DEL', list_key)
    tail_sec = nil
  elseif tail_sec then
    total = trim(list_key, total_key, cutoff)
  end

  if tail_sec and tail_sec == now then
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
