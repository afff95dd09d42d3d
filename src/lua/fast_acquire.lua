-- fast_acquire.lua: the acquire of a free lock, the common uncontended case: its hash
-- does not exist, or is a tombstone (the summary alone: nobody holds, queues or waits;
-- see lib.lua's finish). Called first by acquire(), before begin(). It writes exactly
-- what the general path would write for such a grant (with the same encoders), without
-- its parsing and bookkeeping: the summary alone, carrying the one hold; a PEXPIREAT
-- only when the key's expiry needs more. In every other case (another summary, a key of
-- another type or layout, arguments the general path would refuse) it returns nil and
-- the general path decides.
--
-- KEYS, ARGV: as acquire.lua; only ARGV[5] '0' and '1' take this path ('2', a hold
--             granted only to an owner that holds already, is never granted on a free
--             lock; '3' comes from a waiter whose last attempt found the lock busy, so
--             it is most likely still busy and this path's read would be wasted)
-- Returns
--   {1, fence}   granted; nil: not taken here
local function fast_acquire(KEYS, ARGV)
  if ARGV[5] ~= '1' and ARGV[5] ~= '0' then return nil end
  local m, lease = ARGV[1], ARGV[4]
  if not (m == 'r' or m == 'w' or m == 'u') or not lease or not string.find(lease, '^[1-9]%d*$') then
    return nil
  end
  local s = redis.pcall('HGET', KEYS[1], 's')
  -- the tombstone's last fence, queue, and expiry (as a number, and as its digits)
  local last, qh, qt, ex, ex_digits = nil, '0', '0', nil, nil
  if s == false then
    if redis.call('EXISTS', KEYS[1]) == 1 then return nil end
  elseif type(s) == 'string' then
    -- a tombstone with an empty queue (its numbers are digits: arithmetic reads them, as
    -- it reads the lease, checked above, without a call to tonumber: see server_time)
    local f, h, t, e = string.match(s, TOMBSTONE)
    if f == nil or h ~= t then return nil end
    last, qh, qt, ex, ex_digits = f + 0, h, t, e + 0, e
  else
    return nil
  end
  local now, now_us = server_time()
  local fence = fmt(fence_after(last, now_us))
  local deadline = now + lease
  local expiry = expiry_for(deadline, now, ex)
  local d = fmt(deadline)
  -- one owner, both deadline bounds on its hold, the queue as it was (empty), no
  -- waiting reader, the key's expiry, the hold itself at the end (the lease as sent:
  -- digits only, checked above)
  local summary = summary_text(fence, '1', d, d, qh, qt, '-', expiry and fmt(expiry) or ex_digits,
    hold_text(m, ARGV[3], fence, d, lease), ARGV[2])
  redis.call('HSET', KEYS[1], 's', summary)
  if expiry then redis.call('PEXPIREAT', KEYS[1], expiry) end
  return {1, fence}
end
