-- prelude.lua: shared head of every lock script (prepended at compile time).
--
-- KEYS[1]  the lock hash, <prefix>:{<name>}
-- KEYS[2]  its release channel, <prefix>:{<name>}:released (same slot)
--
-- Loads the hash (layout: see the `scripts` module docs), notes the state before this
-- call, drops expired owners and queued writers, and defines the helpers the scripts
-- share. Early returns of every script:
--   {-3, type}   the key holds another type (nothing is touched)
--   {-4, field}  the hash has a field this layout does not know, or a malformed value
local key = KEYS[1]
local ktype = redis.call('TYPE', key)['ok']
if ktype ~= 'hash' and ktype ~= 'none' then
  return {-3, ktype}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- integers stay exact below 2^53; '%.0f' keeps them out of exponent notation
local function fmt(n) return string.format('%.0f', n) end

-- owners[o] = {deadline = ms, holds = {{mode, id, fence}, ...}}
-- queue[o]  = {seq = us, deadline = ms}
local owners, queue, fence = {}, {}, nil
local raw = redis.call('HGETALL', key)
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
  elseif p == 'q:' and #f > 2 then
    local seq, dl = string.match(v, '^(%d+) (%d+)$')
    if seq == nil then return {-4, f} end
    queue[string.sub(f, 3)] = {seq = tonumber(seq), deadline = tonumber(dl)}
  elseif f == 'fence' then
    fence = tonumber(v)
    if fence == nil then return {-4, f} end
  elseif f ~= 'mode' then
    return {-4, f}
  end
end

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

local function count(tbl)
  local n = 0
  for _ in pairs(tbl) do n = n + 1 end
  return n
end

local function save_owner(o)
  local e = owners[o]
  if e == nil or #e.holds == 0 then
    owners[o] = nil
    redis.call('HDEL', key, 'o:' .. o)
    return
  end
  local parts = {fmt(e.deadline)}
  for _, h in ipairs(e.holds) do parts[#parts + 1] = h[1] .. h[2] .. ':' .. h[3] end
  redis.call('HSET', key, 'o:' .. o, table.concat(parts, ' '))
end

-- the state before this call, to tell who may proceed after it
local writer_before, head_before = writer(), head()
local free_before = next(owners) == nil

for o, e in pairs(owners) do
  if e.deadline <= now then
    owners[o] = nil
    redis.call('HDEL', key, 'o:' .. o)
  end
end
for o, q in pairs(queue) do
  if q.deadline <= now then
    queue[o] = nil
    redis.call('HDEL', key, 'q:' .. o)
  end
end

-- a fence above every one granted before: the counter + 1, or server time in
-- microseconds when that is higher (a re-created hash, a promoted replica that missed
-- the last grants)
local function next_fence()
  local f = now_us
  if fence ~= nil and fence + 1 > f then f = fence + 1 end
  fence = f
  redis.call('HSET', key, 'fence', fmt(f))
  return fmt(f)
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

-- Stores the mode, moves the key's TTL to the latest live deadline (or deletes the key
-- when nothing is left), and publishes who may proceed when that changed:
--   'w <owner>'  the lock is free and <owner> is the first queued writer
--   '*'          the lock is free and no writer is queued: anyone
--   'r'          readers may enter (no writer holds or waits)
local function finish(publish)
  local w, h = writer(), head()
  local latest = 0
  for _, e in pairs(owners) do if e.deadline > latest then latest = e.deadline end end
  for _, q in pairs(queue) do if q.deadline > latest then latest = q.deadline end end
  if next(owners) == nil and next(queue) == nil then
    redis.call('DEL', key)
  else
    if w ~= nil then
      redis.call('HSET', key, 'mode', 'write')
    elseif next(owners) ~= nil then
      redis.call('HSET', key, 'mode', 'read')
    else
      redis.call('HDEL', key, 'mode')
    end
    redis.call('PEXPIRE', key, math.max(latest - now, 1))
  end
  local msg = nil
  if next(owners) == nil then
    if h ~= nil then
      if (not free_before) or h ~= head_before then msg = 'w ' .. h end
    elseif (not free_before) or writer_before ~= nil or head_before ~= nil then
      msg = '*'
    end
  elseif w == nil and h == nil and (writer_before ~= nil or head_before ~= nil) then
    msg = 'r'
  end
  if msg ~= nil and publish ~= nil and publish ~= '' then
    redis.call(publish, KEYS[2], msg)
  end
end
