-- count.lua (run after text.lua) counts one occurrence of a text in a
-- sliding window of whole seconds and answers how many earlier occurrences
-- are still inside it, once per message: Store.Count, and the first of a
-- message's two calls on a Redis Cluster (Store.Record).
--
-- KEYS[1]  the text's key (text.lua)
-- KEYS[2]  the text's slot's dedupe hash of the even periods of ARGV[4]
--          seconds, KEYS[3] of the odd ones: a field per message counted
--          in the period (the message's hash), its answer as the value,
--          and t, written with the first; a period's hash expires at the
--          end of the next
-- KEYS[4]  the text's bucket (text.lua)
-- ARGV[1]  window in seconds: an occurrence at t is expired when t <= now - window
-- ARGV[2]  TTL of a new text key in seconds (the window and a margin)
-- ARGV[3]  the margin in seconds
-- ARGV[4]  the dedupe hashes' period in seconds (the dedupe TTL)
-- ARGV[5]  the unix second to count at, or "" to read the clock with TIME
-- ARGV[6]  the message's hash (of its text and dedupe key), or "" when it
--          has no dedupe key: then it is always counted
--
-- Reply: {previous, duplicate, time}, all integers: the occurrences inside the
-- window before this one, 1 when the message was already counted (and nothing
-- changed) else 0, and the unix second the occurrence was recorded at (0
-- for a duplicate).
local c = text(KEYS[1], KEYS[4], ARGV[1] + 0, ARGV[2] + 0, ARGV[3] + 0)
local span, hash = ARGV[4] + 0, ARGV[6]
local clk, clks = clock(ARGV[5])
local cur, prev, ttl = period(KEYS[2], KEYS[3], span, clk)
local new
if hash ~= '' then
  -- The period's hash carries a field t from its first write: without it
  -- the hash is new, and only then is its TTL set.
  local v = redis.call('HMGET', cur, hash, 't')
  local found = v[1] or redis.call('HGET', prev, hash)
  if found then return {tonumber(found), 1, 0} end
  new = not v[2]
end
local previous, now = count_text(c, find(c), clk, clks)
if new then
  redis.call('HSET', cur, hash, digits(previous), 't', '1')
  redis.call('EXPIRE', cur, ttl)
elseif hash ~= '' then
  redis.call('HSET', cur, hash, digits(previous))
end
return {previous, 0, now}
