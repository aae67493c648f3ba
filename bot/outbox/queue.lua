-- queue.lua is the library of the scripts that queue a reply (add.lua, and
-- record.lua, which counts the message in the same run): one reply per
-- message, in a stream that cannot grow past its maximum, so a backlog cannot
-- grow without bound. The Go code puts it in front of each; it is not a
-- script by itself.

-- queue_args reads the queue's keys from KEYS[k] and arguments from ARGV[a]:
-- KEYS[k]    the outbox stream
-- KEYS[k+1]  optional: the reply's once-key, present while a reply to the
--            same message was queued within ARGV[a+1] ms; it holds that
--            entry's id
-- ARGV[a]    the most entries the stream may hold
-- ARGV[a+1]  how long the once-key lives, in milliseconds
-- ARGV[a+2…] the entry's field/value pairs, but for its text (field "m")
local function queue_args(k, a)
  return {stream = KEYS[k], once = KEYS[k + 1], max_len = tonumber(ARGV[a]), once_ms = ARGV[a + 1], fields = a + 2}
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

-- push appends the entry, text as its field "m", sets the once-key and
-- returns the entry's id.
local function push(q, text)
  local id = redis.call('XADD', q.stream, '*', 'm', text, unpack(ARGV, q.fields))
  if q.once then
    redis.call('SET', q.once, id, 'PX', q.once_ms)
  end
  return id
end
