-- record.lua (run after text.lua and reply.lua) records one message on a
-- single Redis server: it counts one occurrence of its text, as count.lua
-- does, and in the same atomic step queues the reply with the answer as
-- its text, once per message. The message's record in the community's
-- state hash (reply.lua) serves both: a message found there is answered as
-- the first time, and nothing changes.
--
-- KEYS[1..4], ARGV[1..6]  as reply_args reads them (reply.lua)
-- KEYS[5]   the text's key (text.lua)
-- KEYS[6]   the text's bucket (text.lua)
-- ARGV[7]   window in seconds: an occurrence at t is expired when t <= now - window
-- ARGV[8]   TTL of a new text key in seconds (the window and a margin)
-- ARGV[9]   the margin in seconds
-- ARGV[10]  the unix second to count at, or "" to read the clock with TIME
-- ARGV[11]  the entry's data (freq.Message.Data)
--
-- Reply: {previous, duplicate, time, random_id, epoch}: the occurrences
-- inside the window before this one, 1 when the message was recorded
-- already (then 0 for the rest), the unix second the occurrence was
-- recorded at, the reply's random_id and its sequence's epoch; or the
-- error "OUTBOX_FULL <length>" when the stream holds the maximum: then
-- nothing changed.
local q = reply_args()
local c = text(KEYS[5], KEYS[6], ARGV[7] + 0, ARGV[8] + 0, ARGV[9] + 0)
local clk, clks = clock(ARGV[10])
state(q, clk)
if q.record then return {tonumber(q.record), 1, 0, 0, 0} end
local err = room(q)
if err then return err end
local previous, now = count_text(c, find(c), clk, clks)
local _, id, epoch = push(q, previous, ARGV[11])
return {previous, 0, now, id, epoch}
