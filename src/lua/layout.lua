-- layout.lua: the vocabulary of the hash layout, the first part of the function library
-- after its first lines (the library's name, the prefix of its function names, and
-- whether the fast paths are used: see the `scripts` module): the layout version, the
-- reply codes, and the patterns of the summary and of a hold, each defined once here
-- (docs/PROTOCOL.md describes the layout). Loaded once per server with FUNCTION LOAD:
-- nothing here runs again per call.

-- The version of the hash layout this library reads and writes; a hash of another layout
-- is never taken for this one (its functions are named after it: rwlock4_*).
local LAYOUT = '4'
-- The revision of this library's code within the layout: a client loads its library
-- where the server has none or an older revision (FUNCTION LOAD REPLACE), and leaves a
-- newer one in place. Revision 2 queues readers (in groups, among the writers) where
-- revision 1 let them mark 'rw' (until when readers wait) and wait outside the queue;
-- it reads a revision 1 hash (that mark is dropped). Revision 1 does not read revision
-- 2's reader places: a server keeps the newest revision loaded. Revision 3 adds
-- conditions and checks up front to guarded calls, and breaking one client's holds and
-- places to force_release; it answers revision 1 and 2 calls as they did. Revision 4
-- writes a grant sent again (the same owner and hold id) back even when nothing in it
-- changed, so that the WAIT after that call covers the grant (see lib.lua's regrant).
-- Revision 5 writes a queued writer's place numbers in its ticket field as well, so
-- that a hand-off reads one field (it reads a revision 4 ticket, a bare owner token),
-- and leaves the place of a writer handed the lock to the writer's own call that takes
-- the hold, whose reply then says the lease left when the caller asks for it (a revision
-- 4 client does not, and has that hold renewed for a whole lease from its call).
-- Revision 6 lets that call take the hold without reading the server's clock when the
-- caller counts the lease from its first attempt under the hold id (ARGV[6] '2' of
-- acquire.lua): one server command less per contended grant. Revision 7 replies and
-- writes as revision 6 does, reading the clock's and the tombstone's digits with fewer
-- server instructions (see lib.lua's server_time). Revision 8 gives a hand-off a claim
-- window (CLAIM_MS below): a writer handed the lock that does not take it in time, and a
-- reader group first in line whose readers do not all come in time, lose their turn, so
-- that a waiter that died holds up those behind it about a second, not a lease; it
-- also makes guarded calls all or nothing (guarded.lua), decides there whether a call
-- writes, and names a broken client on the channel (force_release.lua). Revision 9
-- names the queue's head ticket field in a grant's hint when the caller asks (acquire's
-- ARGV[7]), and a release given it back (its ARGV[4]) reads that field with the summary:
-- one server command less per contended hand-off. Its replies to callers that do not
-- ask are revision 8's. Revision 10 replies and writes exactly as revision 9 does, with
-- fast paths for a contended hand-off: a release of the summary's lone hold that hands
-- the lock to the writer first in line (fast_release.lua), and that writer's take
-- (fast_take.lua), each without the general path's parsing.
local REVISION = 10
-- How long a lock's hash outlives its last deadline (ms), kept as a tombstone that
-- holds only the summary once nobody holds or waits: the last fence is remembered that
-- long, so that the next one is above it even on a master whose clock is behind (by
-- less than this) or after a failover or a slot move.
local FENCE_MEMORY = 60000
-- How long a waiter has to take what a release gave it (ms): a writer the lock was
-- handed to, its hold; the readers of a group that came first in line, their way in. A
-- live waiter is woken by the release message and comes within a round trip; one that
-- died (killed, its process gone without withdrawing) never comes, and those behind it
-- wait this long instead of its place's lease. A waiter that comes later finds its turn
-- gone and takes a new place (it held nothing, and believed nothing, meanwhile). The
-- client waits this long, and a little more, after a release message that handed the
-- lock to another (src/acquire: CLAIM_WINDOW, which a test checks against this).
local CLAIM_MS = 1000
-- Release messages go out on the lock's sharded channel (Redis 7+, as functions are).
local PUBLISH = 'spublish'

-- The first element of every reply, whatever the function: 1 done (granted, released,
-- renewed, read), 0 not now (busy: the caller may wait), 2 gone (the hold the call
-- starts from is not there), -1 upgrade deadlock, -3 the key holds another type, -4 the
-- hash has a malformed field, -7 the hash is of another layout (its version follows).
-- Each function's header lists the codes it returns.

-- The summary field 's':
--   '<layout> <fence> <held> <dl> <du> <qh> <qt> <rg> <ex>[ <hold> <owner>]'
-- '-' for none: the last fence, owners that hold, bounds of the earliest and latest
-- deadline, the queue's head and next ticket, the ticket of the youngest reader group
-- in the queue (readers that come join it while nothing is queued after it), and when
-- the key expires (ms, server time: the expiry set last, so that a grant extends it only
-- when its deadline needs more). When one owner holds one hold and no upgrade waits, that
-- hold and its owner end the summary instead of having fields of their own ('o:', 'w',
-- 'u'): an uncontended grant and release each write the summary alone.
-- SUMMARY parses any; the fast paths match only the shapes they handle, in one step:
-- TOMBSTONE, nobody holds (0), no deadline, no reader group: fence, qh, qt, ex;
-- LONE, one owner holds one hold, kept in the summary, no reader group: fence, dl, du,
-- qh, qt, ex, the hold's id, the owner (the fast release: an empty queue, or a writer
-- first in it to hand the lock to);
-- HANDED, one owner holds one write hold, kept in the summary (as a hand-off leaves it):
-- qh, qt, rg (checked by the caller), the hold's id and fence, the owner (the fast take).
local SUMMARY = '^(%d+) (%S+) (%d+) (%S+) (%d+) (%d+) (%d+) (%S+) (%d+)(.*)$'
local TOMBSTONE = '^4 (%d+) 0 %- %d+ (%d+) (%d+) %- (%d+)$'
local LONE = '^4 (%d+) 1 (%d+) (%d+) (%d+) (%d+) %- (%d+) [rwu](%d+):%d+:%d+:%d+ (%S+)$'
local HANDED = '^4 %d+ 1 %d+ %d+ (%d+) (%d+) (%S+) %d+ w(%d+):(%d+):%d+:%d+ (%S+)$'

-- A hold, in an owner's entry 'o:<owner>' (holds separated by spaces) or at the end of
-- the summary: '<r|w|u><id>:<fence>:<deadline-ms>:<lease-ms>', the lease being the one
-- its last grant or renewal gave (so it was renewed at deadline - lease).
local HOLD = '^([rwu])(%d+):(%d+):(%d+):(%d+)$'
