-- window.lua (run after count.lua) counts one occurrence of a text in a
-- sliding window of whole seconds and answers how many earlier occurrences
-- are still inside it.
--
-- KEYS[1]  list of the seconds the text occurred in, oldest first, run-length
--          encoded: "sec" is one occurrence, "sec:n" is n occurrences
-- KEYS[2]  running total of the occurrences in KEYS[1]
-- KEYS[3]  optional dedupe key: present only when the message can be told
--          apart; holds "previous:time" so that the same message counted
--          again gets the same answer
-- ARGV[1]  window in seconds: an occurrence at t is expired when t <= now - window
-- ARGV[2]  TTL of KEYS[1] and KEYS[2] in seconds (the window plus a margin)
-- ARGV[3]  TTL of KEYS[3] in milliseconds
-- ARGV[4]  the unix second to count at, or "" to read the clock with TIME
-- ARGV[5]  optional: "1" to count only a text that has keys (Windows'
--          HitExisting), answering nil and changing nothing for a new one
--
-- Reply: {previous, duplicate, time}, all integers: the occurrences inside the
-- window before this one, 1 when the message was already counted (and nothing
-- changed) else 0, and the unix second the occurrence was recorded at.
local previous, time = seen(KEYS[3])
if previous then
  return {previous, 1, time}
end
if ARGV[5] == '1' and redis.call('EXISTS', KEYS[1], KEYS[2]) == 0 then
  return false
end
return count(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], '')
