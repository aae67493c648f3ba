-- queue.lua (run after text.lua and reply.lua) queues one reply whose
-- message was counted by another call (count.lua, in another slot of a
-- Redis Cluster), once per message: the second of a message's two calls on
-- a cluster, and Store.Queue.
--
-- KEYS[1..4], ARGV[1..6]  as reply_args reads them (reply.lua)
-- ARGV[7]   the reply's text
-- ARGV[8]   the entry's data (freq.Message.Data)
--
-- Reply: {entry id, random_id, epoch}, or {"", 0, 0} when the message's
-- reply was queued already (nothing changes); or the error "OUTBOX_FULL
-- <length>" when the stream holds the maximum.
local q = reply_args()
state(q, clock(''))
if q.record then return {'', 0, 0} end
local err = room(q)
if err then return err end
return {push(q, ARGV[7], ARGV[8])}
