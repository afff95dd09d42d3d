-- withdraw.lua: an acquire gave up (timeout, cancelled): takes its writer out of the
-- queue and gives back the hold it may have been handed meanwhile, in one step (two
-- steps could let a hand-off slip in between).
--
-- KEYS[1]  lock hash; KEYS[2] release channel
-- ARGV[1]  owner token
-- ARGV[2]  publish command: 'spublish', 'publish', or ''
-- ARGV[3]  hold id of the acquire
-- Returns {1}; {-3, type}, {-4, field}: see prelude
local q = queue[ARGV[1]]
if q ~= nil and q.id == ARGV[3] then
  queue[ARGV[1]] = nil
  drop('q:' .. ARGV[1])
end
remove_hold(ARGV[1], ARGV[3])
finish(ARGV[2])
return {1}
