-- state.lua: the live state of a lock, for diagnostics (expired entries are dropped).
--
-- KEYS[1]  lock hash; KEYS[2] release channel
-- ARGV[1]  publish command: 'spublish', 'publish', or ''
-- Returns {2, fence or '', {owner, read holds, write holds, lease left ms, ...},
--          {queued writer owners, first first}}
-- {-3, type}, {-4, field}: see prelude
local held = {}
for o, e in pairs(owners) do
  local r, w = 0, 0
  for _, h in ipairs(e.holds) do
    if h[1] == 'w' then w = w + 1 else r = r + 1 end
  end
  held[#held + 1] = o
  held[#held + 1] = r
  held[#held + 1] = w
  held[#held + 1] = e.deadline - now
end
local waiting = {}
for o, q in pairs(queue) do waiting[#waiting + 1] = {q.seq, o} end
table.sort(waiting, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
local names = {}
for _, q in ipairs(waiting) do names[#names + 1] = q[2] end
finish(ARGV[1])
local f = ''
if fence ~= nil then f = fmt(fence) end
return {2, f, held, names}
