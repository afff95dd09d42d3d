-- lib.lua: the general part of every lock function, defined once when the library is
-- loaded. A function calls begin() first: it reads the lock's summary fields and the
-- caller's own entries in ONE HMGET (never the whole hash) and parses them into the
-- call's state below; the helpers then work from that state, buffer every write, and
-- finish() sends them in one HSET (and one HDEL) at the end.
--
-- KEYS[1]  the lock hash, <prefix>:{<name>}   (layout: docs/PROTOCOL.md)
--          (its release channel, <prefix>:{<name>}:released, is in the same slot)
--
-- Early returns of every function (from begin(), or a helper that reads a field):
--   {-3, type}     the key holds another type (nothing is touched)
--   {-4, field}    the hash has a malformed field (nothing is touched: every field a
--                  function reads is checked before it writes)
--   {-7, version}  the hash is of another layout (nothing is touched)
-- The summary 's' (see layout.lua), kept up to date by every function, and 'w', the
-- owner that holds write; 'u', '<owner>' of the upgradable hold, or
-- '<owner> <id> <lease> <from>' while it waits to upgrade: hold <id> is to be granted
-- write, in place of upgradable hold <from>, as soon as it is the only owner that holds.
-- A lone hold kept in the summary has no 'o:', 'w' or 'u' field (see layout.lua).

-- The state of the call being run. A library's functions share one Lua state and never
-- run at the same time (the server runs one call at a time, each to its end), so these
-- are set afresh by begin() at the start of every call, and read by the helpers as
-- upvalues (no table to pass around, no global).
local key, OWNER
-- the summary, parsed: last fence, owners that hold, earliest and latest deadline
-- bounds, queue head and next ticket, the youngest reader group's ticket, the key's
-- expiry (nil: none)
local existed, fence, held, dl, du, qh, qt, rg, ex
-- the owner that holds write, the upgradable holder, the write hold it waits for
-- (pending: nil when none), its lease, and the upgradable hold it is to replace
local writer, upgrader, pending, pending_lease, pending_from
-- the owner whose one hold the summary carries (nil: none), and its entry's field
local lone, lone_field
-- the summary and the 'w' and 'u' fields as the hash holds them (nil: absent)
local before_s, before_writer, before_u
-- Set by a call that frees nothing itself (an attempt, a renewal): it then wakes no
-- reader, unless its prune removed expired entries or the queue's head moved on. A
-- waiting reader's own attempt would otherwise wake every other waiting reader again.
local quiet
-- the queue's head moved on in this call (a writer or a reader group left it)
local advanced
-- a reader group was passed by in this call when its claim window ran out: places of
-- its readers that did not come are left behind it (see prune)
local orphaned
-- the expired entries were looked for in this call (see prune)
local pruned
-- the call must write the summary even when it is unchanged (see regrant)
local rewrite
-- fields read so far (false: absent), and the writes not sent yet (false: delete)
local cache, W
-- the server's time, read once per call: ms and µs
local now, now_us

-- Integers as digits: exact below 2^53, never in exponent notation ('%d' also costs far
-- less than a float's '%.0f').
local function fmt(n) return string.format('%d', n) end
-- Whether digits `d` read from the hash are as fmt() writes them (no leading zero): a
-- fast path names a field after digits it read only then, as the general path, which
-- reads them as a number and writes them with fmt(), would name the same field.
local function plain(d) return d == '0' or string.byte(d) ~= 48 end

-- The server's clock, read once per call: now in ms and in µs. TIME's two replies are
-- digits, which arithmetic reads as tonumber() would, without a function call (each
-- tonumber() or math.floor() costs about a thousand server instructions); the division
-- is exact (below 2^53, a multiple of 1000).
local function server_time()
  local t = redis.call('TIME')
  local us = t[1] * 1000000 + t[2]
  return (us - us % 1000) / 1000, us
end

-- A fence above every one granted before: the last one (`last`, nil when none is
-- remembered) + 1, or the server's time in µs when that is higher (a hash made afresh
-- once its tombstone expired).
local function fence_after(last, now_us)
  if last ~= nil and last + 1 > now_us then return last + 1 end
  return now_us
end

-- The summary from its parts as text (digits, or '-' for none), in one concatenation:
-- the fast paths pass the digits they captured as they are (parsing a number and
-- formatting it again costs a call more server instructions than the rest of its work).
-- `lone_hold` and `lone_owner`: the one hold kept in the summary, or nil.
local function summary_text(f, n, a, b, h, q, r, e, lone_hold, lone_owner)
  if lone_hold == nil then
    return LAYOUT .. ' ' .. f .. ' ' .. n .. ' ' .. a .. ' ' .. b .. ' ' .. h .. ' ' .. q .. ' ' .. r .. ' ' .. e
  end
  return LAYOUT .. ' ' .. f .. ' ' .. n .. ' ' .. a .. ' ' .. b .. ' ' .. h .. ' ' .. q .. ' ' .. r .. ' ' .. e
    .. ' ' .. lone_hold .. ' ' .. lone_owner
end
-- The summary, of numbers or nil ('-').
local function opt(n) if n == nil then return '-' end return fmt(n) end
local function format_summary(fence, held, dl, du, qh, qt, rg, ex, lone_hold, lone_owner)
  return summary_text(opt(fence), fmt(held), opt(dl), fmt(du), fmt(qh), fmt(qt), opt(rg), fmt(ex),
    lone_hold, lone_owner)
end

-- A hold from its parts as text: mode, id (as the client sent it), fence, deadline (ms),
-- lease (ms).
local function hold_text(m, id, fence, deadline, lease)
  return m .. id .. ':' .. fence .. ':' .. deadline .. ':' .. lease
end
-- A hold, its deadline and lease numbers.
local function format_hold(m, id, fence, deadline, lease)
  return hold_text(m, id, fence, fmt(deadline), fmt(lease))
end

-- The expiry the key needs for a latest deadline `latest` (ms): FENCE_MEMORY past it,
-- and past now. Returns the expiry to set, or nil when `current` (the summary's) is
-- enough. A new expiry goes FENCE_MEMORY further still, so that the grants of the next
-- FENCE_MEMORY need none of their own (one PEXPIREAT a minute, not one per grant); the
-- tombstone then lives up to twice FENCE_MEMORY, which costs nothing but its bytes.
local function expiry_for(latest, now, current)
  local need = math.max(latest, now) + FENCE_MEMORY
  if current ~= nil and current >= need then return nil end
  return need + FENCE_MEMORY
end

-- The release message that hands the lock to the writer or upgrader `o`, as its hold
-- `id` with `fence` (see docs/PROTOCOL.md).
local function handoff_message(o, id, fence) return 'g ' .. o .. ' ' .. id .. ' ' .. fence end

-- Starts a call on lock KEYS[1] for the caller whose owner token is ARGV[owner_arg] (0:
-- none): resets the call's state, reads the summary, 'w', 'u' and the caller's own
-- entries in ONE HMGET, parses them, and reads the server's clock, unless `clock_later`
-- (the call may end without it: it then calls server_time() itself before any helper
-- that needs `now`). `ticket`: a queue ticket field the caller was told is most likely
-- the head ('t:<digits>'; anything else is ignored), read in the same HMGET (get()
-- then finds it). Returns nil, or the reply to return at once.
local function begin(keys, argv, owner_arg, clock_later, ticket)
  key = keys[1]
  OWNER = nil
  if owner_arg > 0 then OWNER = argv[owner_arg] end
  local S
  if ticket ~= nil and not string.find(ticket, '^t:%d+$') then ticket = nil end
  if OWNER and ticket then
    S = redis.pcall('HMGET', key, 's', 'w', 'u', 'o:' .. OWNER, 'q:' .. OWNER, ticket)
  elseif OWNER then
    S = redis.pcall('HMGET', key, 's', 'w', 'u', 'o:' .. OWNER, 'q:' .. OWNER)
  else
    S = redis.pcall('HMGET', key, 's', 'w', 'u')
  end
  if S['err'] ~= nil then
    return {-3, redis.call('TYPE', key)['ok']}
  end
  existed = S[1] ~= false
  fence, held, dl, du, qh, qt, rg, ex = nil, 0, nil, 0, 0, 0, nil, nil
  writer, upgrader, pending, pending_lease, pending_from = S[2] or nil, nil, nil, nil, nil
  lone, lone_field = nil, nil
  quiet, pruned, advanced, rewrite, orphaned = false, false, false, false, false
  cache, W = {}, {}
  local lone_hold = nil
  if not existed then
    -- no summary: a fresh lock, unless the hash exists (not ours)
    if S[2] or S[3] or redis.call('EXISTS', key) == 1 then return {-4, 's'} end
  else
    local lv, f, n, a, b, h, q, r, e, rest = string.match(S[1], SUMMARY)
    if lv ~= LAYOUT then
      -- another layout's hash (its version leads its summary), or no summary at all
      local v = string.match(S[1], '^(%d+) ')
      if v ~= nil and v ~= LAYOUT then return {-7, v} end
      return {-4, 's'}
    end
    -- the optional numbers: digits, or '-' for none
    for _, v in ipairs({f, a, r}) do
      if v ~= '-' and not string.find(v, '^%d+$') then return {-4, 's'} end
    end
    fence, held, dl, du = tonumber(f), tonumber(n), tonumber(a), tonumber(b)
    qh, qt, rg, ex = tonumber(h), tonumber(q), tonumber(r), tonumber(e)
    if rest ~= '' then
      -- the lone hold: one owner, with no field of its own, nor 'w' or 'u'
      local hold, o = string.match(rest, '^ (%S+) (%S+)$')
      if hold == nil or held ~= 1 or S[2] or S[3] or not string.match(hold, HOLD) then
        return {-4, 's'}
      end
      lone, lone_field, lone_hold = o, 'o:' .. o, hold
      local m = string.sub(hold, 1, 1)
      if m == 'w' then writer = o elseif m == 'u' then upgrader = o end
    end
  end
  if S[3] then
    local o, id, l, from = string.match(S[3], '^(%S+) (%d+) (%d+) (%d+)$')
    if o == nil then
      o = string.match(S[3], '^(%S+)$')
      if o == nil then return {-4, 'u'} end
    end
    upgrader, pending, pending_lease, pending_from = o, id, tonumber(l), from
  end
  before_s, before_writer, before_u = S[1], S[2] or nil, S[3] or nil
  if lone then cache[lone_field] = lone_hold end
  if OWNER then
    -- (the lone owner's HMGET slot is empty: its hold is the summary's)
    if OWNER ~= lone then cache['o:' .. OWNER] = S[4] end
    cache['q:' .. OWNER] = S[5]
    if ticket then cache[ticket] = S[6] end
  end
  if clock_later then
    now, now_us = nil, nil
  else
    now, now_us = server_time()
  end
  return nil
end

-- The whole hash as HGETALL gives it, with the lone hold as the field it stands for; the
-- entries read are remembered (get() need not read them again). O(n): prune, state and
-- force_release only.
local function all_fields()
  local raw = redis.call('HGETALL', key)
  if lone then
    raw[#raw + 1] = lone_field
    raw[#raw + 1] = cache[lone_field]
  end
  for i = 1, #raw, 2 do
    if cache[raw[i]] == nil then cache[raw[i]] = raw[i + 1] end
  end
  return raw
end

-- a field's value in this call: its write not sent yet, or what the hash holds (read
-- once; false: absent)
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

-- An owner's entry 'o:<owner>' = '<hold> <hold> ...', a hold being
-- '<r|w|u><id>:<fence>:<deadline-ms>:<lease-ms>' (read, write, upgradable read). Each
-- hold has its own deadline: a grant or renewal sets the deadline of the holds it names
-- and of no other, so that holds of a process that died are not kept alive by a sibling
-- process under the same owner token. Returns
-- {holds = {{mode, id, fence, deadline, lease}, ...}}, or nil when malformed.
local function parse_owner(v)
  local e = {holds = {}}
  for tok in string.gmatch(v, '%S+') do
    local m, id, fe, d, l = string.match(tok, HOLD)
    if m == nil then return nil end
    e.holds[#e.holds + 1] = {m, id, fe, tonumber(d), tonumber(l)}
  end
  if #e.holds == 0 then return nil end
  return e
end

local function format_owner(e)
  local parts = {}
  for _, h in ipairs(e.holds) do parts[#parts + 1] = format_hold(h[1], h[2], h[3], h[4], h[5]) end
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

-- The queue: tickets qh .. qt-1, each 't:<ticket>' naming a queued writer
-- ('<owner> <deadline-ms> <hold id> <lease-ms>'), or a group of readers ('r <count>':
-- readers that came one after another, behind the same writers, go in together). A
-- place in it, 'q:<owner>' = '[r]<ticket> <deadline-ms> <hold id> <lease-ms>', 'r' for
-- a reader (or upgradable reader) in the group of that ticket. A writer's ticket
-- carries its place's numbers too (both fields are written together): the release that
-- hands the lock over reads the head's one field, not two (its owner's place is read by
-- the owner's own calls, in the HMGET every call makes). Returns a table, or nil when
-- malformed.
local function parse_queued(v)
  local r, tk, d, id, lease = string.match(v, '^(r?)(%d+) (%d+) (%d+) (%d+)$')
  if tk == nil then return nil end
  return {reader = r == 'r', ticket = tonumber(tk), deadline = tonumber(d), id = id,
    lease = tonumber(lease)}
end

-- The size of the reader group whose ticket's field holds `v`, and the deadline of its
-- claim window (nil while the group has not come first in line with the way in open);
-- nil when `v` names a writer (an owner token has no space). 'r <count>[ <claim-ms>]'.
local function group_size(v)
  local n, c = string.match(v, '^r (%d+)$'), nil
  if n == nil then
    n, c = string.match(v, '^r (%d+) (%d+)$')
  end
  return tonumber(n), tonumber(c)
end

-- A reader group's ticket field: its size, and its claim window's deadline if it has one.
local function group_text(n, claim)
  if claim == nil then return 'r ' .. fmt(n) end
  return 'r ' .. fmt(n) .. ' ' .. fmt(claim)
end

-- the queue entry of owner `o`: nil when it is not queued, false when malformed
local function queued_entry(o)
  local v = get('q:' .. o)
  if not v then return nil end
  return parse_queued(v) or false
end

local function format_queued(q)
  local r = q.reader and 'r' or ''
  return r .. fmt(q.ticket) .. ' ' .. fmt(q.deadline) .. ' ' .. q.id .. ' ' .. fmt(q.lease)
end

-- A writer's place `q`, of owner `o`, as its ticket field carries it.
local function format_ticket(o, q)
  return o .. ' ' .. fmt(q.deadline) .. ' ' .. q.id .. ' ' .. fmt(q.lease)
end

-- The writer a ticket field `v` of ticket `t` names, and its place: nil when `v` is not a
-- writer's (a reader group's 'r <count>'). A bare owner token, as revision 4 wrote it,
-- is read through that owner's place.
local function ticket_writer(v, t)
  local o, d, id, lease = string.match(v, '^(%S+) (%d+) (%d+) (%d+)$')
  if o ~= nil then
    return o, {reader = false, ticket = t, deadline = tonumber(d), id = id, lease = tonumber(lease)}
  end
  if string.find(v, ' ', 1, true) then return nil end
  local q = queued_entry(v)
  if q and not q.reader and q.ticket == t then return v, q end
  return v, nil
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
  local raw = all_fields()
  local gone = {}
  -- the hand-offs whose claim window passed (see finish): a writer's place the queue's
  -- head passed, with its deadline, the claim's, gone by. Its hold goes with it: the
  -- writer did not come to take it, and nobody believes a hold not taken
  local unclaimed = {}
  for i = 1, #raw, 2 do
    if string.sub(raw[i], 1, 2) == 'q:' then
      local q = parse_queued(raw[i + 1])
      if q and not q.reader and q.ticket < qh and q.deadline <= now then
        unclaimed['o:' .. string.sub(raw[i], 3)] = q.id
      end
    end
  end
  local was_upgrader = upgrader
  -- the reader groups' tickets and sizes, and their members still waiting
  local groups, members = {}, {}
  held, writer, upgrader, dl, du = 0, nil, nil, nil, 0
  for i = 1, #raw, 2 do
    local f, v = raw[i], raw[i + 1]
    local p = string.sub(f, 1, 2)
    if p == 'o:' then
      local e = parse_owner(v)
      if e == nil then return f end
      -- the holds whose own deadline has passed go; the entry with them when none is left
      local live = {}
      local lapsed = unclaimed[f]
      for _, h in ipairs(e.holds) do
        if h[4] > now and not (h[1] == 'w' and h[2] == lapsed) then
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
      if q.deadline <= now or (q.reader and q.ticket < qh) then
        -- (a reader's group is counted again below; a reader's place the head passed
        -- is no place: its group was passed by, see head)
        gone[#gone + 1] = f
        if q.deadline <= now and not q.reader then gone[#gone + 1] = 't:' .. fmt(q.ticket) end
      else
        deadline_set(q.deadline)
        if q.reader then members[q.ticket] = (members[q.ticket] or 0) + 1 end
      end
    elseif p == 't:' then
      local n, claim = group_size(v)
      if n then groups[#groups + 1] = {tonumber(string.sub(f, 3)), n, claim} end
    end
  end
  -- each reader group is as large as its members still waiting: one left empty goes
  rg = nil
  for _, g in ipairs(groups) do
    local t, n = g[1], members[g[1]] or 0
    if n == 0 then
      del('t:' .. fmt(t))
    else
      if n ~= g[2] then put('t:' .. fmt(t), group_text(n, g[3])) end
      if rg == nil or t > rg then rg = t end
      -- a claim window still open is a deadline: the call after it drops the group
      if g[3] and g[3] > now then deadline_set(g[3]) end
    end
  end
  -- a pending upgrade lives as long as its upgradable hold
  if upgrader == nil or upgrader ~= was_upgrader then pending, pending_lease = nil, nil end
  if #gone > 0 then
    -- (the lone hold's field is not in the hash: finish() rewrites the summary)
    local real = {}
    for _, f in ipairs(gone) do
      cache[f] = false
      if f ~= lone_field then real[#real + 1] = f end
    end
    if #real > 0 then redis.call('HDEL', key, unpack(real)) end
  end
  return nil
end

-- The first entry of the queue that is still there: a writer (its owner and entry), or
-- a reader group (nil, nil, its ticket); nil when the queue is empty. Tickets of writers
-- that left, and of groups whose readers all left, are dropped as they come to the head
-- (each once: amortised O(1)).
local function head()
  while qh < qt do
    local t = 't:' .. fmt(qh)
    local v = get(t)
    if v then
      local n, claim = group_size(v)
      if n then
        -- a group whose claim window passed loses its turn: its readers that did not
        -- come (died, or came late) find their place passed and come as new readers
        if n > 0 and (claim == nil or claim > now) then return nil, nil, qh end
        if n > 0 then orphaned = true end
      else
        local o, q = ticket_writer(v, qh)
        if q and q.deadline > now then return o, q end
        -- a writer whose place lapsed: its place goes with its ticket
        if q then del('q:' .. o) end
      end
    end
    del(t)
    if rg == qh then rg = nil end
    qh = qh + 1
    advanced = true
  end
  return nil, nil, nil
end

-- A reader (or upgradable reader) takes a place in the queue: in the youngest reader
-- group when nothing was queued after it, else in a new group at the tail. Returns the
-- group's ticket.
local function join_readers()
  if rg ~= nil and rg == qt - 1 then
    local v = get('t:' .. fmt(rg))
    local n, claim = nil, nil
    if v then n, claim = group_size(v) end
    if n and n > 0 then
      put('t:' .. fmt(rg), group_text(n + 1, claim))
      return rg
    end
  end
  rg = qt
  qt = qt + 1
  put('t:' .. fmt(rg), 'r 1')
  return rg
end

-- A reader's place in group `g` is given up (it entered, or gave up): a group left
-- empty goes (head() passes its ticket).
local function leave_readers(g)
  local t = 't:' .. fmt(g)
  local v = get(t)
  local n, claim = nil, nil
  if v then n, claim = group_size(v) end
  if n == nil then return end
  if n <= 1 then
    del(t)
    if rg == g then rg = nil end
  else
    put(t, group_text(n - 1, claim))
  end
end

-- takes owner `o`'s place `q` out of the queue (a writer's ticket, a reader's place in
-- its group)
local function dequeue(o, q)
  del('q:' .. o)
  if q.reader then
    leave_readers(q.ticket)
    return
  end
  del('t:' .. fmt(q.ticket))
  if q.ticket == qh then
    qh = qh + 1
    advanced = true
  end
end

-- Whether place `q` is one the queue's head has passed: a writer's that a release
-- handed the lock to (its own next call removes it), or a reader's whose group was
-- dropped.
local function passed(q)
  return q.ticket < qh
end

-- Whether `q` (a place, or nil) is that of a hold a release handed over and its writer
-- has not taken yet: a writer's place the queue's head passed.
local function handed_place(q)
  return q and not q.reader and passed(q)
end

-- the fence of a grant now (see fence_after)
local function next_fence()
  fence = fence_after(fence, now_us)
  return fmt(fence)
end

-- A call sent again finds the hold `h` its first sending granted: its deadline is set
-- anew from now, as for a grant (the client counts the lease from the send time of the
-- call whose reply it got), and written back, so that the call writes: a WAIT after it
-- then covers the grant, whichever connection made it (a hold handed over by another
-- client's release, a first sending on a connection since lost). Written back even
-- when nothing changed (the same millisecond as the grant, the hold kept in the
-- summary): a call that writes nothing moves its connection's replication offset
-- nowhere, and its WAIT would confirm only what that connection wrote before.
local function regrant(o, e, h, lease)
  if now + lease > h[4] then h[4], h[5] = now + lease, lease end
  put('o:' .. o, format_owner(e))
  deadline_set(h[4])
  rewrite = true
end

-- The waiter whose writer's place `q` the lock was handed over for takes hold `h` (of
-- its entry `e`): its place goes, and that deletion is the write the WAIT after this
-- call covers (the hand-off before it in the replication stream with it). The hold keeps
-- the deadline the hand-off gave it (its place's: at least a lease from the waiter's
-- last attempt, which renews its place every third of a lease), which the reply says;
-- it is renewed here only when less than half a lease is left, or when the caller
-- does not say it counts the lease left (`counts_left` false: a client that counts a
-- whole lease from its call). Returns the ms left.
local function take_handed(o, e, h, q, lease, counts_left)
  dequeue(o, q)
  if not counts_left or h[4] - now < lease / 2 then regrant(o, e, h, lease) end
  return h[4] - now
end

-- adds a hold for owner `o` (whose entry is `e`, or nil) and returns its fence
local function grant(o, e, m, id, lease)
  local f = next_fence()
  if e == nil then
    e = {holds = {}}
    held = held + 1
  end
  e.holds[#e.holds + 1] = {m, id, f, now + lease, lease}
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

-- The hold `id` a release handed over to writer `o`, taken without reading the clock,
-- for a caller that counts its lease from its first attempt under `id` (acquire.lua's
-- ARGV[6] '2'). Its place goes, as in take_handed (that deletion is the write the WAIT
-- after this call covers), and nothing else changes: the hold keeps the deadline the
-- hand-off gave it (its place's, set by an attempt under `id`: at least a lease after the
-- caller's first one was sent), and the summary stays true as it is (a place removed
-- moves no bound). Nothing here compares a deadline with the clock: a hold whose deadline
-- passed and that no call removed yet is taken all the same, and its caller believes it
-- no longer than that deadline (docs/PROTOCOL.md, rule 4). Returns the hold's fence, or
-- nil when there is no such hold (the caller then reads the clock and goes the general
-- way, which also answers a malformed field).
local function take_unclocked(o, id)
  if pending ~= nil then return nil end
  local e, q = owner_entry(o), queued_entry(o)
  if not e or not (handed_place(q) and q.id == id) then return nil end
  for _, h in ipairs(e.holds) do
    if h[2] == id and h[1] == 'w' then
      redis.call('HDEL', key, 'q:' .. o, 't:' .. fmt(q.ticket))
      return h[3]
    end
  end
  return nil
end

-- The only owner that holds and its one hold, when one owner holds exactly one hold and
-- no upgrade waits (nil otherwise): its hold is then kept in the summary. Every entry a
-- call changes or reads is in W or the cache; with one owner holding, the one found
-- holding there is it.
local function sole_hold()
  if held ~= 1 or pending ~= nil then return nil end
  local o, v = nil, nil
  for f, w in pairs(W) do
    if w and string.sub(f, 1, 2) == 'o:' then o, v = string.sub(f, 3), w end
  end
  if o == nil then
    for f, c in pairs(cache) do
      if c and W[f] == nil and string.sub(f, 1, 2) == 'o:' then o, v = string.sub(f, 3), c end
    end
  end
  if o == nil or string.find(v, ' ', 1, true) then return nil end
  return o, v
end

-- Settles who may proceed now, writes the summary back, and publishes when someone
-- may be waiting for it (writers and readers that wait have a place in the queue, so
-- an uncontended release publishes nothing):
--   'g <owner> <hold id> <fence>'  a free lock was handed to the first queued writer
--   '*'                            the lock is free, and readers are first in the queue
--   'r'                            readers hold, and the readers first in the queue may
--                                  join them (no writer holds, nor waits before them)
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
    local o, q, g = head()
    if o ~= nil and held == 0 then
      -- the queue's head moves past the writer, whose place stays where it is: the
      -- writer's own call that takes the hold removes it (see take_handed), and that
      -- removal is the write its WAIT covers. A place below the head is no place in the
      -- queue (see passed): nothing else reads it, and it lapses with the hold
      qh = qh + 1
      advanced = true
      -- it holds nothing (nobody does; a queued writer never holds): it has no field
      -- of its own. (Should this call have read or written that field, the buffer
      -- knows better, and finish() deletes it as it would any other.)
      local field = 'o:' .. o
      if cache[field] == nil and W[field] == nil then cache[field] = false end
      -- the hold lasts until the queue entry would have lapsed, not a lease from now: a
      -- writer that died or gave up while queued blocks the lock no longer than its
      -- entry would have (the live one renews it when it takes it)
      local f = grant(o, nil, 'w', q.id, math.min(q.lease, q.deadline - now))
      msg = handoff_message(o, q.id, f)
      -- the claim window: its place, below the head, now carries the deadline by which
      -- its writer must come and take the hold (prune drops both after it). The hold
      -- keeps its own deadline, the place's, for the writer that comes in time
      local claim = math.min(now + CLAIM_MS, q.deadline)
      put('q:' .. o, format_queued({reader = false, ticket = q.ticket, deadline = claim,
        id = q.id, lease = q.lease}))
      deadline_set(claim)
    elseif g ~= nil and pending == nil then
      -- the readers first in line may enter: they come themselves (readers are not
      -- granted here: a group is of any size), and each one that enters leaves the
      -- group. The group's claim window starts now (once): those that do not come
      -- within it lose their turn (see head)
      local t = 't:' .. fmt(g)
      local n, claim = group_size(get(t))
      if claim == nil then
        claim = now + CLAIM_MS
        put(t, group_text(n, claim))
        deadline_set(claim)
      end
      if advanced or not quiet then msg = (held == 0) and '*' or 'r' end
    end
  end
  if qh >= qt then rg = nil end
  -- nothing left (held = 0, an empty queue): the hash stays as a tombstone, the summary
  -- alone, for FENCE_MEMORY or more: the next fence is above its own (a call that found
  -- no hash and left nothing writes nothing). Nothing has a deadline then: the bounds
  -- say so, as fast_release writes them, so that the next acquire takes the fast path.
  if orphaned then
    -- places of a group passed by in this call are still in the hash: the earliest
    -- deadline is due now, so that the next call's prune removes them
    deadline_set(now)
  elseif held == 0 and qh >= qt then
    dl, du = nil, 0
  end
  if existed or held > 0 or qh < qt then
    -- where the holds go: the one hold of the only owner (no upgrade waiting) in the
    -- summary, with no field of its own, nor 'w' or 'u'; every other in its owner's field
    local alone, alone_hold = sole_hold()
    if lone and alone ~= lone then
      -- the summary's hold leaves it: written to its field if its owner still holds
      -- (nothing to delete if not: that field never was in the hash)
      local v = W[lone_field]
      if v == nil then v = cache[lone_field] end
      W[lone_field] = v or nil
    end
    local w_field, u_field = writer, upgrader
    if u_field ~= nil and pending ~= nil then
      u_field = u_field .. ' ' .. pending .. ' ' .. fmt(pending_lease) .. ' ' .. pending_from
    end
    if alone then
      local f = 'o:' .. alone
      -- its field goes, unless it is known not to be in the hash (the summary's own,
      -- or read absent)
      if alone ~= lone and cache[f] ~= false then W[f] = false else W[f] = nil end
      w_field, u_field = nil, nil
    end
    local set, dels = {}, {}
    for f, v in pairs(W) do
      if v then
        set[#set + 1] = f
        set[#set + 1] = v
      else
        dels[#dels + 1] = f
      end
    end
    -- the key lives FENCE_MEMORY past the latest deadline (now, when nothing is left)
    local expiry = expiry_for(du, now, ex)
    if expiry then ex = expiry end
    local summary = format_summary(fence, held, dl, du, qh, qt, rg, ex, alone_hold, alone)
    if summary ~= before_s or rewrite then
      set[#set + 1] = 's'
      set[#set + 1] = summary
    end
    if w_field ~= before_writer then
      if w_field == nil then dels[#dels + 1] = 'w' else set[#set + 1] = 'w'; set[#set + 1] = w_field end
    end
    if u_field ~= before_u then
      if u_field == nil then dels[#dels + 1] = 'u' else set[#set + 1] = 'u'; set[#set + 1] = u_field end
    end
    if #dels > 0 and existed then redis.call('HDEL', key, unpack(dels)) end
    if #set > 0 then redis.call('HSET', key, unpack(set)) end
    if expiry then redis.call('PEXPIREAT', key, ex) end
  end
  if msg ~= nil then
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
