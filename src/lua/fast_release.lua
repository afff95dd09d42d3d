-- fast_release.lua: the release of the only hold of the only owner of a lock that nobody
-- waits for, the common uncontended case: the hash becomes a tombstone (the summary
-- alone, which remembers the last fence for FENCE_MEMORY or longer: its TTL is kept),
-- nothing is published. Runs
-- FIRST, before head.lua, and reads only the summary and the caller's entry; lib.lua +
-- release.lua would do the same in this case after parsing everything. In every other
-- case (other holds or owners, a queued writer, waiting readers, an expiry bound that
-- has passed, another layout, a key of another type) it does nothing and the general
-- script decides.
--
-- KEYS, ARGV: as release.lua; ARGV[3] '1' skips this path (the grant said that others
--             held or waited then: its read would most likely be wasted)
-- Returns
--   {1}   released; otherwise falls through
local F = ARGV[3] ~= '1' and redis.pcall('HMGET', KEYS[1], 's', 'o:' .. ARGV[1])
if F and F[1] and F[2] then
  -- one owner holds, no reader waits; the queue head equals its tail; the caller's entry
  -- has exactly one hold, and it is the one given back
  local fence, dl, qh, qt = string.match(F[1], ONE_OWNER)
  if fence and qh == qt and string.match(F[2], SOLE_HOLD) == ARGV[2] then
    -- before the earliest-deadline bound, no entry has expired: the caller is the one
    -- owner, and no other entry needs pruning first
    local time = redis.call('TIME')
    if tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) < tonumber(dl) then
      redis.call('HDEL', KEYS[1], 'o:' .. ARGV[1], 'w', 'u')
      -- the tombstone summary (format_summary in lib.lua, written out)
      redis.call('HSET', KEYS[1], 's', LAYOUT .. ' ' .. fence .. ' 0 - 0 ' .. qh .. ' ' .. qt .. ' -')
      -- no PEXPIRE: the key expires FENCE_MEMORY after the latest deadline bound (every
      -- script that moves that bound sets it so), and that deadline has not passed, so
      -- the tombstone already outlives this release by FENCE_MEMORY or more; a write
      -- saved per release (one call less, and one command less to replicate and log)
      return {1}
    end
  end
end
