-- renew.lua: extends the leases of several owners of one lock in one call: O(1) per
-- owner (its own entry, read in one HMGET and written in one HSET), so renewing n owners
-- costs n, not n squared. The client sends at most a few hundred owners per call, so
-- that no call holds the server for long.
--
-- KEYS[1]  lock hash (its release channel is KEYS[1] .. ':released', same slot)
-- ARGV[1]  lease in ms
-- ARGV[2..] owner tokens
-- Returns {1, list}: one entry per owner, in order: the space-separated ids of the holds
-- it still has ('' when it has none left: its lease ran out or its holds were removed).
-- {-3, type}, {-4, field}: see lib
local lease = tonumber(ARGV[1])
local bad = prune()
if bad then return {-4, bad} end
local fields = {}
for i = 2, #ARGV do fields[#fields + 1] = 'o:' .. ARGV[i] end
local out = {}
if #fields > 0 then
  local values = redis.call('HMGET', key, unpack(fields))
  local entries = {}
  for i, v in ipairs(values) do
    if v then
      local e = parse_owner(v)
      if e == nil then return {-4, fields[i]} end
      entries[i] = e
    end
  end
  local set = {}
  for i = 1, #fields do
    local e = entries[i]
    if e == nil then
      out[i] = ''
    else
      e.deadline = now + lease
      set[#set + 1] = fields[i]
      set[#set + 1] = format_owner(e)
      local ids = {}
      for _, h in ipairs(e.holds) do ids[#ids + 1] = h[2] end
      out[i] = table.concat(ids, ' ')
    end
  end
  if #set > 0 then
    redis.call('HSET', key, unpack(set))
    deadline_set(now + lease)
  end
end
finish()
return {1, out}
