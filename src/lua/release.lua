-- release.lua: gives back exactly one hold; idempotent. When the lock becomes free and
-- a writer is queued, the lock is handed to it in the same step.
--
-- KEYS[1]  lock hash; KEYS[2] release channel
-- ARGV[1]  owner token
-- ARGV[2]  hold id
-- ARGV[3]  publish command: 'spublish', 'publish', or ''
-- Returns
--   {1}  released
--   {0}  no such hold (released before, or its lease had run out)
--   {-3, type}, {-4, field}: see prelude
local found = remove_hold(ARGV[1], ARGV[2])
finish(ARGV[3])
if found then return {1} end
return {0}
