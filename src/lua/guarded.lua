-- guarded.lua: commands on keys of the lock's slot, run only while the caller's hold is
-- on the server and its deadline, by the server's clock, has not passed. The check and
-- the commands are one function call on one node: a hold that is gone (its lease ran out,
-- broken by force_release, released, or lost in a failover) runs nothing. Reads the
-- caller's entry only (O(1) in the lock's entries), and writes nothing of the lock.
--
-- KEYS[1]    lock hash (see lib)
-- KEYS[2..]  the keys the commands name, declared so that the cluster checks their slot
-- ARGV[1]    owner token
-- ARGV[2]    hold id
-- ARGV[3]    '1' when a command writes: the hold must be a write hold; '0' for reads,
--            which any hold allows
-- ARGV[4..]  the commands, one after another: <number of words> <command> <word>...
-- Returns
--   {1, {{0, reply} or {1, error}, ...}}  each command's reply, in order. A command that
--        fails does not stop the next and undoes nothing (as in MULTI/EXEC)
--   {2}    the hold is not there, or its deadline has passed: nothing ran
--   {-5}   a command writes and the hold is not a write hold: nothing ran
--   {-6}   a declared key or a command's word is the lock's own hash or channel: nothing
--          ran (the client refuses every lock's keys before sending; this is the second
--          line, for a client that did not)
--   {-3, type}, {-4, field}: see lib
local function guarded(KEYS, ARGV)
  local early = begin(KEYS, ARGV, 1)
  if early then return early end
  local owner, id, writes = ARGV[1], ARGV[2], ARGV[3] == '1'
  -- a DEL, HDEL or PEXPIRE of the lock's own hash would let a second writer in and drop
  -- the fence's tombstone: refuse before anything runs. Every word is compared, not only
  -- the keys' places (which this function does not know): a value spelled as the lock's key
  -- is refused too, which costs nothing real
  local own_channel = KEYS[1] .. ':released'
  for k = 2, #KEYS do
    if KEYS[k] == KEYS[1] or KEYS[k] == own_channel then return {-6} end
  end
  for k = 4, #ARGV do
    if ARGV[k] == KEYS[1] or ARGV[k] == own_channel then return {-6} end
  end
  local mine = owner_entry(owner)
  if mine == false then return {-4, 'o:' .. owner} end
  local hold = nil
  if mine ~= nil then
    for _, h in ipairs(mine.holds) do
      if h[2] == id and h[4] > now then hold = h end
    end
  end
  if hold == nil then return {2} end
  if writes and hold[1] ~= 'w' then return {-5} end
  local replies = {}
  local i = 4
  while i <= #ARGV do
    local n = tonumber(ARGV[i])
    local words = {}
    for j = 1, n do words[j] = ARGV[i + j] end
    local r = redis.pcall(unpack(words))
    if type(r) == 'table' and r['err'] ~= nil then
      replies[#replies + 1] = {1, r['err']}
    else
      replies[#replies + 1] = {0, r}
    end
    i = i + n + 1
  end
  return {1, replies}
end
