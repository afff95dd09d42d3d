-- lib.lua: the general part of every lock script, after head.lua (and a fast path, for
-- the scripts that have one). It parses what head.lua read (the summary fields and the
-- caller's own entries, read in ONE HMGET, never the whole hash), buffers every write,
-- and sends them in one HSET (and one HDEL) at the end; the helpers cost nothing unless
-- a script calls them.
--
-- KEYS[1]  the lock hash, <prefix>:{<name>}   (layout: see the `scripts` module docs)
--          (its release channel, <prefix>:{<name>}:released, is in the same slot)
--
-- Early returns of every script:
--   {-3, type}   the key holds another type (nothing is touched; see head.lua)
--   {-4, field}  the hash is of another layout, or has a malformed field (nothing is
--                touched: every field a script reads is checked before it writes)
-- The summary 's' (see layout.lua), kept up to date by every script, and 'w', the owner
-- that holds write; 'u', '<owner>' of the upgradable hold, or '<owner> <id> <lease>'
-- while it waits to upgrade: hold <id> is to be granted write as soon as it is the only
-- owner that holds.
-- The writers of the encodings of layout.lua, the server's clock, and the hand-off
-- message:

-- Integers as digits: exact below 2^53, never in exponent notation ('%d' also costs far
-- less than a float's '%.0f').
local function fmt(n) return string.format('%d', n) end

-- The server's clock, read once per call: now in ms and in µs.
local function server_time()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return math.floor(us / 1000), us
end

-- A fence above every one granted before: the last one (`last`, nil when none is
-- remembered) + 1, or the server's time in µs when that is higher (a hash made afresh
-- once its tombstone expired).
local function fence_after(last, now_us)
  if last ~= nil and last + 1 > now_us then return last + 1 end
  return now_us
end

-- The summary, of numbers or nil ('-').
local function opt(n) if n == nil then return '-' end return fmt(n) end
local function format_summary(fence, held, dl, du, qh, qt, rw)
  return LAYOUT .. ' ' .. opt(fence) .. ' ' .. fmt(held) .. ' ' .. opt(dl) .. ' ' .. fmt(du)
    .. ' ' .. fmt(qh) .. ' ' .. fmt(qt) .. ' ' .. opt(rw)
end

-- A hold: mode, id (as the client sent it), fence (digits), deadline (ms).
local function format_hold(m, id, fence, deadline) return m .. id .. ':' .. fence .. ':' .. fmt(deadline) end

-- The release message that hands the lock to the writer or upgrader `o`, as its hold
-- `id` with `fence` (see the `scripts` module docs).
local function handoff_message(o, id, fence) return 'g ' .. o .. ' ' .. id .. ' ' .. fence end

local existed = S[1] ~= false
local fence, held, dl, du, qh, qt, rw = nil, 0, nil, 0, 0, 0, nil
if not existed then
  -- no summary: a fresh lock, unless the hash exists (another layout, or not ours)
  if S[2] or S[3] or redis.call('EXISTS', key) == 1 then return {-4, 's'} end
else
  local lv, f, n, a, b, h, q, r = string.match(S[1], SUMMARY)
  if lv ~= LAYOUT then return {-4, 's'} end
  -- the optional numbers: digits, or '-' for none
  for _, v in ipairs({f, a, r}) do
    if v ~= '-' and not string.find(v, '^%d+$') then return {-4, 's'} end
  end
  fence, held, dl, du = tonumber(f), tonumber(n), tonumber(a), tonumber(b)
  qh, qt, rw = tonumber(h), tonumber(q), tonumber(r)
end
local writer = S[2] or nil
-- the upgradable holder, and the write hold it waits for (pending: nil when none), with
-- the upgradable hold it is to replace (pending_from)
local upgrader, pending, pending_lease, pending_from = nil, nil, nil, nil
if S[3] then
  local o, id, l, from = string.match(S[3], '^(%S+) (%d+) (%d+) (%d+)$')
  if o == nil then
    o = string.match(S[3], '^(%S+)$')
    if o == nil then return {-4, 'u'} end
  end
  upgrader, pending, pending_lease, pending_from = o, id, tonumber(l), from
end
local before_s, before_writer, before_u, before_du = S[1], writer, S[3] or nil, du

-- Set by a call that frees nothing itself (a refused attempt, a renewal): it then wakes
-- no reader, unless its prune removed expired entries. A waiting reader's own refused
-- attempt would otherwise wake it (and every other waiting reader) at once, and clear
-- the mark that makes the holder's release wake them.
local quiet = false
-- the expired entries were looked for in this call (see prune)
local pruned = false

-- fields read so far (false: absent), and the writes not sent yet (false: delete)
local cache, W = {}, {}
if OWNER then
  cache['o:' .. OWNER] = S[4]
  cache['q:' .. OWNER] = S[5]
end
local function get(f)
  local w = W[f]
  if w ~= nil then return w end
  local c = cache[f]
  if c == nil then
    c = redis.call('HGET', key, f)
    cache[f] = c
  end
  return c
end
local function put(f, v) W[f] = v end
local function del(f) W[f] = false end

-- the server's time
local now, now_us = server_time()

-- An owner's entry 'o:<owner>' = '<hold> <hold> ...', a hold being
-- '<r|w|u><id>:<fence>:<deadline-ms>' (read, write, upgradable read). Each hold has its
-- own deadline: a grant or renewal sets the deadline of the holds it names and of no
-- other, so that holds of a process that died are not kept alive by a sibling process
-- under the same owner token. Returns {holds = {{mode, id, fence, deadline}, ...}}, or
-- nil when malformed.
local function parse_owner(v)
  local e = {holds = {}}
  for tok in string.gmatch(v, '%S+') do
    local m, id, fe, d = string.match(tok, HOLD)
    if m == nil then return nil end
    e.holds[#e.holds + 1] = {m, id, fe, tonumber(d)}
  end
  if #e.holds == 0 then return nil end
  return e
end

local function format_owner(e)
  local parts = {}
  for _, h in ipairs(e.holds) do parts[#parts + 1] = format_hold(h[1], h[2], h[3], h[4]) end
  return table.concat(parts, ' ')
end

local function has_write(e)
  for _, h in ipairs(e.holds) do if h[1] == 'w' then return true end end
  return false
end

local function has_upgradable(e)
  for _, h in ipairs(e.holds) do if h[1] == 'u' then return true end end
  return false
end

-- A queued writer 'q:<owner>' = '<ticket> <deadline-ms> <hold id> <lease-ms>'; the
-- ticket's field 't:<ticket>' names the owner. Returns a table, or nil when malformed.
local function parse_queued(v)
  local tk, d, id, lease = string.match(v, '^(%d+) (%d+) (%d+) (%d+)$')
  if tk == nil then return nil end
  return {ticket = tonumber(tk), deadline = tonumber(d), id = id, lease = tonumber(lease)}
end

-- the queue entry of owner `o`: nil when it is not queued, false when malformed
local function queued_entry(o)
  local v = get('q:' .. o)
  if not v then return nil end
  return parse_queued(v) or false
end

local function format_queued(q)
  return fmt(q.ticket) .. ' ' .. fmt(q.deadline) .. ' ' .. q.id .. ' ' .. fmt(q.lease)
end

-- a deadline was set: keep the bounds and the key's TTL on it
local function deadline_set(d)
  if dl == nil or d < dl then dl = d end
  if d > du then du = d end
end

-- When the earliest deadline has passed, drops every expired owner and queued writer
-- and computes the summary afresh: the only O(n) step, and it runs once per expiry
-- bound, not per call. Returns nil, or the field that is malformed.
local function prune()
  if dl == nil or now < dl then return nil end
  pruned = true
  local raw = redis.call('HGETALL', key)
  local gone = {}
  local was_upgrader = upgrader
  held, writer, upgrader, dl, du = 0, nil, nil, nil, 0
  for i = 1, #raw, 2 do
    local f, v = raw[i], raw[i + 1]
    local p = string.sub(f, 1, 2)
    if p == 'o:' then
      local e = parse_owner(v)
      if e == nil then return f end
      -- the holds whose own deadline has passed go; the entry with them when none is left
      local live = {}
      for _, h in ipairs(e.holds) do
        if h[4] > now then
          live[#live + 1] = h
          deadline_set(h[4])
        end
      end
      if #live == 0 then
        gone[#gone + 1] = f
      else
        if #live < #e.holds then
          e.holds = live
          put(f, format_owner(e))
        end
        held = held + 1
        if has_write(e) then writer = string.sub(f, 3) end
        if has_upgradable(e) then upgrader = string.sub(f, 3) end
      end
    elseif p == 'q:' then
      local q = parse_queued(v)
      if q == nil then return f end
      if q.deadline <= now then
        gone[#gone + 1] = f
        gone[#gone + 1] = 't:' .. fmt(q.ticket)
      else
        deadline_set(q.deadline)
      end
    end
  end
  if rw ~= nil then
    if rw <= now then rw = nil else deadline_set(rw) end
  end
  -- a pending upgrade lives as long as its upgradable hold
  if upgrader == nil or upgrader ~= was_upgrader then pending, pending_lease = nil, nil end
  if #gone > 0 then
    redis.call('HDEL', key, unpack(gone))
    for _, f in ipairs(gone) do cache[f] = false end
  end
  return nil
end

-- The first queued writer that is still there: its owner and entry. Tickets of writers
-- that left are dropped as they come to the head (each once: amortised O(1)).
local function head()
  while qh < qt do
    local o = get('t:' .. fmt(qh))
    if o then
      local q = queued_entry(o)
      if q and q.ticket == qh and q.deadline > now then return o, q end
      if q and q.ticket == qh then del('q:' .. o) end
    end
    del('t:' .. fmt(qh))
    qh = qh + 1
  end
  return nil, nil
end

-- takes writer `o` out of the queue
local function dequeue(o, q)
  del('q:' .. o)
  del('t:' .. fmt(q.ticket))
  if q.ticket == qh then qh = qh + 1 end
end

-- the fence of a grant now (see fence_after)
local function next_fence()
  fence = fence_after(fence, now_us)
  return fmt(fence)
end

-- A call sent again finds the hold `h` its first sending granted: its deadline is set
-- anew from now, as for a grant (the client counts the lease from the send time of the
-- call whose reply it got), and written back, so that the call writes: a WAIT after it
-- then covers the grant, whichever connection made it.
local function regrant(o, e, h, lease)
  if now + lease > h[4] then h[4] = now + lease end
  put('o:' .. o, format_owner(e))
  deadline_set(h[4])
end

-- adds a hold for owner `o` (whose entry is `e`, or nil) and returns its fence
local function grant(o, e, m, id, lease)
  local f = next_fence()
  if e == nil then
    e = {holds = {}}
    held = held + 1
  end
  e.holds[#e.holds + 1] = {m, id, f, now + lease}
  if m == 'w' then writer = o end
  if m == 'u' then upgrader = o end
  put('o:' .. o, format_owner(e))
  deadline_set(now + lease)
  return f
end

-- removes hold `id` from owner `o` (entry `e`); true when it was there
local function remove_hold(o, e, id)
  for i, h in ipairs(e.holds) do
    if h[2] == id then
      table.remove(e.holds, i)
      -- an owner may hold several upgradable holds (an explicit owner token, reentrant):
      -- it stays the upgrader while one is left
      if h[1] == 'u' and upgrader == o and not has_upgradable(e) then
        upgrader, pending, pending_lease = nil, nil, nil
      end
      if #e.holds == 0 then
        del('o:' .. o)
        held = held - 1
        if writer == o then writer = nil end
      else
        put('o:' .. o, format_owner(e))
        if writer == o and not has_write(e) then writer = nil end
      end
      return true
    end
  end
  return false
end

-- the entry of owner `o`: nil when it holds nothing, false when malformed
local function owner_entry(o)
  local v = get('o:' .. o)
  if not v then return nil end
  return parse_owner(v) or false
end

-- Settles who may proceed now, writes the summary back, and publishes when someone
-- may be waiting for it (writers wait in the queue; readers that wait leave 'rw', so
-- an uncontended release publishes nothing):
--   'g <owner> <hold id> <fence>'  a free lock was handed to the first queued writer
--   '*'                            the lock is free and no writer is queued: anyone
--   'r'                            readers may enter (no writer holds or waits)
local function finish()
  local msg = nil
  if pending ~= nil and held == 1 and (writer == nil or writer == upgrader) then
    -- the upgradable holder waits to upgrade and is the only owner left: its upgradable
    -- hold becomes the write hold it asked for, before any queued writer
    local e = owner_entry(upgrader)
    if e then
      for i, h in ipairs(e.holds) do
        -- the upgradable hold that asked (an owner may hold several)
        if h[1] == 'u' and h[2] == pending_from then
          table.remove(e.holds, i)
          local o, id = upgrader, pending
          -- still the upgrader if it holds another upgradable hold
          if not has_upgradable(e) then upgrader = nil end
          -- the write hold lasts no longer than the upgradable hold it replaces: an
          -- upgrader that died while pending leaves no fresh lease behind
          local f = grant(o, e, 'w', id, math.max(1, math.min(pending_lease, h[4] - now)))
          msg = handoff_message(o, id, f)
          break
        end
      end
    end
    pending, pending_lease = nil, nil
  end
  if writer == nil and msg == nil then
    local o, q = head()
    if o ~= nil and held == 0 then
      dequeue(o, q)
      -- the hold lasts until the queue entry would have lapsed, not a lease from now: a
      -- writer that died or gave up while queued blocks the lock no longer than its
      -- entry would have (the live one renews it when it takes it)
      local f = grant(o, nil, 'w', q.id, math.min(q.lease, q.deadline - now))
      msg = handoff_message(o, q.id, f)
    elseif o == nil and rw ~= nil and pending == nil and not quiet then
      if rw <= now then
        rw = nil
      else
        msg = (held == 0) and '*' or 'r'
        -- the waiting readers are told; those that still wait mark it again
        rw = nil
      end
    end
  end
  -- nothing left (held = 0, an empty queue, no waiting reader): the hash stays as a
  -- tombstone, the summary alone, for FENCE_MEMORY: the next fence is above its own
  -- (a call that found no hash and left nothing writes nothing). Nothing has a deadline
  -- then: the bounds say so, as fast_release writes them, so that the next acquire
  -- takes the fast path and the key's TTL is FENCE_MEMORY from now.
  if held == 0 and qh >= qt and rw == nil then dl, du = nil, 0 end
  if existed or held > 0 or qh < qt or rw ~= nil then
    local set, dels = {}, {}
    for f, v in pairs(W) do
      if v then
        set[#set + 1] = f
        set[#set + 1] = v
      else
        dels[#dels + 1] = f
      end
    end
    local summary = format_summary(fence, held, dl, du, qh, qt, rw)
    if summary ~= before_s then
      set[#set + 1] = 's'
      set[#set + 1] = summary
    end
    if writer ~= before_writer then
      if writer == nil then dels[#dels + 1] = 'w' else set[#set + 1] = 'w'; set[#set + 1] = writer end
    end
    local u = upgrader
    if u ~= nil and pending ~= nil then
      u = u .. ' ' .. pending .. ' ' .. fmt(pending_lease) .. ' ' .. pending_from
    end
    if u ~= before_u then
      if u == nil then dels[#dels + 1] = 'u' else set[#set + 1] = 'u'; set[#set + 1] = u end
    end
    if #dels > 0 and existed then redis.call('HDEL', key, unpack(dels)) end
    if #set > 0 then redis.call('HSET', key, unpack(set)) end
    -- the key's TTL is FENCE_MEMORY past du (now, when nothing is left)
    if du ~= before_du or not existed or held == 0 then
      redis.call('PEXPIRE', key, math.max(du - now, 0) + FENCE_MEMORY)
    end
  end
  if msg ~= nil and PUBLISH ~= '' then
    redis.call(PUBLISH, key .. ':released', msg)
  end
end

-- how long a waiter may sleep before the state can change without a release message:
-- until the earliest deadline bound, at most `cap`
local function wait_ms(cap)
  if dl == nil then return 1 end
  local ms = dl - now
  if ms < 1 then ms = 1 end
  if ms > cap then ms = cap end
  return ms
end
