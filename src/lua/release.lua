-- release.lua: gives back exactly one hold; idempotent. When the lock becomes free and
-- a writer is queued, the lock is handed to it in the same step. O(1).
--
-- KEYS[1]  lock hash (its release channel is KEYS[1] .. ':released', same slot)
-- ARGV[1]  owner token
-- ARGV[2]  hold id
-- ARGV[3]  '1': the grant said that others held or waited (fast_release.lua then reads
--          the queue's head with the summary when ARGV[4] names it, and is skipped
--          when it does not); optional
-- ARGV[4]  (optional, with ARGV[3]) the queue's head ticket field its grant named,
--          't:<ticket>' (acquire.lua's `others`): read with the summary, in the first
--          read, as the head is most likely still there (a head that moved on since is
--          read as before; a field of another shape is not read)
-- Returns
--   {1}         released
--   {0, fence, broken}
--               no such hold (released before, or its lease had run out, or removed by
--               force_release): the last fence granted, and the fence of the last
--               forced release ('-' for none remembered), which tell a client whose first
--               sending got no answer whether anything was granted, or forced, since its
--               own grant
--   {-3, type}, {-4, field}: see lib
local function release(KEYS, ARGV)
  if not GENERAL_ONLY then
    local fast = fast_release(KEYS, ARGV)
    if fast then return fast end
  end
  local early = begin(KEYS, ARGV, 1, false, ARGV[4])
  if early then return early end
  local owner = ARGV[1]
  local bad = prune()
  if bad then return {-4, bad} end
  local mine = owner_entry(owner)
  if mine == false then return {-4, 'o:' .. owner} end
  local found = mine ~= nil and remove_hold(owner, mine, ARGV[2])
  finish()
  if found then return {1} end
  return {0, opt(fence), get('x') or '-'}
end
