-- layout.lua: the vocabulary of the hash layout, the first part of every lock script
-- after the two lines the client adds (PUBLISH and OWNER_ARG), before the fast paths and
-- lib.lua, which use it: the layout version, the server's clock, fences, the summary and
-- a hold, each defined once here (see the `scripts` module docs for the layout).

-- The version of the hash layout this code reads and writes; a hash of another layout is
-- never taken for this one.
local LAYOUT = '3'
-- How long a lock's hash outlives its last deadline (ms), kept as a tombstone that
-- holds only the summary once nobody holds or waits: the last fence is remembered that
-- long, so that the next one is above it even on a master whose clock is behind (by
-- less than this) or after a failover or a slot move.
local FENCE_MEMORY = 60000

-- The first element of every reply, whatever the script: 1 done (granted, released,
-- renewed, read), 0 not now (busy: the caller may wait), 2 gone (the hold the call
-- starts from is not there), -1 upgrade deadlock, -3 the key holds another type, -4 the
-- hash is of another layout or has a malformed field. Each script's header lists the
-- codes it returns.

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

-- The summary field 's': '<layout> <fence> <held> <dl> <du> <qh> <qt> <rw>', '-' for
-- none: the last fence, owners that hold, bounds of the earliest and latest deadline,
-- the writer queue's head and next ticket, until when readers wait.
local SUMMARY = '^(%d+) (%S+) (%d+) (%S+) (%d+) (%d+) (%d+) (%S+)$'
local function opt(n) if n == nil then return '-' end return fmt(n) end
local function format_summary(fence, held, dl, du, qh, qt, rw)
  return LAYOUT .. ' ' .. opt(fence) .. ' ' .. fmt(held) .. ' ' .. opt(dl) .. ' ' .. fmt(du)
    .. ' ' .. fmt(qh) .. ' ' .. fmt(qt) .. ' ' .. opt(rw)
end

-- A hold in an owner's entry 'o:<owner>' (holds separated by spaces):
-- '<r|w|u><id>:<fence>:<deadline-ms>'.
local HOLD = '^([rwu])(%d+):(%d+):(%d+)$'
local function format_hold(m, id, fence, deadline) return m .. id .. ':' .. fence .. ':' .. fmt(deadline) end
