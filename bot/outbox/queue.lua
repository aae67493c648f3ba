-- queue.lua is the library of the scripts that queue a reply (add.lua, and
-- record.lua, which counts the message in the same run): one reply per
-- message, in a stream that cannot grow past its maximum, so a backlog cannot
-- grow without bound, each with the community's next random_id. The Go code
-- puts it in front of each; it is not a script by itself.

-- queue_args reads the queue's keys from KEYS[k] and arguments from ARGV[a]:
-- KEYS[k]    the outbox stream
-- KEYS[k+1]  the community's random_id sequence: the last one given out
-- KEYS[k+2]  the community's once-hash of the even periods of ARGV[a+1]
--            seconds, KEYS[k+3] of the odd ones: a field per message whose
--            reply was queued in the period (its value "1", the smallest); a
--            period's hash expires at the end of the next, so a message's
--            reply is remembered between one and two periods
-- ARGV[a]    the most entries the stream may hold
-- ARGV[a+1]  the once-hashes' period, in seconds
-- ARGV[a+2]  where the sequence begins if it has not (or was lost): a
--            random number of the signed 32-bit range, not 0
-- ARGV[a+3]  the reply's once-field (from its message's key), or "" when
--            the message has nothing to identify it: then no check is made
-- ARGV[a+4…] the entry's field/value pairs, but for its text (field "m")
--            and its random_id ("r")
local function queue_args(k, a)
  local q = {stream = KEYS[k], seq = KEYS[k + 1], even = KEYS[k + 2], odd = KEYS[k + 3], max_len = tonumber(ARGV[a]),
    span = tonumber(ARGV[a + 1]), start = ARGV[a + 2], field = ARGV[a + 3], fields = a + 4}
  if q.field == '' then
    q.field = nil
  else
    -- Redis's clock, for the once-hash's period: writing after TIME needs
    -- the script replicated by its effects, which every supported server
    -- does (docs/OPERATIONS.md, compatibility).
    q.now = tonumber(redis.call('TIME')[1])
  end
  return q
end

-- random_id_after returns the random_id given out after id: the next
-- number of the signed 32-bit range but 0 (0 tells VK not to check), from
-- the maximum on to the minimum, so that 2^32 - 1 replies in a row get
-- distinct ones.
local function random_id_after(id)
  id = id + 1
  if id > 2147483647 then id = -2147483648 end
  if id == 0 then id = 1 end
  return id
end

-- next_random_id returns the community's next random_id and notes it as the
-- last. A sequence not begun, or lost with Redis's data, begins at q.start,
-- a random point, rather than where it began before: the replies sent then
-- would take ids VK already saw.
local function next_random_id(q)
  local last = tonumber(redis.call('GET', q.seq))
  local id = tonumber(q.start)
  if last then id = random_id_after(last) end
  redis.call('SET', q.seq, id)
  return id
end

-- queued reports whether the message's reply is queued already.
local function queued(q)
  if not q.field then return false end
  return redis.call('HEXISTS', q.even, q.field) == 1 or redis.call('HEXISTS', q.odd, q.field) == 1
end

-- full returns the error to answer when the stream holds the maximum.
local function full(q)
  local len = redis.call('XLEN', q.stream)
  if len >= q.max_len then
    return redis.error_reply('OUTBOX_FULL ' .. len)
  end
end

-- push appends the entry, text as its field "m" and the community's next
-- random_id as "r", notes it in the once-hash of the period of Redis's
-- clock and returns the entry's id.
local function push(q, text)
  local id = redis.call('XADD', q.stream, '*', 'm', text, 'r', next_random_id(q), unpack(ARGV, q.fields))
  if q.field then
    local b = math.floor(q.now / q.span)
    local k = q.odd
    if b % 2 == 0 then k = q.even end
    redis.call('HSET', k, q.field, 1)
    redis.call('EXPIRE', k, (b + 2) * q.span - q.now)
  end
  return id
end
