-- textcount.lua (run after count.lua and text.lua) counts one occurrence of
-- a text in a sliding window of whole seconds and answers how many earlier
-- occurrences are still inside it.
--
-- KEYS and ARGV: as text_args reads them (text.lua).
--
-- Reply: {previous, duplicate, time}, all integers: the occurrences inside the
-- window before this one, 1 when the message was already counted (and nothing
-- changed) else 0, and the unix second the occurrence was recorded at.
local c = text_args()
local clk = clock(c.at)
local st, dup = find(c)
if dup then
  return {dup.previous, 1, dup.time}
end
return add(c, st, clk)
