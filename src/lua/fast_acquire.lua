-- fast_acquire.lua: the acquire of a lock whose key does not exist, the common
-- uncontended case (the release that frees a lock with nobody waiting deletes its key).
-- Runs FIRST, before head.lua: a free lock is told by one EXISTS, so the summary is not
-- read. It writes exactly what lib.lua + acquire.lua would write for a fresh grant,
-- without their parsing and bookkeeping; in every other case (the key exists, whatever
-- its type or layout; arguments the general script would refuse) it does nothing and
-- the general script decides.
--
-- KEYS, ARGV: as acquire.lua ('2', a hold granted only to an owner that holds already,
--             is never granted on a free lock, so it takes the general path)
-- Returns
--   {1, fence}   granted; otherwise falls through
if ARGV[5] ~= '2' and redis.call('EXISTS', KEYS[1]) == 0 then
  -- the lease as the client sends it, digits only: PEXPIRE takes the string as it is
  -- (a Lua number would be turned back into a string with a float's format)
  local m, lease = ARGV[1], ARGV[4]
  if (m == 'r' or m == 'w' or m == 'u') and lease and string.find(lease, '^[1-9]%d*$') then
    local time = redis.call('TIME')
    local usec = tonumber(time[2])
    -- a fresh hash has no last fence: the fence is server time in microseconds, the
    -- seconds followed by the microseconds on six digits (no arithmetic on 16 digits);
    -- '%d' formats an integer without the cost of a float's '%.0f'
    local fence = time[1] .. string.format('%06d', usec)
    local deadline = string.format('%d', tonumber(time[1]) * 1000 + math.floor(usec / 1000) + tonumber(lease))
    -- summary: layout, fence, one owner, both deadline bounds, an empty queue, no
    -- waiting readers; the owner's entry with its one hold; 'w' or 'u' for that mode
    local summary = LAYOUT .. ' ' .. fence .. ' 1 ' .. deadline .. ' ' .. deadline .. ' 0 0 -'
    local entry = deadline .. ' ' .. m .. ARGV[3] .. ':' .. fence
    if m == 'r' then
      redis.call('HSET', KEYS[1], 's', summary, 'o:' .. ARGV[2], entry)
    else
      redis.call('HSET', KEYS[1], 's', summary, 'o:' .. ARGV[2], entry, m, ARGV[2])
    end
    redis.call('PEXPIRE', KEYS[1], lease)
    return {1, fence}
  end
end
