-- add.lua (run after queue.lua) appends one reply to a community's outbox
-- stream, once per message, unless the stream already holds the maximum.
--
-- ARGV[1]  the reply's text
-- KEYS     as queue_args reads them from KEYS[1], ARGV from ARGV[2]
--
-- Reply: the new entry's id, 0 when the message's reply was queued
-- already (nothing changes), or the error "OUTBOX_FULL <length>".
local q = queue_args(1, 2)
if queued(q) then
  return 0
end
local err = full(q)
if err then return err end
return push(q, ARGV[1])
