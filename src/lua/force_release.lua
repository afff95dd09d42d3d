-- force_release.lua: an operator breaks a stuck lock: every hold goes (or every hold of
-- one owner), the channel says so ('x <holds removed> <raised fence>'), the waiters are
-- told as by a release (the first queued writer is handed the lock), and the fence is
-- raised, so that the next grant's fence is above every
-- fence the broken holders had: a resource that checks fences refuses their late writes
-- once the next holder has written. The broken holders learn it at their next renewal.
-- O(n) in the owners: an operator's tool, not for the hot path.
--
-- KEYS[1]  lock hash (its release channel is KEYS[1] .. ':released', same slot)
-- ARGV[1]  the owner token whose holds go, or '' for every owner
-- Returns
--   {1, holds removed, fence or '-'}  the raised fence, which every later grant's is above
--                                     (the last fence when nothing went; '-' if none)
--   {-3, type}, {-4, field}: see lib
local function force_release(KEYS, ARGV)
  local early = begin(KEYS, ARGV, 0)
  if early then return early end
  local only = ARGV[1]
  local bad = prune()
  if bad then return {-4, bad} end
  local raw = all_fields()
  local removed = 0
  for i = 1, #raw, 2 do
    local f = raw[i]
    if string.sub(f, 1, 2) == 'o:' then
      local o = string.sub(f, 3)
      if only == '' or o == only then
        -- through the buffer prune() wrote: an entry it pruned is read as it left it
        local e = owner_entry(o)
        if e == false then return {-4, f} end
        if e ~= nil then
          removed = removed + #e.holds
          for j = #e.holds, 1, -1 do remove_hold(o, e, e.holds[j][2]) end
        end
      end
    end
  end
  -- raised only when a hold went: the next grant goes above it (see fence_after)
  if removed > 0 then
    next_fence()
    -- remembered as 'x' (broken at, kept with the tombstone): a holder whose release was
    -- sent again finds its hold gone, and learns whether a break came after its grant
    -- (it lost the hold) or not (its own first sending gave it back; see release.lua)
    put('x', fmt(fence))
  end
  local raised = fence
  -- said on the channel before the message of the release itself (published by finish),
  -- whether or not anyone waits: those who watch the lock see it was broken, and by which
  -- fence; a waiter takes it for "look again"
  if removed > 0 and PUBLISH ~= '' then
    redis.call(PUBLISH, key .. ':released', 'x ' .. fmt(removed) .. ' ' .. fmt(raised))
  end
  finish()
  return {1, removed, opt(raised)}
end
