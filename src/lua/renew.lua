-- renew.lua: extends the leases of holds of several owners of one lock in one call: O(1)
-- per owner (its own entry, read in one HMGET and written in finish's one HSET), so renewing n
-- owners costs n, not n squared. The client sends at most a few hundred owners per call,
-- so that no call holds the server for long. Only the holds named are renewed: another
-- process under the same owner token renews its own, and the holds of one that died
-- run out.
--
-- KEYS[1]  lock hash (its release channel is KEYS[1] .. ':released', same slot)
-- ARGV[1]  lease in ms
-- ARGV[2..] '<owner token> <hold id> <hold id> ...', one per owner
-- Returns {1, list}: one entry per owner, in order: the space-separated ids of the holds
-- named that it still has ('' when none is left: their leases ran out or they were
-- removed).
-- {-3, type}, {-4, field}: see lib
local function renew(KEYS, ARGV)
  local early = begin(KEYS, ARGV, 0)
  if early then return early end
  local lease = tonumber(ARGV[1])
  local bad = prune()
  if bad then return {-4, bad} end
  local fields, named = {}, {}
  for i = 2, #ARGV do
    local ids = {}
    local o = nil
    for tok in string.gmatch(ARGV[i], '%S+') do
      if o == nil then o = tok else ids[tok] = true end
    end
    fields[#fields + 1] = 'o:' .. (o or '')
    named[#named + 1] = ids
  end
  local out = {}
  if #fields > 0 then
    local values = redis.call('HMGET', key, unpack(fields))
    local entries = {}
    for i = 1, #fields do
      -- what prune rewrote or dropped in this call (W) wins over what the hash holds: it
      -- is written by finish(), after this function's own writes would be
      -- (the lone hold is the summary's, not a field: begin() put it in the cache)
      local v = W[fields[i]]
      if v == nil then v = values[i] or cache[fields[i]] end
      if cache[fields[i]] == nil then cache[fields[i]] = values[i] end
      if v then
        local e = parse_owner(v)
        if e == nil then return {-4, fields[i]} end
        entries[i] = e
      end
    end
    for i = 1, #fields do
      local e = entries[i]
      if e == nil then
        out[i] = ''
      else
        local ids = {}
        for _, h in ipairs(e.holds) do
          if named[i][h[2]] then
            h[4], h[5] = now + lease, lease
            ids[#ids + 1] = h[2]
          end
        end
        if #ids > 0 then
          put(fields[i], format_owner(e))
          deadline_set(now + lease)
        end
        out[i] = table.concat(ids, ' ')
      end
    end
  end
  -- a renewal frees nothing, unless its prune did
  quiet = not pruned
  finish()
  return {1, out}
end
