-- fast_release.lua: the release of the only hold of the only owner of a lock that nobody
-- waits for, the common uncontended case: the hash becomes a tombstone (the summary
-- alone, which remembers the last fence for FENCE_MEMORY), nothing is published. Runs
-- FIRST, before head.lua, and reads only the summary and the caller's entry; lib.lua +
-- release.lua would do the same in this case after parsing everything. In every other
-- case (other holds or owners, a queued writer, waiting readers, an expiry bound that
-- has passed, another layout, a key of another type) it does nothing and the general
-- script decides.
--
-- KEYS, ARGV: as release.lua
-- Returns
--   {1}   released; otherwise falls through
local F = redis.pcall('HMGET', KEYS[1], 's', 'o:' .. ARGV[1])
if F[1] and F[2] then
  local layout, fence, n, dl, _, qh, qt, rw = string.match(F[1], SUMMARY)
  local m, id = string.match(F[2], HOLD)
  -- one owner holds ('1'); the queue head equals its tail; no reader waits ('-'); the
  -- caller's entry has exactly one hold, and it is the one given back
  if layout == LAYOUT and n == '1' and qh == qt and rw == '-' and id == ARGV[2]
    and string.find(fence, '^%d+$') and string.find(dl, '^%d+$') then
    -- before the earliest-deadline bound, no entry has expired: the caller is the one
    -- owner, and no other entry needs pruning first
    local now = server_time()
    if now < tonumber(dl) then
      redis.call('HDEL', KEYS[1], 'o:' .. ARGV[1], 'w', 'u')
      redis.call('HSET', KEYS[1], 's', format_summary(tonumber(fence), 0, nil, 0, tonumber(qh), tonumber(qt), nil))
      redis.call('PEXPIRE', KEYS[1], FENCE_MEMORY)
      return {1}
    end
  end
end
