-- prelude.lua: shared head of every lock script (prepended at compile time).
--
-- KEYS[1]  the lock hash, <prefix>:{<name>}
-- KEYS[2]  its release channel, <prefix>:{<name>}:released (same slot)
--
-- Loads the hash (layout: see the `scripts` module docs) into Lua tables, notes the
-- state before this call and drops expired owners and queued writers. The scripts then
-- change the tables and call finish(), which writes the changes back in one HSET (plus
-- HDEL/PEXPIRE when needed), hands a free lock to the first queued writer, and
-- publishes who may proceed. Early returns of every script:
--   {-3, type}   the key holds another type (nothing is touched)
--   {-4, field}  the hash has a field this layout does not know, or a malformed value
local key = KEYS[1]
local raw = redis.pcall('HGETALL', key)
if raw['err'] ~= nil then
  return {-3, redis.call('TYPE', key)['ok']}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- integers stay exact below 2^53; '%.0f' keeps them out of exponent notation
local function fmt(n) return string.format('%.0f', n) end

-- owners[o] = {deadline = ms, holds = {{mode, id, fence}, ...}}
-- queue[o]  = {seq = us, deadline = ms, id = hold id, lease = ms}
local owners, queue, fence, mode_stored, readers_wait = {}, {}, nil, nil, nil
local latest_before = 0
for i = 1, #raw, 2 do
  local f, v = raw[i], raw[i + 1]
  local p = string.sub(f, 1, 2)
  if p == 'o:' and #f > 2 then
    local dl, holds = nil, {}
    for tok in string.gmatch(v, '%S+') do
      if dl == nil then
        dl = tonumber(tok)
        if dl == nil then return {-4, f} end
      else
        local m, id, fe = string.match(tok, '^([rw])(%d+):(%d+)$')
        if m == nil then return {-4, f} end
        holds[#holds + 1] = {m, id, fe}
      end
    end
    if dl == nil or #holds == 0 then return {-4, f} end
    owners[string.sub(f, 3)] = {deadline = dl, holds = holds}
    if dl > latest_before then latest_before = dl end
  elseif p == 'q:' and #f > 2 then
    local seq, dl, id, lease = string.match(v, '^(%d+) (%d+) (%d+) (%d+)$')
    if seq == nil then return {-4, f} end
    queue[string.sub(f, 3)] = {seq = tonumber(seq), deadline = tonumber(dl), id = id, lease = tonumber(lease)}
    if tonumber(dl) > latest_before then latest_before = tonumber(dl) end
  elseif f == 'fence' then
    fence = tonumber(v)
    if fence == nil then return {-4, f} end
  elseif f == 'mode' then
    mode_stored = v
  elseif f == 'rw' then
    readers_wait = tonumber(v)
    if readers_wait == nil then return {-4, f} end
    if readers_wait > latest_before then latest_before = readers_wait end
  else
    return {-4, f}
  end
end
local existed = #raw > 0
local fence_before = fence
local readers_wait_before = readers_wait

-- fields to write back ('o:'/'q:' + owner) and fields to delete
local dirty, gone = {}, {}
local function touch(field) dirty[field] = true; gone[field] = nil end
local function drop(field) gone[field] = true; dirty[field] = nil end

local function writer()
  for o, e in pairs(owners) do
    for _, h in ipairs(e.holds) do
      if h[1] == 'w' then return o end
    end
  end
  return nil
end

-- the first queued writer: lowest sequence, ties broken by owner
local function head()
  local best, bo = nil, nil
  for o, q in pairs(queue) do
    if best == nil or q.seq < best.seq or (q.seq == best.seq and o < bo) then
      best, bo = q, o
    end
  end
  return bo
end

-- the state before this call, to tell who may proceed after it
local writer_before, head_before = writer(), head()
local free_before = next(owners) == nil

for o, e in pairs(owners) do
  if e.deadline <= now then
    owners[o] = nil
    drop('o:' .. o)
  end
end
for o, q in pairs(queue) do
  if q.deadline <= now then
    queue[o] = nil
    drop('q:' .. o)
  end
end
if readers_wait ~= nil and readers_wait <= now then readers_wait = nil end

-- a fence above every one granted before: the counter + 1, or server time in
-- microseconds when that is higher (a re-created hash, a promoted replica that missed
-- the last grants)
local function next_fence()
  local f = now_us
  if fence ~= nil and fence + 1 > f then f = fence + 1 end
  fence = f
  return fmt(f)
end

-- adds a hold for `o` and returns its fence
local function grant(o, m, id, lease)
  local f = next_fence()
  local e = owners[o]
  if e == nil then
    e = {deadline = 0, holds = {}}
    owners[o] = e
  end
  e.holds[#e.holds + 1] = {m, id, f}
  if now + lease > e.deadline then e.deadline = now + lease end
  touch('o:' .. o)
  if queue[o] ~= nil then
    queue[o] = nil
    drop('q:' .. o)
  end
  return f
end

local function remove_hold(o, id)
  local e = owners[o]
  if e == nil then return false end
  for i, h in ipairs(e.holds) do
    if h[2] == id then
      table.remove(e.holds, i)
      if #e.holds == 0 then
        owners[o] = nil
        drop('o:' .. o)
      else
        touch('o:' .. o)
      end
      return true
    end
  end
  return false
end

-- the earliest deadline of an entry other than `me`: when the state may change next
-- without a release message
local function wait_ms(me, cap)
  local soonest = nil
  for o, e in pairs(owners) do
    if o ~= me and (soonest == nil or e.deadline < soonest) then soonest = e.deadline end
  end
  for o, q in pairs(queue) do
    if o ~= me and (soonest == nil or q.deadline < soonest) then soonest = q.deadline end
  end
  if soonest == nil then return 1 end
  local ms = soonest - now
  if ms < 1 then ms = 1 end
  if ms > cap then ms = cap end
  return ms
end

-- Hands a free lock to the first queued writer, writes the tables back, moves the key's
-- TTL to the latest live deadline (or deletes the key when nothing is left), and
-- publishes who may proceed when that changed and someone may be waiting for it:
--   'g <owner> <hold id> <fence>'  the lock was handed to that queued writer
--   '*'                            the lock is free and no writer is queued: anyone
--   'r'                            readers may enter (no writer holds or waits)
-- Writers that wait are in the queue; readers that wait leave a mark ('rw'), so that an
-- uncontended release publishes nothing.
local function finish(publish)
  local msg = nil
  if next(owners) == nil then
    local h = head()
    if h ~= nil then
      local q = queue[h]
      local f = grant(h, 'w', q.id, q.lease)
      msg = 'g ' .. h .. ' ' .. q.id .. ' ' .. f
    elseif readers_wait ~= nil and ((not free_before) or writer_before ~= nil or head_before ~= nil) then
      msg = '*'
    end
  elseif readers_wait ~= nil and writer() == nil and head() == nil and (writer_before ~= nil or head_before ~= nil) then
    msg = 'r'
  end
  if msg == '*' or msg == 'r' then
    -- the waiting readers are told; those that still wait mark it again
    readers_wait = nil
  end

  if next(owners) == nil and next(queue) == nil and readers_wait == nil then
    if existed then redis.call('DEL', key) end
  else
    local args, dels, latest = {}, {}, 0
    for field in pairs(dirty) do
      local o = string.sub(field, 3)
      if string.sub(field, 1, 2) == 'o:' then
        local e = owners[o]
        local parts = {fmt(e.deadline)}
        for _, hh in ipairs(e.holds) do parts[#parts + 1] = hh[1] .. hh[2] .. ':' .. hh[3] end
        args[#args + 1] = field
        args[#args + 1] = table.concat(parts, ' ')
      else
        local q = queue[o]
        args[#args + 1] = field
        args[#args + 1] = fmt(q.seq) .. ' ' .. fmt(q.deadline) .. ' ' .. q.id .. ' ' .. fmt(q.lease)
      end
    end
    for field in pairs(gone) do dels[#dels + 1] = field end
    local mode = nil
    if writer() ~= nil then mode = 'write' elseif next(owners) ~= nil then mode = 'read' end
    if mode ~= mode_stored then
      if mode == nil then
        dels[#dels + 1] = 'mode'
      else
        args[#args + 1] = 'mode'
        args[#args + 1] = mode
      end
    end
    if readers_wait ~= readers_wait_before then
      if readers_wait == nil then
        dels[#dels + 1] = 'rw'
      else
        args[#args + 1] = 'rw'
        args[#args + 1] = fmt(readers_wait)
      end
    end
    if fence ~= nil and fence ~= fence_before then
      args[#args + 1] = 'fence'
      args[#args + 1] = fmt(fence)
    end
    if #dels > 0 then redis.call('HDEL', key, unpack(dels)) end
    if #args > 0 then redis.call('HSET', key, unpack(args)) end
    for _, e in pairs(owners) do if e.deadline > latest then latest = e.deadline end end
    for _, q in pairs(queue) do if q.deadline > latest then latest = q.deadline end end
    if readers_wait ~= nil and readers_wait > latest then latest = readers_wait end
    if latest ~= latest_before or not existed then
      redis.call('PEXPIRE', key, math.max(latest - now, 1))
    end
  end

  if msg ~= nil and publish ~= nil and publish ~= '' then
    redis.call(publish, KEYS[2], msg)
  end
end
