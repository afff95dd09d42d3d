-- register.lua: the last part of the library: every function under its name, PREFIX ..
-- the name ('rwlock4_acquire', ...: docs/PROTOCOL.md gives each one's keys, arguments
-- and replies). Every lock function writes (a call that reads may prune expired
-- entries) and is called with FCALL; the version alone runs anywhere (FCALL_RO).

redis.register_function(PREFIX .. 'acquire', acquire)
redis.register_function(PREFIX .. 'release', release)
redis.register_function(PREFIX .. 'renew', renew)
redis.register_function(PREFIX .. 'upgrade', upgrade)
redis.register_function(PREFIX .. 'downgrade', downgrade)
redis.register_function(PREFIX .. 'withdraw', withdraw)
redis.register_function(PREFIX .. 'state', state)
redis.register_function(PREFIX .. 'force_release', force_release)
redis.register_function(PREFIX .. 'guarded', guarded)
redis.register_function(PREFIX .. 'fenced_set', fenced_set)
-- {layout, revision}: what a client reads to decide whether to load its own library
-- (KEYS: none; ARGV: none)
redis.register_function{
  function_name = PREFIX .. 'version',
  callback = function() return {LAYOUT, REVISION} end,
  flags = {'no-writes'},
}
