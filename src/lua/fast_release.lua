-- fast_release.lua: the release of the only hold of the only owner of a lock that nobody
-- waits for, the common uncontended case: the key goes, nothing is published. Runs after
-- head.lua and before lib.lua + release.lua, which would do the same in this case after
-- parsing everything. In every other case (other holds or owners, a queued writer,
-- waiting readers, an expiry bound that has passed, another layout) it does nothing and
-- the general script decides.
--
-- KEYS, ARGV: as release.lua
-- Returns
--   {1}   released; otherwise falls through
if S[1] and S[4] then
  -- one owner holds ('1'); the queue head equals its tail; no reader waits ('-')
  local layout, dl, qh, qt = string.match(S[1], '^(%d+) %d+ 1 (%d+) %d+ (%d+) (%d+) %-$')
  if layout == LAYOUT and qh == qt then
    -- the caller's entry has exactly one hold, and it is the one given back
    local id = string.match(S[4], '^%d+ [rwu](%d+):%d+$')
    if id ~= nil and id == ARGV[2] then
      T = redis.call('TIME')
      local now = tonumber(T[1]) * 1000 + math.floor(tonumber(T[2]) / 1000)
      -- before the earliest-deadline bound, no entry has expired: the caller is the one
      -- owner, and no other entry needs pruning first
      if now < tonumber(dl) then
        redis.call('DEL', key)
        return {1}
      end
    end
  end
end
