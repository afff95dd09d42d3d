-- fast_release.lua: the release of the lone hold kept in the summary (one owner, one
-- hold, no reader group), the common cases: nobody waits, or writers wait and the first
-- is handed the lock. Called first by release(), before begin(). In every other case
-- (other holds or owners, waiting readers, a writer's place that lapsed, an earliest
-- deadline that passed, another layout, a key of another type, arguments the general
-- path reads otherwise) it returns nil and the general path decides. What it writes is
-- exactly what the general path would write (with the same encoders): a test compares
-- the hashes both leave, and the model checker runs this path.
--
-- Nobody waits: the summary becomes a tombstone (it remembers the last fence for
-- FENCE_MEMORY or longer: the key's expiry is kept), in ONE write, nothing is
-- published; only the summary is read. It does not read the clock: a hold whose
-- deadline has passed is given back as well (nobody else can have been granted it: it
-- is still the summary's), where the general path would find it run out; either way
-- the hash ends the same, and the client judges the hold by its own belief (a release
-- answered after the hold's believed end is reported lost: docs/PROTOCOL.md).
--
-- A writer is first in the queue: the lock is handed to it as finish() hands it (see
-- hand_over below): one read of the fields it needs, the clock, one write, the message.
--
-- KEYS, ARGV: as release.lua. Without ARGV[3] '1' the summary is read alone (most
--             likely nobody waits), and the queue's head after it when someone does;
--             with ARGV[3] '1' and the head's ticket field in ARGV[4] ('t:<ticket>'),
--             the summary, 'w', 'u' and that field in one read; ARGV[3] '1' without a
--             ticket field skips this path (the grant said that other owners held or
--             waited then: its read would most likely be wasted)
-- Returns
--   {1}   released (and handed over, if a writer was first in line); nil: not taken here

-- The lone hold of the summary `s` (LONE's captures: fence, lo and hi the deadline
-- bounds, qh, qt, ex) goes,
-- and the lock goes to the writer whose ticket field, the queue's head, holds `v`, as
-- the general path's finish() hands it over (one owner, one write hold kept in the
-- summary; the writer's place, below the head, carries the claim window). `releaser`:
-- the owner giving its hold back. Returns {1}, or nil when the general path must decide
-- (the field is not a live writer's, or the earliest deadline passed: prune's turn).
local function hand_over(key, releaser, v, fence, lo, hi, qh, qt, ex)
  local o, d, id, lease = string.match(v, '^(%S+) (%d+) (%d+) (%d+)$')
  if o == nil or o == releaser then return nil end
  local now, now_us = server_time()
  -- (digits: arithmetic reads them, as in server_time)
  d, lease = d + 0, lease + 0
  -- the call's deadline bounds, kept by deadline_set() as for the general path (whose
  -- begin() sets them afresh for every call)
  dl, du = lo + 0, hi + 0
  if d <= now or dl <= now then return nil end
  -- the hold lasts until the writer's place would have lapsed, at most a lease (grant()
  -- in finish()); the place carries the claim window
  local left = d - now
  if lease < left then left = lease end
  local until_ms, claim = now + left, now + CLAIM_MS
  if d < claim then claim = d end
  local f = fmt(fence_after(fence + 0, now_us))
  deadline_set(until_ms)
  deadline_set(claim)
  -- the key's expiry, as finish() keeps it
  local expiry = expiry_for(du, now, ex + 0)
  local summary = summary_text(f, '1', fmt(dl), fmt(du), fmt(qh + 1), fmt(qt + 0), '-',
    fmt(expiry or (ex + 0)), format_hold('w', id, f, until_ms, left), o)
  redis.call('HSET', key, 'q:' .. o, qh .. ' ' .. fmt(claim) .. ' ' .. id .. ' ' .. fmt(lease),
    's', summary)
  if expiry then redis.call('PEXPIREAT', key, expiry) end
  redis.call(PUBLISH, key .. ':released', handoff_message(o, id, f))
  return {1}
end

local function fast_release(KEYS, ARGV)
  local key, told = KEYS[1], ARGV[3] == '1'
  local s, w, u, v
  if not told then
    s = redis.pcall('HGET', key, 's')
  elseif ARGV[4] ~= nil and string.find(ARGV[4], '^t:%d+$') then
    local r = redis.pcall('HMGET', key, 's', 'w', 'u', ARGV[4])
    if r['err'] ~= nil then return nil end
    s, w, u, v = r[1], r[2], r[3], r[4]
  else
    return nil
  end
  if type(s) ~= 'string' then return nil end
  local fence, lo, hi, qh, qt, ex, id, owner = string.match(s, LONE)
  if fence == nil or id ~= ARGV[2] or owner ~= ARGV[1] then return nil end
  if qh == qt then
    -- (a release told that others held or waited goes the general way: places of a
    -- reader group passed by may be left for its prune; see acquire.lua's `others`)
    if told then return nil end
    -- nobody waits: the tombstone (as finish() writes it: nothing has a deadline), from
    -- the digits read
    redis.call('HSET', key, 's', summary_text(fence, '0', '-', '0', qh, qt, '-', ex))
    return {1}
  end
  -- someone waits: a writer first in line is handed the lock here (a summary's lone hold
  -- has no 'w' or 'u' field: the general path refuses a hash that has one)
  if not plain(qh) then return nil end
  local head = 't:' .. qh
  if not told then
    local r = redis.call('HMGET', key, 'w', 'u', head)
    w, u, v = r[1], r[2], r[3]
  elseif ARGV[4] ~= head then
    return nil
  end
  if w or u or type(v) ~= 'string' then return nil end
  return hand_over(key, owner, v, fence, lo, hi, qh, qt, ex)
end
