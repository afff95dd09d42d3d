-- guarded.lua: commands on keys of the lock's slot, run only while the caller's hold is
-- on the server and its deadline, by the server's clock, has not passed; with
-- conditions, checked first, that choose which of two lists of commands runs (as etcd's
-- Txn If/Then/Else). The check, the conditions and the commands are one function call on
-- one node: nothing else runs between them, and a hold that is gone (its lease ran out,
-- broken by force_release, released, or lost in a failover) runs nothing. Reads the
-- caller's entry only (O(1) in the lock's entries), and writes nothing of the lock.
--
-- All or nothing, as far as Redis allows (it has no rollback): before the first command
-- runs, each command of the branch chosen is checked against the keys as they are, and
-- as the commands before it leave them where that can be told: the type of its key
-- (what would be WRONGTYPE), and for INCR/DECR/HINCRBY and their kin the value they
-- add to (what would be "not an integer"). A command that fails all the same (an
-- overflow, a bad option) stops the call: the commands before it stay written, those
-- after it do not run, and the reply says where it stopped.
--
-- KEYS[1]    lock hash (see lib)
-- KEYS[2..]  the keys the conditions and commands name, declared so that the cluster
--            checks their slot
-- ARGV[1]    owner token
-- ARGV[2]    hold id
-- ARGV[3]    '<writes> <conditions> <then>': writes '1' when a command of either branch
--            writes (the hold must be a write hold), '0' when all read; how many
--            conditions follow; how many commands the then-branch has (the rest of the
--            commands are the else-branch).
--            Revision 1 and 2 clients send '1' or '0' alone: then ARGV[4..] are
--            commands '<n> <word>...', all run, and a failed one does not stop the next.
-- ARGV[4..]  the conditions, each '<n> <word>...' (n words follow):
--              'k' <key> <test> [<operand>]            the string value at key
--              'f' <key> <field> <test> [<operand>]    a field of the hash at key
--              'e' <key> <test>                        the key, of any type ('1' or nil)
--            test: 'exists' | 'missing' | 'eq' | 'ne' (bytes) | 'lt' | 'le' | 'gt' |
--            'ge' (integers: a value that is missing or not an integer fails them)
--            then the commands, each '<n> <check> <word>...' (n words: the command's name,
--            in capitals, then its arguments, the key first). <check> is four
--            characters: the type its keys must have ('s' string, 'h' hash, 'l' list,
--            'S' set, 'z' sorted set, '*' any), what it leaves there ('.' nothing
--            changed, '=' that type, '0' no key, 's' a string, '?' cannot be told), the
--            value it adds to ('i' an integer, 'f' a number, '-' none: for 'h', the
--            field its third word names), and which words are keys ('1' the first
--            argument, 'a' every argument: DEL, MGET, ...).
-- Returns
--   {1, held, failed, {{0, reply} or {1, error}, ...}}  held 1 when every condition
--        held (the then-branch ran), 0 when not (the else-branch ran); failed, the
--        first condition that did not hold (from 1; 0 when all held); each command's
--        reply, in order, the last an error when a command failed (none after it ran)
--   {2}    the hold is not there, or its deadline has passed: nothing ran
--   {-5}   a command writes and the hold is not a write hold: nothing ran
--   {-6}   a declared key or a word is the lock's own hash or channel: nothing ran (the
--          client refuses every lock's keys before sending; this is the second line,
--          for a client that did not)
--   {-8, where, index, message}  a condition ('if') or a command ('then'/'else', by its
--          place in its branch, from 1) would fail: nothing ran
--   {1, {...}}  (the old form of ARGV[3]) each command's reply, in order
--   {-3, type}, {-4, field}: see lib

-- The type names TYPE answers, by the letter a command's check gives.
local TYPE_OF = {s = 'string', h = 'hash', l = 'list', S = 'set', z = 'zset'}

-- Whether `v` is an integer as Redis reads one (no sign but '-', no leading zeros, no
-- spaces, within 64 bits).
local function is_integer(v)
  if not (v == '0' or string.find(v, '^%-?[1-9]%d*$')) then return false end
  if #v < 19 then return true end
  local digits = string.gsub(v, '^%-', '')
  if #digits ~= 19 then return false end
  local limit = (string.sub(v, 1, 1) == '-') and '9223372036854775808' or '9223372036854775807'
  return digits <= limit
end

-- Compares two integers given as text (is_integer), exactly: -1, 0 or 1.
local function compare_integers(a, b)
  local na, nb = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if na ~= nb then return na and -1 or 1 end
  local sign = na and -1 or 1
  if #a ~= #b then return (#a < #b) and -sign or sign end
  if a == b then return 0 end
  return (a < b) and -sign or sign
end

-- Whether the condition whose words are ARGV[i .. i + n - 1] holds; or nil and the
-- server's message when reading it fails (a key of another type).
local function condition_holds(ARGV, i, n)
  local source, k = ARGV[i], ARGV[i + 1]
  local j, value = i + 2, nil
  if source == 'e' then
    if redis.call('EXISTS', k) == 1 then value = '1' end
  elseif source == 'k' or source == 'f' then
    local r
    if source == 'k' then
      r = redis.pcall('GET', k)
    else
      r = redis.pcall('HGET', k, ARGV[j])
      j = j + 1
    end
    if type(r) == 'table' and r['err'] ~= nil then return nil, r['err'] end
    if r then value = r end
  else
    return nil, 'ERR unknown condition source ' .. tostring(source)
  end
  local test, operand = ARGV[j], ARGV[j + 1]
  if j > i + n - 1 or (test ~= 'exists' and test ~= 'missing' and j + 1 > i + n - 1) then
    return nil, 'ERR a condition without its test or operand'
  end
  if test == 'exists' then return value ~= nil end
  if test == 'missing' then return value == nil end
  if test == 'eq' then return value == operand end
  if test == 'ne' then return value ~= operand end
  if value == nil or not is_integer(value) or not is_integer(operand) then
    if test == 'lt' or test == 'le' or test == 'gt' or test == 'ge' then return false end
    return nil, 'ERR unknown condition test ' .. tostring(test)
  end
  local c = compare_integers(value, operand)
  if test == 'lt' then return c < 0 end
  if test == 'le' then return c <= 0 end
  if test == 'gt' then return c > 0 end
  if test == 'ge' then return c >= 0 end
  return nil, 'ERR unknown condition test ' .. tostring(test)
end

-- Checks the commands at ARGV[from .. to - 1] (each '<n> <check> <word>...') against the
-- keys as they are and as the commands before each leave them (see the header): nil, or
-- the place of the first that would fail and the message it would get.
local function first_failure(ARGV, from, to)
  -- per key: the type it has before the command looked at ('none' when absent, '?' when
  -- it cannot be told), and whether a command of this call changed its value
  local types, touched = {}, {}
  local index, i = 0, from
  while i < to do
    index = index + 1
    local n, check = tonumber(ARGV[i]), ARGV[i + 1]
    if n == nil or check == nil then return index, 'ERR a malformed command' end
    local want, leaves, adds = string.sub(check, 1, 1), string.sub(check, 2, 2), string.sub(check, 3, 3)
    local first, last = i + 3, i + n + 1
    if string.sub(check, 4, 4) ~= 'a' then last = first end
    for k = first, last do
      local key = ARGV[k]
      if key == nil then break end
      if want ~= '*' then
        local t = types[key]
        if t == nil then
          -- (a reply that is not a type, as a user refused TYPE would get: not told)
          local r = redis.pcall('TYPE', key)
          t = type(r) == 'table' and r['ok'] or '?'
          types[key] = t
        end
        if t ~= 'none' and t ~= '?' and t ~= TYPE_OF[want] then
          return index, 'WRONGTYPE Operation against a key holding the wrong kind of value'
        end
        if adds ~= '-' and t == TYPE_OF[want] and not touched[key] then
          -- read as the caller's user may (one allowed HINCRBY but not HGET is not
          -- checked: the command itself will tell)
          local v
          if want == 'h' then v = redis.pcall('HGET', key, ARGV[i + 4]) else v = redis.pcall('GET', key) end
          if type(v) ~= 'string' then v = nil end
          if v and adds == 'i' and not is_integer(v) then
            return index, 'ERR ' .. (want == 'h' and 'hash value' or 'value') .. ' is not an integer or out of range'
          end
          if v and adds == 'f' and tonumber(v) == nil then
            return index, 'ERR ' .. (want == 'h' and 'hash value' or 'value') .. ' is not a valid float'
          end
        end
      end
      if leaves ~= '.' then
        touched[key] = true
        if leaves == '=' then types[key] = TYPE_OF[want]
        elseif leaves == '0' then types[key] = 'none'
        elseif leaves == 's' then types[key] = 'string'
        else types[key] = '?' end
      end
    end
    i = i + n + 2
  end
  return nil
end

-- Runs the commands at ARGV[from .. to - 1]: their replies, in order. Each is
-- '<n> <check> <word>...' (`checked`: revision 3's form, stopping at the first that
-- fails) or '<n> <word>...' (the old form of revision 1 and 2 clients, where a failed
-- command does not stop the next).
local function run_commands(ARGV, from, to, checked)
  local skip = checked and 1 or 0
  local replies, i = {}, from
  while i < to do
    local n = tonumber(ARGV[i])
    local words = {}
    for j = 1, n do words[j] = ARGV[i + skip + j] end
    local r = redis.pcall(unpack(words))
    if type(r) == 'table' and r['err'] ~= nil then
      replies[#replies + 1] = {1, r['err']}
      if checked then return replies end
    else
      replies[#replies + 1] = {0, r}
    end
    i = i + n + 1 + skip
  end
  return replies
end

local function guarded(KEYS, ARGV)
  local early = begin(KEYS, ARGV, 1)
  if early then return early end
  local owner, id = ARGV[1], ARGV[2]
  local w, conditions, then_count = string.match(ARGV[3], '^([01]) (%d+) (%d+)$')
  local old_form = w == nil
  if old_form then w = ARGV[3] end
  local writes = w == '1'
  -- a DEL, HDEL or PEXPIRE of the lock's own hash would let a second writer in and drop
  -- the fence's tombstone: refuse before anything runs. Every word is compared, not only
  -- the keys' places (which this function does not know): a value spelled as the lock's key
  -- is refused too, which costs nothing real
  local own_channel = KEYS[1] .. ':released'
  for k = 2, #KEYS do
    if KEYS[k] == KEYS[1] or KEYS[k] == own_channel then return {-6} end
  end
  for k = 4, #ARGV do
    if ARGV[k] == KEYS[1] or ARGV[k] == own_channel then return {-6} end
  end
  local mine = owner_entry(owner)
  if mine == false then return {-4, 'o:' .. owner} end
  local hold = nil
  if mine ~= nil then
    for _, h in ipairs(mine.holds) do
      if h[2] == id and h[4] > now then hold = h end
    end
  end
  if hold == nil then return {2} end
  if writes and hold[1] ~= 'w' then return {-5} end
  if old_form then return {1, run_commands(ARGV, 4, #ARGV + 1, false)} end

  -- the conditions: all read before any command runs; the first that fails decides
  local i, failed = 4, 0
  for c = 1, tonumber(conditions) do
    local n = tonumber(ARGV[i])
    if n == nil then return {-8, 'if', c, 'ERR a malformed condition'} end
    local holds, err = condition_holds(ARGV, i + 1, n)
    if err then return {-8, 'if', c, err} end
    if not holds and failed == 0 then failed = c end
    i = i + n + 1
  end
  -- the branches: the then-branch's commands, then the else-branch's to the end
  local then_from = i
  for _ = 1, tonumber(then_count) do
    local n = tonumber(ARGV[i])
    if n == nil then return {-8, 'then', 0, 'ERR a malformed command'} end
    i = i + n + 2
  end
  local from, to, branch = then_from, i, 'then'
  if failed > 0 then from, to, branch = i, #ARGV + 1, 'else' end
  local at, message = first_failure(ARGV, from, to)
  if at then return {-8, branch, at, message} end
  return {1, failed == 0 and 1 or 0, failed, run_commands(ARGV, from, to, true)}
end
