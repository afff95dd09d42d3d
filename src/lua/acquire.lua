-- acquire.lua: one attempt to take a read or write hold. O(1): reads the summary, this
-- owner's entries and, when needed, the queue head. Phase-fair: a writer and a group of
-- readers (those that came one after another) wait in one queue, in the order they
-- came; readers never wait for a writer that came after them, and a writer waits only
-- for the readers that came before it.
--
-- KEYS[1]  lock hash (its release channel is KEYS[1] .. ':released', same slot)
-- ARGV[1]  'r' (read), 'w' (write) or 'u' (upgradable read: shares with readers, at most
--          one owner at a time, no writer while it lasts)
-- ARGV[2]  owner token
-- ARGV[3]  hold id, unique per owner (a retried attempt with the same id is not granted
--          twice, and a hold handed over while queued is found under it)
-- ARGV[4]  lease in ms
-- ARGV[5]  '1': the caller waits if this attempt fails: it takes a place in the queue
--          (or keeps its place, for one more lease): a writer its own ticket, a reader
--          (or upgradable reader) a place in the youngest reader group when nothing was
--          queued after that group, else in a new one; '2': granted only if the owner
--          holds already (a guard
--          taking another hold as its owner), never waits; '3': as '1', from a caller
--          whose last attempt found the lock busy (fast_acquire.lua is skipped)
-- ARGV[6]  (optional) '1': the caller counts the lease a taken hand-off has left (the
--          fourth element of the reply below); without it, such a hold is renewed for a
--          whole lease from the call; '2': the caller counts the lease of a taken
--          hand-off from its first attempt under this hold id, so such a hold is taken
--          without reading the clock (lib.lua's take_unclocked)
-- ARGV[7]  (optional) '1': the caller passes the queue's head back to its release (see
--          `others` below, and release.lua's ARGV[4])
-- Returns
--   {1, fence, others}  granted (fence as a decimal string); others: 1 when another
--                 owner holds or anyone waits after this grant, else 0 (a hint, not a
--                 promise: the client skips the fast paths of this hold's release and
--                 of its next attempt, which would most likely fall through); with
--                 ARGV[7] '1' and someone queued, the queue's head ticket field
--                 instead, 't:<ticket>' (the same hint, and the field this hold's
--                 release reads to find who is next: it then reads it in its first
--                 read, one server command less); its lease is ARGV[4] ms from the call
--   {1, fence, others, left}  (ARGV[6] '1') a hold a release handed over while this
--                 writer was queued, taken: its lease is `left` ms from the call (at
--                 most ARGV[4])
--   {1, fence, others, '-'}  (ARGV[6] '2') such a hold, taken: its lease counts from the
--                 caller's first attempt under this hold id (a lease from then at most)
--   {0, wait_ms}  not granted; nothing can change without a release message for wait_ms
--   {-1}          write asked by an owner that holds only read: upgrade deadlock
--   {-3, type}, {-4, field}: see lib
local function acquire(KEYS, ARGV)
  if not GENERAL_ONLY then
    local fast = nil
    if ARGV[6] == '2' then fast = fast_take(KEYS, ARGV) end
    if fast == nil then fast = fast_acquire(KEYS, ARGV) end
    if fast then return fast end
  end
  local unclocked = ARGV[6] == '2'
  local early = begin(KEYS, ARGV, 2, unclocked)
  if early then return early end
  local mode, owner, id, lease = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
  -- the grant's hint (see Returns), read after finish()
  local function others()
    -- (orphaned: places of a group passed by wait for the next call's prune, which
    -- the fast release would skip)
    if qh < qt and ARGV[7] == '1' then return 't:' .. fmt(qh) end
    if held > 1 or qh < qt or pending ~= nil or orphaned then return 1 end
    return 0
  end
  if unclocked then
    -- a waiter the lock was handed to, taking it: no clock needed (see take_unclocked)
    local f = take_unclocked(owner, id)
    if f then return {1, f, others(), '-'} end
    now, now_us = server_time()
  end
  local bad = prune()
  if bad then return {-4, bad} end
  local mine = owner_entry(owner)
  if mine == false then return {-4, 'o:' .. owner} end
  -- this owner's place in the queue, if it has one
  local q = queued_entry(owner)
  if q == false then return {-4, 'q:' .. owner} end
  if mine ~= nil then
    -- a hold handed over while this writer was queued, or a retry of a granted attempt
    for _, h in ipairs(mine.holds) do
      if h[2] == id then
        if handed_place(q) and q.id == id then
          local counts_left = ARGV[6] == '1'
          local left = take_handed(owner, mine, h, q, lease, counts_left)
          finish()
          if counts_left then return {1, h[3], others(), left} end
          return {1, h[3], others()}
        end
        regrant(owner, mine, h, lease)
        finish()
        return {1, h[3], others()}
      end
    end
  end
  if handed_place(q) then
    -- the place of a hold handed over that is gone since (broken, given back): no
    -- place in the queue any more
    dequeue(owner, q)
    q = nil
  end
  -- (the queue's head is read only where it decides: a busy lock's attempt reads none)
  local granted = false
  if mode == 'w' then
    if mine ~= nil then
      if writer ~= owner then return {-1} end
      granted = true
    elseif held == 0 then
      -- first in the queue, or nobody queued
      local hw, _, hg = head()
      granted = hw == owner or (hw == nil and hg == nil)
    end
  else
    if mine ~= nil then
      -- an owner that holds may always add a hold
      granted = true
    elseif writer == nil and pending == nil then
      -- no writer holds, nor an upgrade waits for the readers to leave; readers enter
      -- when their group is first in the queue, a new reader when no writer is queued
      -- at all (the queue is empty, or is one reader group)
      local hw, _, hg = head()
      if q and q.reader and passed(q) then
        -- its place passed by (its group was dropped): it comes as a new reader
        del('q:' .. owner)
        q = nil
      end
      if q and q.reader then
        granted = hg == q.ticket
      else
        granted = hw == nil and (hg == nil or hg == qt - 1)
      end
    end
    -- one upgradable owner at a time
    if mode == 'u' and upgrader ~= nil and upgrader ~= owner then granted = false end
  end

  if ARGV[5] == '2' and mine == nil then granted = false end
  -- this call frees nothing, unless its prune did (or the queue's head moved on: see
  -- finish)
  quiet = not pruned

  if granted then
    -- its place, if it had one, is given up (an owner's writer place stays for its
    -- writer when its reader is granted)
    if q and q.reader == (mode ~= 'w') then dequeue(owner, q) end
    local f = grant(owner, mine, mode, id, lease)
    finish()
    return {1, f, others()}
  end

  if ARGV[5] == '1' or ARGV[5] == '3' then
    local reader = mode ~= 'w'
    if q and q.reader ~= reader then
      -- one place per owner: an owner token that waits for read and for write at once
      -- keeps its writer's place; its reader waits without one (woken as any reader)
      if reader then q = false else dequeue(owner, q); q = nil end
    end
    if q ~= false then
      if q == nil then
        if reader then
          q = {reader = true, ticket = join_readers()}
        else
          q = {reader = false, ticket = qt}
          qt = qt + 1
        end
      end
      q.deadline, q.id, q.lease = now + lease, id, lease
      put('q:' .. owner, format_queued(q))
      if not q.reader then put('t:' .. fmt(q.ticket), format_ticket(owner, q)) end
      deadline_set(q.deadline)
    end
  end
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
