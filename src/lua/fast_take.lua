-- fast_take.lua: a writer takes the hold a release handed it, without the clock
-- (acquire.lua's ARGV[6] '2'), in the common case: the hold is the lone one kept in the
-- summary, as a hand-off leaves it. Called first by acquire() for such a call, before
-- begin(). It does what begin() and lib.lua's take_unclocked do there, without their
-- parsing: one read (the summary, 'w', 'u', the writer's place), one deletion (its place
-- and its ticket). In every other case (another shape of summary, a place that is not
-- the one handed over under this hold id, a key of another type or layout, digits the
-- general path would write otherwise) it returns nil and the general path decides.
--
-- KEYS, ARGV: as acquire.lua, with ARGV[6] '2'
-- Returns
--   {1, fence, others, '-'}   as acquire.lua for such a take; nil: not taken here
local function fast_take(KEYS, ARGV)
  local key, owner, id = KEYS[1], ARGV[2], ARGV[3]
  local r = redis.pcall('HMGET', key, 's', 'w', 'u', 'q:' .. owner)
  if r['err'] ~= nil then return nil end
  local s, q = r[1], r[4]
  -- (a summary's lone hold has no 'w' or 'u' field: begin() refuses a hash that has one;
  -- no 'u' also means that no upgrade waits)
  if type(s) ~= 'string' or type(q) ~= 'string' or r[2] or r[3] then return nil end
  local qh, qt, rg, hold_id, fence, o = string.match(s, HANDED)
  if o ~= owner or hold_id ~= id then return nil end
  if rg ~= '-' and not string.find(rg, '^%d+$') then return nil end
  -- its place: a writer's, under this hold id, that the queue's head passed (handed_place)
  local ticket, place_id = string.match(q, '^(%d+) %d+ (%d+) %d+$')
  if ticket == nil or place_id ~= id or not plain(ticket) or not plain(qh)
    or ticket + 0 >= qh + 0 then
    return nil
  end
  redis.call('HDEL', key, 'q:' .. owner, 't:' .. ticket)
  -- the grant's hint, as acquire.lua's others(): one owner holds, no upgrade waits
  local others = 0
  if qh + 0 < qt + 0 then
    if ARGV[7] == '1' then others = 't:' .. qh else others = 1 end
  end
  return {1, fence, others, '-'}
end
