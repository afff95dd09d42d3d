-- withdraw.lua: an acquire or an upgrade gave up (timeout, cancelled): takes its writer
-- out of the queue (or its upgrade out of pending) and gives back the hold it may have
-- been handed meanwhile, in one step (two steps could let a hand-off slip in between).
-- O(1).
--
-- KEYS[1]  lock hash (its release channel is KEYS[1] .. ':released', same slot)
-- ARGV[1]  owner token
-- ARGV[2]  hold id of the acquire
-- Returns {1}; {-3, type}, {-4, field}: see lib
local owner, id = ARGV[1], ARGV[2]
local bad = prune()
if bad then return {-4, bad} end
local q = queued_entry(owner)
if q and q.id == id then dequeue(owner, q) end
-- an upgrade that gave up: the upgradable hold stays, readers may enter again
if upgrader == owner and pending == id then pending, pending_lease = nil, nil end
local mine = owner_entry(owner)
if mine == false then return {-4, 'o:' .. owner} end
if mine ~= nil then remove_hold(owner, mine, id) end
finish()
return {1}
