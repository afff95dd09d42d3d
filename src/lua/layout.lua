-- layout.lua: the vocabulary of the hash layout, the first part of every lock script
-- after the two lines the client adds (PUBLISH and OWNER_ARG), before the fast paths and
-- lib.lua, which use it: the layout version, the reply codes, and the patterns of the
-- summary and of a hold, each defined once here (see the `scripts` module docs for the
-- layout). Only constants: the fast paths run next, and every statement run before them
-- costs each call, since every EVALSHA runs its whole text again (benches/script_cost.py
-- measures it: defining the encoders here, or calling them from the fast paths, costs
-- more server instructions per uncontended cycle). The functions that write these
-- encodings are lib.lua's; the fast paths write the same bytes out, and a test on a
-- live server (scripts/live_tests.rs) proves both paths leave the same hash.

-- The version of the hash layout this code reads and writes; a hash of another layout is
-- never taken for this one.
local LAYOUT = '3'
-- How long a lock's hash outlives its last deadline (ms), kept as a tombstone that
-- holds only the summary once nobody holds or waits: the last fence is remembered that
-- long, so that the next one is above it even on a master whose clock is behind (by
-- less than this) or after a failover or a slot move.
local FENCE_MEMORY = 60000

-- The first element of every reply, whatever the script: 1 done (granted, released,
-- renewed, read), 0 not now (busy: the caller may wait), 2 gone (the hold the call
-- starts from is not there), -1 upgrade deadlock, -3 the key holds another type, -4 the
-- hash is of another layout or has a malformed field. Each script's header lists the
-- codes it returns.

-- The summary field 's': '<layout> <fence> <held> <dl> <du> <qh> <qt> <rw>', '-' for
-- none: the last fence, owners that hold, bounds of the earliest and latest deadline,
-- the writer queue's head and next ticket, until when readers wait. SUMMARY parses any;
-- the fast paths match only the shapes they handle, in one step (fewer captures):
-- TOMBSTONE, nobody holds (0), no deadline, no reader waits: fence, qh, qt;
-- ONE_OWNER, one owner holds (1), no reader waits: fence, dl, qh, qt.
local SUMMARY = '^(%d+) (%S+) (%d+) (%S+) (%d+) (%d+) (%d+) (%S+)$'
-- Both begin with LAYOUT written out: a pattern built with '..' would be built anew by
-- every call (a unit test checks that they agree with LAYOUT).
local TOMBSTONE = '^3 (%d+) 0 %- %d+ (%d+) (%d+) %-$'
local ONE_OWNER = '^3 (%d+) 1 (%d+) %d+ (%d+) (%d+) %-$'

-- A hold in an owner's entry 'o:<owner>' (holds separated by spaces):
-- '<r|w|u><id>:<fence>:<deadline-ms>'. SOLE_HOLD matches an entry of exactly one hold
-- and captures its id.
local HOLD = '^([rwu])(%d+):(%d+):(%d+)$'
local SOLE_HOLD = '^[rwu](%d+):%d+:%d+$'

