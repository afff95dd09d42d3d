-- head.lua: the start of the general part of every lock script. Before it come two lines
-- the client adds (OWNER_ARG: the ARGV index of the caller's owner token, or 0; PUBLISH:
-- 'spublish', 'publish' or '', the command that sends release messages), layout.lua,
-- and the script's fast path if it has one. Reads the lock's summary fields and the
-- caller's own entries in ONE HMGET; lib.lua works from what it read.
--
-- KEYS[1]  the lock hash, <prefix>:{<name>}   (layout: see the `scripts` module docs)
--          (its release channel, <prefix>:{<name>}:released, is in the same slot)
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
