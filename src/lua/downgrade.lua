-- downgrade.lua: turns one write hold into a read hold in one step, so that no writer
-- can get in between. O(1).
--
-- KEYS[1]  lock hash; KEYS[2] release channel
-- ARGV[1]  owner token
-- ARGV[2]  id of the write hold
-- ARGV[3]  id of the new read hold
-- ARGV[4]  lease in ms
-- ARGV[5]  publish command: 'spublish', 'publish', or ''
-- Returns
--   {1, fence}  the read hold, with a new fence
--   {0}         no such write hold (its lease had run out)
--   {-3, type}, {-4, field}: see lib
local owner, wid, rid, lease = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local bad = prune()
if bad then return {-4, bad} end
local mine = owner_entry(owner)
if mine == false then return {-4, 'o:' .. owner} end
if mine ~= nil then
  for _, h in ipairs(mine.holds) do
    if h[2] == rid then return {1, h[3]} end
  end
  for i, h in ipairs(mine.holds) do
    if h[2] == wid and h[1] == 'w' then
      table.remove(mine.holds, i)
      if not has_write(mine) then writer = nil end
      local f = grant(owner, mine, 'r', rid, lease)
      finish(ARGV[5])
      return {1, f}
    end
  end
end
finish(ARGV[5])
return {0}
