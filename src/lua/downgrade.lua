-- downgrade.lua: turns one write hold into a read or an upgradable read hold, or an
-- upgradable read hold into a read hold, in one step, so that no writer can get in
-- between. O(1).
--
-- KEYS[1]  lock hash (its release channel is KEYS[1] .. ':released', same slot)
-- ARGV[1]  owner token
-- ARGV[2]  id of the hold to give up (write, or upgradable read)
-- ARGV[3]  id of the new hold
-- ARGV[4]  lease in ms
-- ARGV[5]  mode of the new hold: 'r', or 'u' (from write only)
-- Returns
--   {1, fence}  the new hold, with a new fence
--   {0}         no such hold (its lease had run out)
--   {-3, type}, {-4, field}: see lib
local function downgrade(KEYS, ARGV)
  local early = begin(KEYS, ARGV, 1)
  if early then return early end
  local owner, from, to, lease, mode = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
  local bad = prune()
  if bad then return {-4, bad} end
  local mine = owner_entry(owner)
  if mine == false then return {-4, 'o:' .. owner} end
  if mine ~= nil then
    for _, h in ipairs(mine.holds) do
      if h[2] == to then return {1, h[3]} end
    end
    for i, h in ipairs(mine.holds) do
      if h[2] == from and (h[1] == 'w' or (h[1] == 'u' and mode == 'r')) then
        if mode == 'u' and upgrader ~= nil and upgrader ~= owner then break end
        table.remove(mine.holds, i)
        if h[1] == 'u' and not has_upgradable(mine) then upgrader, pending, pending_lease = nil, nil, nil end
        if not has_write(mine) then writer = nil end
        local f = grant(owner, mine, mode, to, lease)
        finish()
        return {1, f}
      end
    end
  end
  finish()
  return {0}
end
