-- state.lua: the live state of a lock, for diagnostics: O(n), the one function that reads
-- the whole hash (expired entries are left out, and dropped).
--
-- KEYS[1]  lock hash (its release channel is KEYS[1] .. ':released', same slot)
-- Returns {1, fence or '-', {owner, read holds, write holds, upgradable holds,
--          lease left ms, held for ms, renewed ago ms, lease ms, ...},
--          {queued writer owners, first first},
--          {owners of readers with a place in the queue, first first}}
-- {-3, type}, {-4, field}: see lib
-- the fields that are not entries (see the hash layout); any other is not this layout's
local SUMMARY_FIELD = {s = true, w = true, u = true, x = true}
local function state(KEYS, ARGV)
  local early = begin(KEYS, ARGV, 0)
  if early then return early end
  local raw = all_fields()
  local holders, waiting, readers = {}, {}, {}
  for i = 1, #raw, 2 do
    local f, v = raw[i], raw[i + 1]
    local p = string.sub(f, 1, 2)
    if p == 'o:' then
      local e = parse_owner(v)
      if e == nil then return {-4, f} end
      -- the holds whose own deadline has not passed; the lease left is the latest's, and
      -- the owner has held since the earliest one's grant: its fence, the server's time
      -- in µs when it was granted (a fence above the clock, after a failover to a master
      -- whose clock is behind, reads as a shorter hold)
      -- the latest-running hold's lease, and how long ago its last grant or renewal was
      local r, w, u, last, first, lease = 0, 0, 0, nil, nil, 0
      for _, h in ipairs(e.holds) do
        if h[4] > now then
          if h[1] == 'w' then w = w + 1 elseif h[1] == 'u' then u = u + 1 else r = r + 1 end
          if last == nil or h[4] > last then last, lease = h[4], h[5] end
          if first == nil or h[3] < first then first = h[3] end
        end
      end
      if last ~= nil then
        holders[#holders + 1] = string.sub(f, 3)
        holders[#holders + 1] = r
        holders[#holders + 1] = w
        holders[#holders + 1] = u
        holders[#holders + 1] = last - now
        holders[#holders + 1] = math.max(now - math.floor(first / 1000), 0)
        holders[#holders + 1] = math.max(now - (last - lease), 0)
        holders[#holders + 1] = lease
      end
    elseif p == 'q:' then
      local q = parse_queued(v)
      if q == nil then return {-4, f} end
      -- (a writer's place the head passed is the place of a hold handed over, not taken
      -- yet: its owner is listed among the holders)
      if q.deadline > now and not handed_place(q) then
        local line = waiting
        if q.reader then line = readers end
        line[#line + 1] = {q.ticket, string.sub(f, 3)}
      end
    elseif p ~= 't:' and SUMMARY_FIELD[f] == nil then
      return {-4, f}
    end
  end
  -- owners in the order of their tickets (the readers of one group in name order)
  local function names_of(line)
    table.sort(line, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
    local names = {}
    for _, q in ipairs(line) do names[#names + 1] = q[2] end
    return names
  end
  local bad = prune()
  if bad then return {-4, bad} end
  finish()
  return {1, opt(fence), holders, names_of(waiting), names_of(readers)}
end
