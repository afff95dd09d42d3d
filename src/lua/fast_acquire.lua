-- fast_acquire.lua: the acquire of a lock whose key does not exist, the common
-- uncontended case (the release that frees a lock with nobody waiting deletes its key).
-- Runs after head.lua and before lib.lua + acquire.lua; it writes exactly what they
-- would write for a fresh grant, without their parsing and bookkeeping. In every other
-- case it does nothing and the general script decides.
--
-- KEYS, ARGV: as acquire.lua ('2', a hold granted only to an owner that holds already,
--             is never granted on a free lock, so it takes the general path)
-- Returns
--   {1, fence}   granted; otherwise falls through
if S[1] == false and S[2] == false and S[3] == false and ARGV[5] ~= '2' then
  local m, lease = ARGV[1], tonumber(ARGV[4])
  if (m == 'r' or m == 'w' or m == 'u') and lease and lease >= 1
      and redis.call('EXISTS', key) == 0 then
    T = redis.call('TIME')
    local now = tonumber(T[1]) * 1000 + math.floor(tonumber(T[2]) / 1000)
    -- a fresh hash has no last fence: the fence is server time in microseconds
    local fence = string.format('%.0f', tonumber(T[1]) * 1000000 + tonumber(T[2]))
    local deadline = string.format('%.0f', now + lease)
    -- summary: layout, fence, one owner, both deadline bounds, an empty queue, no
    -- waiting readers; the owner's entry with its one hold; 'w' or 'u' for that mode
    local fields = {
      's', LAYOUT .. ' ' .. fence .. ' 1 ' .. deadline .. ' ' .. deadline .. ' 0 0 -',
      'o:' .. ARGV[2], deadline .. ' ' .. m .. ARGV[3] .. ':' .. fence,
    }
    if m ~= 'r' then
      fields[5], fields[6] = m, ARGV[2]
    end
    redis.call('HSET', key, unpack(fields))
    redis.call('PEXPIRE', key, lease)
    return {1, fence}
  end
end
