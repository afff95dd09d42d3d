-- fast_release.lua: the release of the lone hold kept in the summary (one owner, one
-- hold, nobody waits), the common uncontended case: the summary becomes a tombstone (it
-- remembers the last fence for FENCE_MEMORY or longer: the key's expiry is kept), in ONE
-- write, nothing is published. Called first by release(), before begin(); reads only the
-- summary. In every other case (other holds or owners, a queued writer, waiting readers,
-- another layout, a key of another type) it returns nil and the general path decides.
-- It does not read the clock: a hold whose deadline has passed is given back as well
-- (nobody else can have been granted it: it is still the summary's), where the general
-- path would find it run out; either way the hash ends the same, and the client judges
-- the hold by its own belief (a release answered after the hold's believed end is
-- reported lost: docs/PROTOCOL.md).
--
-- KEYS, ARGV: as release.lua; ARGV[3] '1' skips this path (the grant said that others
--             held or waited then: its read would most likely be wasted)
-- Returns
--   {1}   released; nil: not taken here
local function fast_release(KEYS, ARGV)
  if ARGV[3] == '1' then return nil end
  local s = redis.pcall('HGET', KEYS[1], 's')
  if type(s) ~= 'string' then return nil end
  local fence, qh, qt, ex, id, owner = string.match(s, LONE)
  if fence == nil or qh ~= qt or id ~= ARGV[2] or owner ~= ARGV[1] then return nil end
  -- the tombstone (as finish() writes it: nothing has a deadline), from the digits read
  redis.call('HSET', KEYS[1], 's', summary_text(fence, '0', '-', '0', qh, qt, '-', ex))
  return {1}
end
