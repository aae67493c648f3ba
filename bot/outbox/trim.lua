-- trim.lua is the library done.lua and release.lua share: it removes the
-- entries at the head of an outbox stream that are finished.
--
-- An entry is finished once it is acknowledged. The oldest entry still
-- needed is the older of the group's oldest pending entry and the first
-- entry it has not delivered yet (after its last-delivered-id); every
-- entry before it is finished, and one exact XTRIM MINID removes them all.
-- A group delivers entries in the stream's order, so every entry it
-- delivered (every pending one among them) comes before every entry it
-- has not: with an entry pending, the oldest pending one is the oldest
-- needed (XPENDING's summary alone), and the group's last-delivered-id
-- (XINFO GROUPS) is read only when none is.
-- An entry finished while an older one is still pending (another sender's,
-- or one put aside by flood control) stays in the stream, acknowledged, so
-- no read returns it again, until that older one is finished too.
--
-- Exact trimming, not "~": the stream's length must stay the number of
-- entries not yet finished (the MaxLen refusal, /stats and Drain read it).
-- Its cost is one pass over the head node's entries per call (at most
-- stream-node-max-entries), where XDEL seeks every id on its own.

-- next_id returns the stream id right after id ("ms-seq"), or nil for the
-- largest id there is. The parts are 64-bit, beyond a Lua number's exact
-- range, so they are incremented as decimal strings.
local function next_id(id)
  local function incr(s)
    local i = #s
    while i > 0 and s:sub(i, i) == '9' do i = i - 1 end
    if i == 0 then return '1' .. string.rep('0', #s) end
    return s:sub(1, i - 1) .. string.char(s:byte(i) + 1) .. string.rep('0', #s - i)
  end
  local max = '18446744073709551615'
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  if seq ~= max then return ms .. '-' .. incr(seq) end
  if ms ~= max then return incr(ms) .. '-0' end
  return nil
end

-- trim removes the finished entries at the head of stream key, of consumer
-- group group, and returns the stream's length after it and, when an
-- entry is pending, the id of the stream's first entry: the oldest pending
-- one, which only a trim removes once it is finished (nil otherwise); a
-- stream that is empty or lost, or without the group, is left as it is.
local function trim(key, group)
  local len = redis.call('XLEN', key)
  if len == 0 then return 0 end
  local pending = redis.pcall('XPENDING', key, group)
  if pending.err then return len end -- NOGROUP
  local keep = pending[2]
  if keep then return len - redis.call('XTRIM', key, 'MINID', keep), keep end
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
    local name, last
    for i = 1, #g, 2 do
      if g[i] == 'name' then name = g[i + 1] elseif g[i] == 'last-delivered-id' then last = g[i + 1] end
    end
    if name == group then keep = next_id(last) or last end
  end
  if not keep then return len end
  return len - redis.call('XTRIM', key, 'MINID', keep)
end
