-- fenced_set.lua: a value stored with the fence that wrote it, refused to a lower fence.
-- For data outside a lock's slot, written by code that holds only the fence (another
-- process, a job runner): a holder whose lease ran out, writing late with its old
-- fence, cannot overwrite what a later holder wrote. Stand-alone: it reads no lock.
--
-- KEYS[1]  the value's hash: fields 'fence' and 'value'
-- ARGV[1]  the writer's fence (decimal digits)
-- ARGV[2]  the value (any bytes)
-- Returns
--   {1, fence}       written (the fence is the writer's; an equal fence may write again)
--   {0, fence}       refused: a higher fence wrote last (its fence)
--   {-3, type}       the key holds another type (nothing is touched)
local function fenced_set(KEYS, ARGV)
  local t = redis.call('TYPE', KEYS[1])['ok']
  if t ~= 'none' and t ~= 'hash' then return {-3, t} end
  local fence = ARGV[1]
  local last = redis.call('HGET', KEYS[1], 'fence')
  -- compared as digits, not numbers: exact at any size
  local function below(a, b) return #a < #b or (#a == #b and a < b) end
  if last and below(fence, last) then return {0, last} end
  redis.call('HSET', KEYS[1], 'fence', fence, 'value', ARGV[2])
  return {1, fence}
end
