-- earliest.lua is the library later.lua, due.lua, forget.lua and claim.lua share.

-- earliest returns {the later set's earliest due time in Unix ms, or '-1'
-- when it is empty, then each member of more}.
local function earliest(later, more)
  local first = redis.call('ZRANGE', later, 0, 0, 'WITHSCORES')
  local out = {first[2] or '-1'}
  for _, m in ipairs(more or {}) do
    out[#out + 1] = m
  end
  return out
end
