-- layout.lua: the first line of every lock script after the two the client adds
-- (PUBLISH and OWNER_ARG). The version of the hash layout this code reads and writes
-- (see the `scripts` module docs); a hash of another layout is never taken for this one.
local LAYOUT = '2'
