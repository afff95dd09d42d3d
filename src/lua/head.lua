-- head.lua: the first lines of every lock script (after a line, added at compile time,
-- that sets OWNER_ARG: the ARGV index of the caller's owner token, or 0, then layout.lua
-- and, for acquire, fast_acquire.lua). Reads the
-- lock's summary fields and the caller's own entries in ONE HMGET; the fast paths and
-- lib.lua work from what it read.
--
-- KEYS[1]  the lock hash, <prefix>:{<name>}   (layout: see the `scripts` module docs)
-- KEYS[2]  its release channel, <prefix>:{<name>}:released (same slot)
--
-- Early return of every script:
--   {-3, type}   the key holds another type (nothing is touched)
local key = KEYS[1]
local OWNER = OWNER_ARG > 0 and ARGV[OWNER_ARG] or nil
local S
if OWNER then
  S = redis.pcall('HMGET', key, 's', 'w', 'u', 'o:' .. OWNER, 'q:' .. OWNER)
else
  S = redis.pcall('HMGET', key, 's', 'w', 'u')
end
if S['err'] ~= nil then
  return {-3, redis.call('TYPE', key)['ok']}
end
-- the reply of TIME, once a fast path has read it (lib.lua reads it otherwise)
local T = nil
