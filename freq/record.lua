-- record.lua (run after count.lua) counts one occurrence of a text, as
-- window.lua does, and in the same atomic step appends the reply to a
-- stream: one Redis call per message on a single server. The reply is
-- appended once per message: the dedupe key remembers that it was (":q").
--
-- KEYS[1..3] as window.lua (KEYS[3] may be absent)
-- KEYS[4]    the stream the reply is appended to
-- ARGV[1..4] as window.lua
-- ARGV[5]    the most entries the stream may hold
-- ARGV[6]    the name of the entry field that gets the answer (previous)
-- ARGV[7…]   the entry's other field/value pairs
--
-- Reply: as window.lua, or the error "STREAM_FULL <length>" when the stream
-- holds the maximum and the message is new: then nothing changed.
local list_key, total_key, event_key, stream = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
if #KEYS == 3 then event_key, stream = nil, KEYS[3] end
local max_len, field = tonumber(ARGV[5]), ARGV[6]

-- full returns the error to answer when the stream holds the maximum.
local function full()
  local len = redis.call('XLEN', stream)
  if len >= max_len then
    return redis.error_reply('STREAM_FULL ' .. len)
  end
end

local previous, time, queued = seen(event_key)
if previous then
  if not queued then
    -- Counted without its reply (by two calls whose second failed): append it now.
    local err = full()
    if err then return err end
    redis.call('XADD', stream, '*', field, previous, unpack(ARGV, 7))
    redis.call('SET', event_key, previous .. ':' .. time .. ':q', 'KEEPTTL')
  end
  return {previous, 1, time}
end
local err = full()
if err then return err end
local r = count(list_key, total_key, event_key, tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ':q')
redis.call('XADD', stream, '*', field, r[1], unpack(ARGV, 7))
return r
