-- force_release.lua: an operator breaks a stuck lock: every hold goes (or every hold of
-- one owner, or of one client: its holds AND its places in the queue), the channel says
-- so ('x <holds removed> <raised fence>', and ' <client name>' after it when a client
-- was broken: its waiters, whose places went, learn that they were broken and stop,
-- rather than take a new place at the tail), the waiters are told as by a release (the
-- first queued writer is handed the lock), and the fence is raised, so that the next
-- grant's fence is above every fence the broken holders had: a resource that checks
-- fences refuses their late writes once the next holder has written. The broken holders
-- learn it at their next renewal (or their next call under the hold). O(n) in the owners: an operator's tool, not for the
-- hot path.
--
-- KEYS[1]  lock hash (its release channel is KEYS[1] .. ':released', same slot)
-- ARGV[1]  the owner token whose holds go, or '' for every owner; with ARGV[2] 'c', a
--          client name: every owner token of the shape '<name>/<32 hex>:<n>' (the
--          tokens a client of that name makes) loses its holds and its place in the
--          queue, so that the lock is not handed to another task of a stuck process
-- ARGV[2]  (optional) 'c': ARGV[1] is a client name
-- Returns
--   {1, holds removed, fence or '-', places removed}  the raised fence, which every
--        later grant's is above (the last fence when nothing went; '-' if none), and the
--        places in the queue taken out (0 unless ARGV[2] is 'c')
--   {-3, type}, {-4, field}: see lib
local function force_release(KEYS, ARGV)
  local early = begin(KEYS, ARGV, 0)
  if early then return early end
  local only, by_client = ARGV[1], ARGV[2] == 'c'
  if by_client and only == '' then return {-4, 'client name'} end
  -- whether owner `o`'s holds (and, for a client, its place) go
  local function goes(o)
    if by_client then
      return string.match(o, '^([^/]+)/' .. string.rep('%x', 32) .. ':%d+$') == only
    end
    return only == '' or o == only
  end
  local bad = prune()
  if bad then return {-4, bad} end
  local raw = all_fields()
  local removed, places = 0, 0
  for i = 1, #raw, 2 do
    local f = raw[i]
    local p = string.sub(f, 1, 2)
    if p == 'o:' or (by_client and p == 'q:') then
      local o = string.sub(f, 3)
      if goes(o) then
        if p == 'o:' then
          -- through the buffer prune() wrote: an entry it pruned is read as it left it
          local e = owner_entry(o)
          if e == false then return {-4, f} end
          if e ~= nil then
            removed = removed + #e.holds
            for j = #e.holds, 1, -1 do remove_hold(o, e, e.holds[j][2]) end
            -- the place of a hand-off it had not taken yet goes with the hold (nobody
            -- else would remove it: it is below the queue's head)
            local q = queued_entry(o)
            if handed_place(q) then dequeue(o, q) end
          end
        else
          local q = queued_entry(o)
          if q == false then return {-4, f} end
          if q ~= nil then
            dequeue(o, q)
            places = places + 1
          end
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
  -- fence; a waiter takes it for "look again", but a waiter of a broken client (whose
  -- place went: said even when only places went) for "stop". A client name has no
  -- whitespace, so the message stays four words; a reader that knows only three takes
  -- it for a message it does not read, which is "look again" too. '0' for a lock that
  -- never had a fence (every grant's is above it)
  if (removed > 0 or places > 0) and PUBLISH ~= '' then
    local said = 'x ' .. fmt(removed) .. ' ' .. fmt(raised or 0)
    if by_client then said = said .. ' ' .. only end
    redis.call(PUBLISH, key .. ':released', said)
  end
  finish()
  return {1, removed, opt(raised), places}
end
