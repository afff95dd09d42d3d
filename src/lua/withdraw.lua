-- withdraw.lua: an acquire or an upgrade gave up (timeout, cancelled): takes its writer
-- out of the queue (or its upgrade out of pending) and gives back the hold it may have
-- been handed meanwhile, in one step (two steps could let a hand-off slip in between).
-- An upgrade that names the upgradable hold it started from keeps it: a write hold
-- granted meanwhile turns back into that upgradable hold (with the write's fence and
-- deadline), so that `upgrade_timeout` can give the caller its guard back. O(1).
--
-- KEYS[1]  lock hash (its release channel is KEYS[1] .. ':released', same slot)
-- ARGV[1]  owner token
-- ARGV[2]  hold id of the acquire (of the write hold, for an upgrade)
-- ARGV[3]  (optional) id of the upgradable hold an upgrade started from
-- Returns {1}; {-3, type}, {-4, field}: see lib
local function withdraw(KEYS, ARGV)
  local early = begin(KEYS, ARGV, 1)
  if early then return early end
  local owner, id, from = ARGV[1], ARGV[2], ARGV[3]
  local bad = prune()
  if bad then return {-4, bad} end
  local q = queued_entry(owner)
  if q and q.id == id then dequeue(owner, q) end
  -- an upgrade that gave up: the upgradable hold stays, readers may enter again
  if upgrader == owner and pending == id then pending, pending_lease = nil, nil end
  local mine = owner_entry(owner)
  if mine == false then return {-4, 'o:' .. owner} end
  if mine ~= nil then
    local kept = false
    if from ~= nil then
      for _, h in ipairs(mine.holds) do
        if h[2] == id and h[1] == 'w' then
          -- the upgrade was granted as it gave up: back to the upgradable hold. No other
          -- owner holds (the write excluded them), so it is the upgrader again
          h[1], h[2] = 'u', from
          upgrader = owner
          if writer == owner and not has_write(mine) then writer = nil end
          put('o:' .. owner, format_owner(mine))
          kept = true
          break
        end
      end
    end
    if not kept then remove_hold(owner, mine, id) end
  end
  finish()
  return {1}
end
