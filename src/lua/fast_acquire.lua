-- fast_acquire.lua: the acquire of a free lock, the common uncontended case: its hash
-- does not exist, or is a tombstone (the summary alone: nobody holds, queues or waits;
-- see lib.lua's finish). Runs FIRST, before head.lua. It writes exactly what lib.lua +
-- acquire.lua would write for such a grant, without their parsing and bookkeeping; in
-- every other case (another summary, a key of another type or layout, arguments the
-- general script would refuse) it does nothing and the general script decides.
--
-- KEYS, ARGV: as acquire.lua; only ARGV[5] '0' and '1' take this path ('2', a hold
--             granted only to an owner that holds already, is never granted on a free
--             lock; '3' comes from a waiter whose last attempt found the lock busy, so
--             it is most likely still busy and this path's read would be wasted)
-- Returns
--   {1, fence}   granted; otherwise falls through
if ARGV[5] == '1' or ARGV[5] == '0' then
  -- the lease as the client sends it, digits only: PEXPIRE takes a string as it is
  local m, lease = ARGV[1], ARGV[4]
  local s = redis.pcall('HGET', KEYS[1], 's')
  local last, qh, qt = nil, '0', '0'
  local free = false
  if s == false then
    free = redis.call('EXISTS', KEYS[1]) == 0
  elseif type(s) == 'string' then
    -- a tombstone with an empty queue
    local f, h, t = string.match(s, TOMBSTONE)
    if f and h == t then
      free, last, qh, qt = true, tonumber(f), h, t
    end
  end
  if free and (m == 'r' or m == 'w' or m == 'u') and lease and string.find(lease, '^[1-9]%d*$') then
    -- read once: every string-to-number conversion is a strtod
    local lease_ms = tonumber(lease)
    local time = redis.call('TIME')
    local now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
    -- the fence: above the tombstone's, and at least server time in µs (fence_after in
    -- lib.lua, written out)
    local f = now_us
    if last ~= nil and last + 1 > f then f = last + 1 end
    local fence = string.format('%d', f)
    local deadline = string.format('%d', math.floor(now_us / 1000) + lease_ms)
    -- summary: one owner, both deadline bounds on its hold, the queue as it was (empty),
    -- no waiting readers; the owner's entry with its one hold; 'w' or 'u' for that mode
    -- (format_summary and format_hold in lib.lua, written out)
    local summary = LAYOUT .. ' ' .. fence .. ' 1 ' .. deadline .. ' ' .. deadline .. ' ' .. qh .. ' ' .. qt .. ' -'
    local entry = m .. ARGV[3] .. ':' .. fence .. ':' .. deadline
    if m == 'r' then
      redis.call('HSET', KEYS[1], 's', summary, 'o:' .. ARGV[2], entry)
    else
      redis.call('HSET', KEYS[1], 's', summary, 'o:' .. ARGV[2], entry, m, ARGV[2])
    end
    redis.call('PEXPIRE', KEYS[1], string.format('%d', lease_ms + FENCE_MEMORY))
    return {1, fence}
  end
end
