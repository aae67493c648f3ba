-- queue.lua is the library of the scripts that queue a reply (add.lua, and
-- record.lua, which counts the message in the same run): one reply per
-- message, in a stream that cannot grow past its maximum, so a backlog cannot
-- grow without bound, each with the community's next random_id. The Go code
-- puts it in front of each; it is not a script by itself.

-- queue_args reads the queue's keys from KEYS[k] and arguments from ARGV[a]:
-- KEYS[k]    the outbox stream
-- KEYS[k+1]  the community's random_id sequence: the last one given out
-- KEYS[k+2]  optional: the reply's once-key, present while a reply to the
--            same message was queued within ARGV[a+1] ms; it holds that
--            entry's id
-- ARGV[a]    the most entries the stream may hold
-- ARGV[a+1]  how long the once-key lives, in milliseconds
-- ARGV[a+2]  where the sequence begins if it has not (or was lost): a
--            random number of the signed 32-bit range, not 0
-- ARGV[a+3…] the entry's field/value pairs, but for its text (field "m")
--            and its random_id ("r")
local function queue_args(k, a)
  return {stream = KEYS[k], seq = KEYS[k + 1], once = KEYS[k + 2], max_len = tonumber(ARGV[a]), once_ms = ARGV[a + 1],
    start = ARGV[a + 2], fields = a + 3}
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

-- queued returns the id of the entry the once-key holds when the message's
-- reply is queued already, else nil.
local function queued(q)
  if not q.once then return nil end
  return redis.call('GET', q.once) or nil
end

-- full returns the error to answer when the stream holds the maximum.
local function full(q)
  local len = redis.call('XLEN', q.stream)
  if len >= q.max_len then
    return redis.error_reply('OUTBOX_FULL ' .. len)
  end
end

-- push appends the entry, text as its field "m" and the community's next
-- random_id as "r", sets the once-key and returns the entry's id.
local function push(q, text)
  local id = redis.call('XADD', q.stream, '*', 'm', text, 'r', next_random_id(q), unpack(ARGV, q.fields))
  if q.once then
    redis.call('SET', q.once, id, 'PX', q.once_ms)
  end
  return id
end
