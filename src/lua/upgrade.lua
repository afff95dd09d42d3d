-- upgrade.lua: turns the caller's upgradable read hold into a write hold, with a new
-- fence, and no other writer in between. Granted at once when the caller is the only
-- owner that holds; otherwise (when the caller waits) the upgrade is left pending: new
-- readers wait, and the release that lets the last other reader out grants it (before
-- any queued writer). O(1).
--
-- KEYS[1]  lock hash (its release channel is KEYS[1] .. ':released', same slot)
-- ARGV[1]  owner token
-- ARGV[2]  id of the upgradable hold
-- ARGV[3]  id of the write hold
-- ARGV[4]  lease in ms
-- ARGV[5]  '1': wait (leave the upgrade pending); '0': one attempt only
-- Returns
--   {1, fence}    the write hold (also for a retry, or when it was granted meanwhile)
--   {0, wait_ms}  readers still hold; pending if ARGV[5] is '1'
--   {2}           no such upgradable hold (its lease had run out)
--   {-3, type}, {-4, field}: see lib
local function upgrade(KEYS, ARGV)
  local early = begin(KEYS, ARGV, 1)
  if early then return early end
  local owner, uid, wid, lease = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
  local bad = prune()
  if bad then return {-4, bad} end
  local mine = owner_entry(owner)
  if mine == false then return {-4, 'o:' .. owner} end
  local at = nil
  if mine ~= nil then
    for i, h in ipairs(mine.holds) do
      if h[2] == wid and h[1] == 'w' then
        regrant(owner, mine, h, lease)
        finish()
        return {1, h[3]}
      end
      if h[2] == uid and h[1] == 'u' then at = i end
    end
  end
  if at == nil then
    finish()
    return {2}
  end
  if held == 1 and (writer == nil or writer == owner) then
    table.remove(mine.holds, at)
    pending, pending_lease = nil, nil
    -- still the upgrader if it holds another upgradable hold (an explicit owner token)
    if not has_upgradable(mine) then upgrader = nil end
    local f = grant(owner, mine, 'w', wid, lease)
    finish()
    return {1, f}
  end
  if ARGV[5] == '1' then pending, pending_lease, pending_from = wid, lease, uid end
  finish()
  return {0, wait_ms(lease)}
end
