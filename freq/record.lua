-- record.lua (run after count.lua and text.lua) counts one occurrence of a
-- text, as textcount.lua does, and in the same atomic step appends the reply
-- to a stream: one Redis call per message on a single server. The reply is
-- appended once per message: its dedupe state remembers that it was.
--
-- KEYS       as text_args reads them (text.lua), then the stream the reply
--            is appended to, last
-- ARGV[1..5] as text_args reads them
-- ARGV[6]    the most entries the stream may hold
-- ARGV[7]    the name of the entry field that gets the answer (previous)
-- ARGV[8…]   the entry's other field/value pairs
--
-- Reply: as textcount.lua, or the error "STREAM_FULL <length>" when the
-- stream holds the maximum and the message is new: then nothing changed.
local c = text_args()
local stream = KEYS[#KEYS]
local max_len, field = tonumber(ARGV[6]), ARGV[7]

-- full returns the error to answer when the stream holds the maximum.
local function full()
  local len = redis.call('XLEN', stream)
  if len >= max_len then
    return redis.error_reply('STREAM_FULL ' .. len)
  end
end

local clk = clock(c.at)
local st, dup = find(c)
if dup then
  if not dup.queued then
    -- Counted without its reply (by two calls whose second failed): append it now.
    local err = full()
    if err then return err end
    redis.call('XADD', stream, '*', field, dup.previous, unpack(ARGV, 8))
    mark_queued(c, dup)
  end
  return {dup.previous, 1, dup.time}
end
local err = full()
if err then return err end
local r = add(c, st, clk, true)
redis.call('XADD', stream, '*', field, r[1], unpack(ARGV, 8))
return r
