-- layout.lua: the first line of every lock script after the two the client adds
-- (PUBLISH and OWNER_ARG). The version of the hash layout this code reads and writes
-- (see the `scripts` module docs); a hash of another layout is never taken for this one.
local LAYOUT = '3'
-- How long a lock's hash outlives its last deadline (ms), kept as a tombstone that
-- holds only the summary once nobody holds or waits: the last fence is remembered that
-- long, so that the next one is above it even on a master whose clock is behind (by
-- less than this) or after a failover or a slot move.
local FENCE_MEMORY = 60000
