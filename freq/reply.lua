-- reply.lua (run after text.lua, whose clock and period it uses) is the
-- queue of a community's replies: the library of record.lua, which counts
-- a message and queues its reply in one run, and queue.lua, which queues a
-- reply alone. It is not a script by itself.
--
-- A community has a stream of replies (an entry per reply, of one field
-- "d": the caller's data, its random_id, its epoch and its text, separated
-- by spaces: freq.EntryField) and two state hashes, of the even and odd
-- periods of ARGV[1] seconds by turns (each expires at the end of the next
-- period). A state hash holds:
--   * a field per message whose reply was queued in the period (8 bytes of
--     the SHA-256 of its dedupe key): the reply's text, the message's
--     answer. It is the message's one record: a message found there is
--     counted and its reply queued already;
--   * "r" and "e": the last random_id given out and the sequence's epoch
--     (see next_random_id), carried from the period before when a period
--     begins;
--   * "l": the last random_id of the block reserved in the sequence key
--     (KEYS[4]), which holds it and the epoch ("l:e"), without a TTL, so
--     that a sequence whose state hashes expired (a community quiet for a
--     period) goes on after the ids it may have given out;
--   * "x": how many replies may be queued before the stream's length is
--     read again (see room).
--
-- reply_args reads the queue's keys and arguments:
-- KEYS[1]  the stream
-- KEYS[2]  the state hash of the even periods, KEYS[3] of the odd ones
-- KEYS[4]  the sequence key
-- ARGV[1]  the state hashes' period in seconds
-- ARGV[2]  the message's field (its record), or "" when nothing identifies
--          the message: then it is always queued
-- ARGV[3]  the most entries the stream may hold
-- ARGV[4]  where a sequence begins that has not (or was lost): a random
--          number of the signed 32-bit range, not 0
-- ARGV[5]  the epoch of the newest random_id this instance saw given out
--          for the community, or "" for none; ARGV[6] that random_id
--
-- The table lists, as nil, the fields state and next_random_id fill in:
-- Lua then makes it at its full size at once, where growing it past 16
-- fields would rehash it (a fifth of its cost: BENCHMARKS.md, "Tables made
-- at their size").
--
-- max_len and start stay strings, read as numbers where they are used: on
-- the rare calls that read the stream's length or begin a sequence.
local function reply_args()
  local q = {stream = KEYS[1], even = KEYS[2], odd = KEYS[3], seq = KEYS[4], span = ARGV[1] + 0,
    field = ARGV[2], max_len = ARGV[3], start = ARGV[4],
    mark_epoch = ARGV[5] ~= '' and ARGV[5] + 0 or nil, mark_id = ARGV[6] ~= '' and ARGV[6] + 0 or nil,
    cur = nil, prev = nil, ttl = nil, new = nil, record = nil, id = nil, epoch = nil, limit = nil, left = nil,
    stored_epoch = nil, stored_limit = nil}
  if q.field == '' then q.field = nil end
  return q
end

-- block is how many random_ids a sequence key reserves at a time: a
-- sequence that goes on from its key (its state hashes expired) skips at
-- most that many, 2^32 / block restarts before it wraps.
local block = 65536

-- after returns the random_id given out after id: the next number of the
-- signed 32-bit range but 0 (0 tells VK not to check), from the maximum on
-- to the minimum, so that 2^32 - 1 replies in a row get distinct ones.
local function after(id)
  id = id + 1
  if id > 2147483647 then id = -2147483648 end
  if id == 0 then id = 1 end
  return id
end

-- ahead returns how far b comes after a in the sequence (0 to 2^32 - 1).
local function ahead(a, b)
  local d = b - a
  if d < 0 then d = d + 4294967296 end
  return d
end

-- state reads the community's state of the period of clk: q.cur, q.prev,
-- q.ttl (a new cur's TTL); q.record, the message's record if there is
-- one; q.id, q.epoch, q.limit, q.left from the period's hash, else the one
-- before (q.new: the period's hash is new). One HMGET of the period's
-- hash; then, when the message is not found there, an HGET of its field
-- in the hash before, or an HMGET of that hash when the period is new.
local function state(q, clk)
  q.cur, q.prev, q.ttl = period(q.even, q.odd, q.span, clk)
  local f = q.field or 'r'
  local v = redis.call('HMGET', q.cur, f, 'r', 'e', 'l', 'x')
  q.new = not v[2]
  if q.field and v[1] then q.record = v[1] return end
  if q.new then
    v = redis.call('HMGET', q.prev, f, 'r', 'e', 'l', 'x')
    if q.field and v[1] then q.record = v[1] return end
  elseif q.field then
    q.record = redis.call('HGET', q.prev, f) or nil
    if q.record then return end
  end
  q.id, q.epoch, q.limit, q.left = tonumber(v[2]), tonumber(v[3]), tonumber(v[4]), tonumber(v[5])
  q.stored_epoch, q.stored_limit = q.epoch, q.limit
end

-- behind reports whether the community's sequence, at epoch and id, is
-- behind what this instance saw given out (ARGV[5] and ARGV[6]): the store
-- went back in time (a restored snapshot, a promoted replica that missed
-- writes), and the ids after id may have been sent already.
local function behind(q, epoch, id)
  if not q.mark_epoch then return false end
  if epoch ~= q.mark_epoch then return epoch < q.mark_epoch end
  local d = ahead(id, q.mark_id)
  return d > 0 and d < 2147483648
end

-- next_random_id returns the community's next random_id and its epoch. A
-- sequence goes on from its state; with none, from its key's reserved
-- block; with neither (never begun, or lost with Redis's data), or when it
-- is behind this instance's mark, it begins a new epoch at q.start, a
-- random point, rather than again where it was: the ids after that may
-- have been seen by VK. It reserves a new block in the sequence key when
-- the id leaves the reserved one.
local function next_random_id(q)
  local id, epoch, limit = q.id, q.epoch, q.limit
  if not id then
    local k = redis.call('GET', q.seq)
    if k then
      limit, epoch = string.match(k, '^(-?%d+):(%d+)$')
      limit, epoch = tonumber(limit), tonumber(epoch)
      id = limit
    end
  end
  if not (id and epoch) or behind(q, epoch, id) then
    epoch = math.max(epoch or 0, q.mark_epoch or 0) + 1
    id, limit = q.start + 0, nil
  else
    id = after(id)
  end
  if not limit or ahead(id, limit) >= block then
    limit = id + block - 1
    if limit > 2147483647 then limit = limit - 4294967296 end
    redis.call('SET', q.seq, limit .. ':' .. epoch)
  end
  q.id, q.epoch, q.limit = id, epoch, limit
  return id
end

-- room returns the error to answer when the stream holds the maximum,
-- and nil when the reply may be queued. It reads the stream's length
-- only when q.left, the replies that could be queued without reading it,
-- is spent: then it allows half the room left before the next reading,
-- so that the entries added again meanwhile (a reply handed back) have
-- the other half.
local function room(q)
  if q.left and q.left > 0 then
    q.left = q.left - 1
    return nil
  end
  local len, max_len = redis.call('XLEN', q.stream), q.max_len + 0
  if len >= max_len then return redis.error_reply('OUTBOX_FULL ' .. len) end
  q.left = math.floor((max_len - len - 1) / 2)
  return nil
end

-- push appends the entry: data (the caller's), the community's next
-- random_id and its epoch (a sender that reads the entry notes them:
-- freq.Queue.Saw) and text, and writes the period's state with the
-- message's record: the epoch and the reserved block's end only when the
-- period's hash is new or they changed.
-- It returns the entry's id, the random_id and the epoch (values, not a
-- table: one table fewer per message). The text, random_id and epoch,
-- each written twice, are made strings once (digits; most answers are 0).
local function push(q, text, data)
  local id = next_random_id(q)
  local ids, epochs = digits(id), digits(q.epoch)
  if text == 0 then text = '0' elseif type(text) == 'number' then text = digits(text) end
  local entry = redis.call('XADD', q.stream, '*', 'd', data .. ' ' .. ids .. ' ' .. epochs .. ' ' .. text)
  -- Made at its largest size at once (see reply_args), n the pairs' end.
  local f, n = {'r', ids, 'x', digits(q.left), nil, nil, nil, nil, nil, nil}, 4
  if q.field then f[5], f[6], n = q.field, text, 6 end
  if q.new or q.epoch ~= q.stored_epoch or q.limit ~= q.stored_limit then
    f[n + 1], f[n + 2], f[n + 3], f[n + 4], n = 'e', epochs, 'l', digits(q.limit), n + 4
  end
  redis.call('HSET', q.cur, unpack(f, 1, n))
  if q.new then redis.call('EXPIRE', q.cur, q.ttl) end
  return entry, id, q.epoch
end
