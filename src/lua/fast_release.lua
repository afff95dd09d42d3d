-- fast_release.lua: the release of the only hold of the only owner of a lock that nobody
-- waits for, the common uncontended case: the key goes, nothing is published. Runs FIRST,
-- before head.lua, and reads only the summary and the caller's entry; lib.lua +
-- release.lua would do the same in this case after parsing everything. In every other
-- case (other holds or owners, a queued writer, waiting readers, an expiry bound that
-- has passed, another layout, a key of another type) it does nothing and the general
-- script decides.
--
-- No clock when every deadline is the same (dl = du, as after a fresh grant): every
-- script leaves the key's TTL on the latest deadline du (fast_acquire.lua, and lib.lua's
-- finish whenever du changes), so the key still existing means that deadline has not
-- passed (Redis expires keys by the time the script started), and the caller's hold is
-- live. Otherwise TIME decides whether an entry has expired and needs pruning.
--
-- KEYS, ARGV: as release.lua
-- Returns
--   {1}   released; otherwise falls through
local F = redis.pcall('HMGET', KEYS[1], 's', 'o:' .. ARGV[1])
if F[1] and F[2] then
  -- one owner holds ('1'); the queue head equals its tail; no reader waits ('-')
  local layout, dl, du, qh, qt = string.match(F[1], '^(%d+) %d+ 1 (%d+) (%d+) (%d+) (%d+) %-$')
  -- the caller's entry has exactly one hold, and it is the one given back
  if layout == LAYOUT and qh == qt and string.match(F[2], '^%d+ [rwu](%d+):%d+$') == ARGV[2] then
    local live = dl == du
    if not live then
      -- before the earliest-deadline bound, no entry has expired: the caller is the one
      -- owner, and no other entry needs pruning first
      local time = redis.call('TIME')
      live = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) < tonumber(dl)
    end
    if live then
      redis.call('DEL', KEYS[1])
      return {1}
    end
  end
end
