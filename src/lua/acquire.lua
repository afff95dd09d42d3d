-- acquire.lua: one attempt to take a read or write hold. O(1): reads the summary, this
-- owner's entry and, when needed, the queue head.
--
-- KEYS[1]  lock hash (its release channel is KEYS[1] .. ':released', same slot)
-- ARGV[1]  'r' (read), 'w' (write) or 'u' (upgradable read: shares with readers, at most
--          one owner at a time, no writer while it lasts)
-- ARGV[2]  owner token
-- ARGV[3]  hold id, unique per owner (a retried attempt with the same id is not granted
--          twice, and a hold handed over while queued is found under it)
-- ARGV[4]  lease in ms
-- ARGV[5]  '1': the caller waits if this attempt fails: a writer joins the queue (or
--          keeps its place), a reader (or upgradable reader) leaves its mark so that
--          releases wake it; '2': granted only if the owner holds already (a guard
--          taking another hold as its owner), never waits; '3': as '1', from a caller
--          whose last attempt found the lock busy (fast_acquire.lua is skipped)
-- Returns
--   {1, fence, others}  granted (fence as a decimal string); others: 1 when another
--                 owner holds or anyone waits after this grant, else 0 (a hint, not a
--                 promise: the client skips the fast paths of this hold's release and
--                 of its next attempt, which would most likely fall through)
--   {0, wait_ms}  not granted; nothing can change without a release message for wait_ms
--   {-1}          write asked by an owner that holds only read: upgrade deadlock
--   {-3, type}, {-4, field}: see lib
local function acquire(KEYS, ARGV)
  if not GENERAL_ONLY then
    local fast = fast_acquire(KEYS, ARGV)
    if fast then return fast end
  end
  local early = begin(KEYS, ARGV, 2)
  if early then return early end
  local mode, owner, id, lease = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
  -- the grant's hint (see Returns), read after finish()
  local function others()
    if held > 1 or qh < qt or rw ~= nil or pending ~= nil then return 1 end
    return 0
  end
  local bad = prune()
  if bad then return {-4, bad} end
  local mine = owner_entry(owner)
  if mine == false then return {-4, 'o:' .. owner} end
  if mine ~= nil then
    -- a retry of a granted attempt, or a hold handed over while this writer was queued
    for _, h in ipairs(mine.holds) do
      if h[2] == id then
        regrant(owner, mine, h, lease)
        finish()
        return {1, h[3], others()}
      end
    end
  end

  local granted = false
  if mode == 'w' then
    if mine ~= nil then
      if writer ~= owner then return {-1} end
      granted = true
    elseif held == 0 then
      local h = head()
      granted = (h == nil or h == owner)
    end
  else
    -- an owner that holds may always add a hold; others wait for writers, held, queued or
    -- about to be (an upgrade that waits for the readers to leave)
    granted = mine ~= nil or (writer == nil and pending == nil and head() == nil)
    -- one upgradable owner at a time
    if mode == 'u' and upgrader ~= nil and upgrader ~= owner then granted = false end
  end

  if ARGV[5] == '2' and mine == nil then granted = false end

  if granted then
    if mode == 'w' then
      local q = queued_entry(owner)
      if q then dequeue(owner, q) end
    end
    local f = grant(owner, mine, mode, id, lease)
    finish()
    return {1, f, others()}
  end

  if ARGV[5] == '1' or ARGV[5] == '3' then
    if mode == 'w' then
      local q = queued_entry(owner)
      if q == false then return {-4, 'q:' .. owner} end
      if q == nil then
        q = {ticket = qt}
        put('t:' .. fmt(qt), owner)
        qt = qt + 1
      end
      q.deadline, q.id, q.lease = now + lease, id, lease
      put('q:' .. owner, format_queued(q))
      deadline_set(q.deadline)
    else
      if rw == nil or rw < now + lease then rw = now + lease end
      deadline_set(rw)
    end
  end
  -- refused: this call freed nothing, unless its prune did
  quiet = not pruned
  finish()
  -- finish() may have handed the free lock to this very writer (it was first in line)
  if mode == 'w' and writer == owner then
    local e = owner_entry(owner)
    if e then
      for _, h in ipairs(e.holds) do
        if h[2] == id then return {1, h[3], others()} end
      end
    end
  end
  return {0, wait_ms(lease)}
end
