-- withdraw.lua: takes a writer out of the queue (it gave up waiting).
--
-- KEYS[1]  lock hash; KEYS[2] release channel
-- ARGV[1]  owner token
-- ARGV[2]  publish command: 'spublish', 'publish', or ''
-- Returns {1}; {-3, type}, {-4, field}: see prelude
if queue[ARGV[1]] ~= nil then
  queue[ARGV[1]] = nil
  drop('q:' .. ARGV[1])
end
finish(ARGV[2])
return {1}
