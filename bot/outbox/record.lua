-- record.lua (run after freq's counting functions and queue.lua) counts one
-- occurrence of a text, as freq's count does, and in the same atomic step
-- queues the reply with the answer as its text, once per message (the
-- once-hashes): one Redis call per message on a single server.
--
-- KEYS, ARGV  as text_args reads them (freq's text.lua), then as queue_args
--             reads them
--
-- Reply: as freq's count, {previous, duplicate, time}, or the error
-- "OUTBOX_FULL <length>" when the stream holds the maximum and the reply
-- is not queued yet: then nothing changed.
local c = text_args()
local q = queue_args(c.nkeys + 1, 7)
local clk = clock(c.at)
local st, dup = find(c)
local done = queued(q)
if not done then
  local err = full(q)
  if err then return err end
end
local r
if dup then
  -- Counted already: answered again, and its reply queued now if it was
  -- not (counted by two calls whose second failed).
  r = {dup.previous, 1, dup.time}
else
  r = add(c, st, clk)
end
if not done then
  push(q, r[1])
end
return r
