-- headroom.lua is the guard's check inside a store's script: the Go code
-- puts it in front of the scripts that may grow Redis. It is not a script
-- by itself.
--
-- headroom_full(pct) reports whether this server's used_memory is past
-- maxmemory less pct percent (the limit of Go's headroom.Reading), read
-- now with INFO memory, so that the check and the write it guards are one
-- atomic step on the server that holds the key (each node of a cluster
-- reads its own). It is false, reading nothing, when pct is "0" or empty,
-- and false on a server without maxmemory; true, reading nothing, when
-- pct is 100 (Go's BlindFull).
local function headroom_full(pct)
  pct = tonumber(pct)
  if not pct or pct <= 0 then return false end
  -- 100 (Go: BlindFull): the guard read the server past its limit, and
  -- this server refuses INFO inside scripts.
  if pct >= 100 then return true end
  -- A server that refuses INFO here (Go finds it and stops asking) must
  -- not fail the store's script: take it for full until Go knows.
  local info = redis.pcall('INFO', 'memory')
  if type(info) ~= 'string' then return true end
  local max = tonumber(string.match(info, '\nmaxmemory:(%d+)'))
  local used = tonumber(string.match(info, '\nused_memory:(%d+)'))
  if not max or max == 0 or not used then return false end
  return used > math.floor(max / 100) * (100 - pct)
end

-- headroom_growth is the reply of a script that refused to grow a name
-- that exists (Go: headroom.GrowthReply).
local headroom_growth = {ok = 'HEADROOM'}
