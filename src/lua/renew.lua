-- renew.lua: extends the leases of several owners of one lock in one call: O(1) per
-- owner (its own entry), so renewing n owners costs n, not n squared.
--
-- KEYS[1]  lock hash; KEYS[2] release channel
-- ARGV[1]  lease in ms
-- ARGV[2]  publish command: 'spublish', 'publish', or ''
-- ARGV[3..] owner tokens
-- Returns {1, list}: one entry per owner, in order: the space-separated ids of the holds
-- it still has ('' when it has none left: its lease ran out or its holds were removed).
-- {-3, type}, {-4, field}: see lib
local lease = tonumber(ARGV[1])
local bad = prune()
if bad then return {-4, bad} end
local out = {}
for i = 3, #ARGV do
  local o = ARGV[i]
  local e = owner_entry(o)
  if e == false then return {-4, 'o:' .. o} end
  if e == nil then
    out[#out + 1] = ''
  else
    e.deadline = now + lease
    redis.call('HSET', key, 'o:' .. o, format_owner(e))
    deadline_set(e.deadline)
    local ids = {}
    for _, h in ipairs(e.holds) do ids[#ids + 1] = h[2] end
    out[#out + 1] = table.concat(ids, ' ')
  end
end
finish(ARGV[2])
return {1, out}
