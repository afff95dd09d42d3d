#!lua name=cluster_rwlock_floor
-- floor.lua: the Redis calls of an uncontended cycle on a lock's tombstone as layout 4's
-- fast paths make them (HGET, TIME, HSET; HGET, HSET), with no logic around them: the
-- floor of the layout, run by benches/peers (B1) and benches/script_cost.py (callgrind);
-- and, at the end, the calls of a hand-off (B2's floor, benches/peers).
-- KEYS[1]: a key of its own (not a lock); ARGV as rwlock4_acquire / rwlock4_release:
-- floor_acquire mode, owner, hold id, lease, intent; floor_release owner, hold id.
-- Returns {1, fence} and {1}.
redis.register_function('floor_acquire', function(KEYS, ARGV)
  redis.call('HGET', KEYS[1], 's')
  local t = redis.call('TIME')
  local d = t[1] .. '000'
  redis.call('HSET', KEYS[1], 's', '4 ' .. d .. ' 1 ' .. d .. ' ' .. d .. ' 0 0 - ' .. d ..
    ' w' .. ARGV[3] .. ':' .. d .. ':' .. d .. ':30000 ' .. ARGV[2])
  return {1, d}
end)
redis.register_function('floor_release', function(KEYS, ARGV)
  local s = redis.call('HGET', KEYS[1], 's')
  redis.call('HSET', KEYS[1], 's', '4 ' .. string.sub(tostring(s), 3, 18) .. ' 0 - 0 0 0 - 1')
  return {1}
end)
-- B2's floor (benches/peers): a hand-off's calls with no logic. floor_hand_over, the
-- release that hands the lock to a queued writer (HMGET, TIME, HSET, and the message on
-- the key's channel, as the general path makes them); floor_take, that writer's take
-- (HMGET, HDEL). ARGV: the writer's name, the message's hold id. Returns {1}.
redis.register_function('floor_hand_over', function(KEYS, ARGV)
  redis.call('HMGET', KEYS[1], 's', 'q:' .. ARGV[1])
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 's', t[1] .. t[2], 'q:' .. ARGV[1], t[1])
  redis.call('SPUBLISH', KEYS[1] .. ':released', 'g ' .. ARGV[1] .. ' ' .. ARGV[2] .. ' 1')
  return {1}
end)
redis.register_function('floor_take', function(KEYS, ARGV)
  redis.call('HMGET', KEYS[1], 's', 'q:' .. ARGV[1])
  redis.call('HDEL', KEYS[1], 'q:' .. ARGV[1])
  return {1}
end)
