-- lib.lua: the head of every lock script (prepended at compile time). It reads the
-- lock's summary fields in ONE HMGET (never the whole hash) and defines the helpers the
-- scripts share; a helper costs nothing unless a script calls it.
--
-- KEYS[1]  the lock hash, <prefix>:{<name>}   (layout: see the `scripts` module docs)
-- KEYS[2]  its release channel, <prefix>:{<name>}:released (same slot)
--
-- Early returns of every script:
--   {-3, type}   the key holds another type (nothing is touched)
--   {-4, field}  the hash is of another layout, or has a malformed field (nothing is
--                touched: every field a script reads is checked before it writes)
local key = KEYS[1]
local LAYOUT = '2'
local S = redis.pcall('HMGET', key, 'v', 'f', 'n', 'w', 'dl', 'du', 'qh', 'qt', 'rw')
if S['err'] ~= nil then
  return {-3, redis.call('TYPE', key)['ok']}
end
if S[1] == false then
  -- no summary: a fresh lock, unless the hash exists (another layout, or not ours)
  if redis.call('EXISTS', key) == 1 then return {-4, 'v'} end
elseif S[1] ~= LAYOUT then
  return {-4, 'v'}
end
local SUMMARY = {'v', 'f', 'n', 'w', 'dl', 'du', 'qh', 'qt', 'rw'}
for i = 2, 9 do
  if i ~= 4 and S[i] ~= false and tonumber(S[i]) == nil then return {-4, SUMMARY[i]} end
end
local existed = S[1] ~= false
-- the summary, kept up to date by every script:
--   fence  the last fence granted          held    owners that hold (any mode)
--   writer the owner that holds write      dl, du  bounds of the earliest and latest
--   qh, qt queue head ticket, next ticket          deadline of any entry (server ms)
--   rw     readers wait until then
local fence, held, writer = tonumber(S[2]), tonumber(S[3]) or 0, S[4] or nil
local dl, du, qh, qt, rw = tonumber(S[5]), tonumber(S[6]) or 0, tonumber(S[7]) or 0, tonumber(S[8]) or 0, tonumber(S[9])
local before = {fence = fence, held = held, writer = writer, dl = dl, du = du, qh = qh, qt = qt, rw = rw}

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- integers stay exact below 2^53; '%.0f' keeps them out of exponent notation
local function fmt(n) return string.format('%.0f', n) end

-- An owner's entry 'o:<owner>' = '<deadline-ms> <hold> <hold> ...', a hold being
-- '<r|w><id>:<fence>'. Returns {deadline, holds = {{mode, id, fence}, ...}}, or nil when
-- malformed.
local function parse_owner(v)
  local e = {holds = {}}
  for tok in string.gmatch(v, '%S+') do
    if e.deadline == nil then
      e.deadline = tonumber(tok)
      if e.deadline == nil then return nil end
    else
      local m, id, fe = string.match(tok, '^([rw])(%d+):(%d+)$')
      if m == nil then return nil end
      e.holds[#e.holds + 1] = {m, id, fe}
    end
  end
  if e.deadline == nil or #e.holds == 0 then return nil end
  return e
end

local function format_owner(e)
  local parts = {fmt(e.deadline)}
  for _, h in ipairs(e.holds) do parts[#parts + 1] = h[1] .. h[2] .. ':' .. h[3] end
  return table.concat(parts, ' ')
end

local function has_write(e)
  for _, h in ipairs(e.holds) do if h[1] == 'w' then return true end end
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
  local v = redis.call('HGET', key, 'q:' .. o)
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
  local raw = redis.call('HGETALL', key)
  local gone = {}
  held, writer, dl, du = 0, nil, nil, 0
  for i = 1, #raw, 2 do
    local f, v = raw[i], raw[i + 1]
    local p = string.sub(f, 1, 2)
    if p == 'o:' then
      local e = parse_owner(v)
      if e == nil then return f end
      if e.deadline <= now then
        gone[#gone + 1] = f
      else
        held = held + 1
        if has_write(e) then writer = string.sub(f, 3) end
        deadline_set(e.deadline)
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
  if #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
  return nil
end

-- The first queued writer that is still there: its owner and entry. Tickets of writers
-- that left are dropped as they come to the head (each once: amortised O(1)).
local function head()
  while qh < qt do
    local o = redis.call('HGET', key, 't:' .. fmt(qh))
    if o then
      local q = queued_entry(o)
      if q and q.ticket == qh and q.deadline > now then return o, q end
      if q and q.ticket == qh then redis.call('HDEL', key, 'q:' .. o) end
    end
    redis.call('HDEL', key, 't:' .. fmt(qh))
    qh = qh + 1
  end
  return nil, nil
end

-- takes writer `o` out of the queue
local function dequeue(o, q)
  redis.call('HDEL', key, 'q:' .. o, 't:' .. fmt(q.ticket))
  if q.ticket == qh then qh = qh + 1 end
end

-- a fence above every one granted before: the counter + 1, or server time in
-- microseconds when that is higher (a re-created hash, a promoted replica that missed
-- the last grants)
local function next_fence()
  local f = now_us
  if fence ~= nil and fence + 1 > f then f = fence + 1 end
  fence = f
  return fmt(f)
end

-- adds a hold for owner `o` (whose entry is `e`, or nil) and returns its fence
local function grant(o, e, m, id, lease)
  local f = next_fence()
  if e == nil then
    e = {deadline = 0, holds = {}}
    held = held + 1
  end
  e.holds[#e.holds + 1] = {m, id, f}
  if now + lease > e.deadline then e.deadline = now + lease end
  if m == 'w' then writer = o end
  redis.call('HSET', key, 'o:' .. o, format_owner(e))
  deadline_set(e.deadline)
  return f
end

-- removes hold `id` from owner `o` (entry `e`); true when it was there
local function remove_hold(o, e, id)
  for i, h in ipairs(e.holds) do
    if h[2] == id then
      table.remove(e.holds, i)
      if #e.holds == 0 then
        redis.call('HDEL', key, 'o:' .. o)
        held = held - 1
        if writer == o then writer = nil end
      else
        redis.call('HSET', key, 'o:' .. o, format_owner(e))
        if writer == o and not has_write(e) then writer = nil end
      end
      return true
    end
  end
  return false
end

-- the entry of owner `o`: nil when it holds nothing, false when malformed
local function owner_entry(o)
  local v = redis.call('HGET', key, 'o:' .. o)
  if not v then return nil end
  return parse_owner(v) or false
end

-- Settles who may proceed now, writes the summary back, and publishes when someone
-- may be waiting for it (writers wait in the queue; readers that wait leave 'rw', so
-- an uncontended release publishes nothing):
--   'g <owner> <hold id> <fence>'  a free lock was handed to the first queued writer
--   '*'                            the lock is free and no writer is queued: anyone
--   'r'                            readers may enter (no writer holds or waits)
local function finish(publish)
  local msg = nil
  if writer == nil then
    local o, q = head()
    if o ~= nil and held == 0 then
      dequeue(o, q)
      local f = grant(o, nil, 'w', q.id, q.lease)
      msg = 'g ' .. o .. ' ' .. q.id .. ' ' .. f
    elseif o == nil and rw ~= nil then
      if rw <= now then
        rw = nil
      else
        msg = (held == 0) and '*' or 'r'
        -- the waiting readers are told; those that still wait mark it again
        rw = nil
      end
    end
  end
  if held == 0 and qh >= qt and rw == nil then
    -- nothing left: the key goes (a fence taken later is at least server time)
    if existed or redis.call('EXISTS', key) == 1 then redis.call('DEL', key) end
  else
    local set, del = {}, {}
    if not existed then set[#set + 1] = 'v'; set[#set + 1] = LAYOUT end
    local now_vals = {f = fence, n = held, dl = dl, du = du, qh = qh, qt = qt, rw = rw}
    for _, name in ipairs({'f', 'n', 'dl', 'du', 'qh', 'qt', 'rw'}) do
      local was = before[({f = 'fence', n = 'held', dl = 'dl', du = 'du', qh = 'qh', qt = 'qt', rw = 'rw'})[name]]
      local is = now_vals[name]
      if is ~= was or not existed then
        if is == nil then
          del[#del + 1] = name
        else
          set[#set + 1] = name
          set[#set + 1] = fmt(is)
        end
      end
    end
    if writer ~= before.writer or (not existed and writer ~= nil) then
      if writer == nil then del[#del + 1] = 'w' else set[#set + 1] = 'w'; set[#set + 1] = writer end
    end
    if #del > 0 and existed then redis.call('HDEL', key, unpack(del)) end
    if #set > 0 then redis.call('HSET', key, unpack(set)) end
    if du > before.du or not existed then
      redis.call('PEXPIRE', key, math.max(du - now, 1))
    end
  end
  if msg ~= nil and publish ~= nil and publish ~= '' then
    redis.call(publish, KEYS[2], msg)
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
