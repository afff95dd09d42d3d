-- release.lua: gives back exactly one hold; idempotent.
--
-- KEYS[1]  lock hash; KEYS[2] release channel
-- ARGV[1]  owner token
-- ARGV[2]  hold id
-- ARGV[3]  publish command: 'spublish', 'publish', or ''
-- Returns
--   {1}  released
--   {0}  no such hold (released before, or its lease had run out)
--   {-3, type}, {-4, field}: see prelude
local owner, id = ARGV[1], ARGV[2]
local mine = owners[owner]
local found = false
if mine ~= nil then
  for i, h in ipairs(mine.holds) do
    if h[2] == id then
      table.remove(mine.holds, i)
      found = true
      break
    end
  end
  if found then save_owner(owner) end
end
finish(ARGV[3])
if found then return {1} end
return {0}
