-- guarded.lua: commands on keys of the lock's slot, run only while the caller's hold is
-- on the server and its deadline, by the server's clock, has not passed; with
-- conditions, checked first, that choose which of two lists of commands runs (as etcd's
-- Txn If/Then/Else). The check, the conditions and the commands are one function call on
-- one node: nothing else runs between them, and a hold that is gone (its lease ran out,
-- broken by force_release, released, or lost in a failover) runs nothing. Reads the
-- caller's entry only (O(1) in the lock's entries), and writes nothing of the lock.
--
-- All or nothing: when any command of the branch chosen fails, no key the call names
-- is left changed (its value and its expiry), and the reply says which command failed.
-- Most failures are found before the first command runs: each command is checked
-- against the keys as they are and as the commands before it leave them, where that can
-- be told: the type of its key (what would be WRONGTYPE), and for INCR/DECR/HINCRBY and
-- their kin the value they add to (what would be "not an integer"). What cannot be told
-- passes, so that no call that would succeed is refused. For the rest (an overflow, a
-- bad option, a value written earlier in the call), the keys a command writes are read
-- (DUMP, PEXPIRETIME) before it runs, once per key and call and never for the branch's
-- last command, and put back (RESTORE, DEL) when a later command fails. Whether the call
-- writes is decided here, by each command's name and check: the writes flag can only
-- ask for more.
--
-- KEYS[1]    lock hash (see lib)
-- KEYS[2..]  the keys the conditions and commands name, declared so that the cluster
--            checks their slot
-- ARGV[1]    owner token
-- ARGV[2]    hold id
-- ARGV[3]    '<writes> <conditions> <then>': writes '1' when a command of either branch
--            writes (the hold must be a write hold), '0' when all read (a command that
--            writes by its name or its check needs a write hold all the same); how many
--            conditions follow; how many commands the then-branch has (the rest of the
--            commands are the else-branch).
--            Revision 1 and 2 clients send '1' or '0' alone: then ARGV[4..] are
--            commands '<n> <word>...', all run, and a failed one does not stop the next
--            (nothing is undone).
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
--            changed: it reads, '=' that type (any: the type it found), '0' no key, 's' a
--            string, '?' cannot be told: a command that is not '.' writes), the
--            value it adds to ('i' an integer, 'f' a number, '-' none: for 'h', the
--            field its third word names), and which words are keys ('1' the first
--            argument, 'a' every argument: DEL, MGET, ...). Another check is malformed.
-- Returns
--   {1, held, failed, {{0, reply} or {1, error}, ...}}  held 1 when every condition
--        held (the then-branch ran), 0 when not (the else-branch ran); failed, the
--        first condition that did not hold (from 1; 0 when all held); each command's
--        reply, in order. The last is an error only when a command failed and putting
--        back what the commands before it wrote failed too (a user refused RESTORE or
--        DEL): those writes stay, and the error says so
--   {2}    the hold is not there, or its deadline has passed: nothing ran
--   {-5}   a command writes and the hold is not a write hold: nothing ran
--   {-6}   a declared key or a word is the lock's own hash or channel: nothing ran (the
--          client refuses every lock's keys before sending; this is the second line,
--          for a client that did not)
--   {-8, where, index, message, undone}  a condition ('if') or a command ('then'/'else',
--          by its place in its branch, from 1) failed, and nothing the call did stays
--          written: undone 0 when it was found before any command ran (a condition's
--          refusal has no undone), 1 when the commands before it ran and every key they
--          wrote was put back
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

-- The commands that only read, by name: any other command writes (it needs a write
-- hold, and its keys are kept to be put back), whatever the writes flag and its check
-- say, so that a client that sends them wrong cannot write under a read hold.
local READS = {
  GET = true, MGET = true, STRLEN = true, GETRANGE = true, EXISTS = true, TYPE = true,
  TTL = true, PTTL = true, HGET = true, HMGET = true, HGETALL = true, HEXISTS = true,
  HLEN = true, HKEYS = true, HVALS = true, LRANGE = true, LLEN = true, LINDEX = true,
  SMEMBERS = true, SISMEMBER = true, SCARD = true, ZSCORE = true, ZRANK = true,
  ZRANGE = true, ZCARD = true,
}

-- Whether any of the words ARGV[from .. to] is `word` (in any case).
local function has_word(ARGV, from, to, word)
  for k = from, to do
    if ARGV[k] ~= nil and string.upper(ARGV[k]) == word then return true end
  end
  return false
end

-- The commands of a branch, from ARGV[i] (each '<n> <check> <word>...'): `count` of
-- them, or (count nil) up to the end of ARGV. Each as {at = the place of its name, n,
-- want, leaves, adds, keys = {...}, writes}; then where the next word is. Or nil, the
-- place of the first malformed command and a message. A check is corrected where the
-- command's words say more than its name: SET with NX or XX, and ZADD with XX, may
-- leave the key as it was ('?'); SET with GET needs a string.
local function parse_commands(ARGV, i, count)
  local list = {}
  while (count and #list < count) or (not count and i <= #ARGV) do
    local index = #list + 1
    local n, check = tonumber(ARGV[i]), ARGV[i + 1]
    if n == nil or n < 1 or check == nil or ARGV[i + n + 1] == nil
        or not string.match(check, '^[shlSz*][.=0s?][if-][1a]$') then
      return nil, index, 'ERR a malformed command'
    end
    local name = string.upper(ARGV[i + 2])
    local want, leaves, adds = string.sub(check, 1, 1), string.sub(check, 2, 2), string.sub(check, 3, 3)
    local last_word = i + n + 1
    if name == 'SET' then
      if has_word(ARGV, i + 5, last_word, 'NX') or has_word(ARGV, i + 5, last_word, 'XX') then leaves = '?' end
      if want == '*' and has_word(ARGV, i + 5, last_word, 'GET') then want = 's' end
    elseif name == 'ZADD' and has_word(ARGV, i + 4, last_word, 'XX') then
      leaves = '?'
    end
    local keys = {}
    if string.sub(check, 4, 4) == 'a' then
      for k = i + 3, last_word do keys[#keys + 1] = ARGV[k] end
    elseif n >= 2 then
      keys[1] = ARGV[i + 3]
    end
    list[index] = {at = i + 2, n = n, want = want, leaves = leaves, adds = adds, keys = keys,
                   writes = leaves ~= '.' or not READS[name]}
    i = i + n + 2
  end
  return list, i
end

-- Checks the commands `cmds` against the keys as they are and as the commands before
-- each leave them (see the header): nil, or the place of the first that would fail and
-- the message it would get. What cannot be told passes (the command itself will tell,
-- and the call is undone): a check never refuses a command that would succeed.
local function first_failure(ARGV, cmds)
  -- per key: the type it has before the command looked at ('none' when absent, '?' when
  -- it cannot be told), and whether a command of this call changed its value
  local types, touched = {}, {}
  for index, cmd in ipairs(cmds) do
    local want, leaves, adds = cmd.want, cmd.leaves, cmd.adds
    for _, key in ipairs(cmd.keys) do
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
          if want == 'h' then v = redis.pcall('HGET', key, ARGV[cmd.at + 2]) else v = redis.pcall('GET', key) end
          if type(v) ~= 'string' then v = nil end
          if v and adds == 'i' and not is_integer(v) then
            return index, 'ERR ' .. (want == 'h' and 'hash value' or 'value') .. ' is not an integer or out of range'
          end
          if v and adds == 'f' and tonumber(v) == nil then
            return index, 'ERR ' .. (want == 'h' and 'hash value' or 'value') .. ' is not a valid float'
          end
        end
      end
      if cmd.writes then
        touched[key] = true
        if leaves == '=' then
          -- (PERSIST, on any type, leaves the type it found)
          if want ~= '*' then types[key] = TYPE_OF[want] end
        elseif leaves == '0' then types[key] = 'none'
        elseif leaves == 's' then types[key] = 'string'
        elseif leaves == '?' then types[key] = '?' end
      end
    end
  end
  return nil
end

-- Puts back the first `upto` keys of `order`, each as `saved` has it: the value DUMP
-- read, with the expiry it had (absolute, and time stands still in a function call, so
-- exactly), or deleted when it did not exist. nil, or the first error.
local function put_back(saved, order, upto)
  local err = nil
  for k = 1, upto do
    local key = order[k]
    local dump, at = saved[key][1], saved[key][2]
    local r
    if not dump then
      r = redis.pcall('DEL', key)
    elseif at > 0 then
      r = redis.pcall('RESTORE', key, at, dump, 'REPLACE', 'ABSTTL')
    else
      r = redis.pcall('RESTORE', key, 0, dump, 'REPLACE')
    end
    if type(r) == 'table' and r['err'] ~= nil and err == nil then err = r['err'] end
  end
  return err
end

-- Runs the commands `cmds` of `branch`, all or nothing. Before a command that writes
-- runs, each key it names that no command before it wrote is read (DUMP, and PEXPIRETIME
-- when it exists), but for the branch's last command: one that fails writes nothing, so
-- after the last nothing is left to undo. When a command fails, the keys the commands
-- before it wrote are put back. Returns the replies; or nil and the refusal to return,
-- {-8, branch, index, message, undone} (undone 1: the commands before it ran and what
-- they wrote was put back; 0: none ran before it). When putting back fails (a user
-- refused RESTORE or DEL), the replies with the error last, saying so, as revisions 3
-- to 7 replied for a command that failed: what ran before it stays.
local function run_all_or_nothing(ARGV, cmds, branch)
  local saved, order, replies = {}, {}, {}
  for index, cmd in ipairs(cmds) do
    local kept = #order
    local failure = nil
    if cmd.writes and index < #cmds then
      for _, key in ipairs(cmd.keys) do
        if saved[key] == nil and failure == nil then
          local dump = redis.pcall('DUMP', key)
          local at = -2
          if type(dump) == 'table' then
            failure = dump['err'] or 'ERR DUMP gave no value'
            dump = false
          elseif dump then
            at = redis.pcall('PEXPIRETIME', key)
            if type(at) ~= 'number' then
              failure = type(at) == 'table' and at['err'] or 'ERR PEXPIRETIME gave no time'
            end
          end
          if failure == nil then
            saved[key] = {dump, at}
            order[#order + 1] = key
          end
        end
      end
    end
    local r
    if failure == nil then
      local words = {}
      for j = 1, cmd.n do words[j] = ARGV[cmd.at + j - 1] end
      r = redis.pcall(unpack(words))
      if type(r) == 'table' and r['err'] ~= nil then failure = r['err'] end
    end
    if failure ~= nil then
      local err = put_back(saved, order, kept)
      if err == nil then return nil, {-8, branch, index, failure, index > 1 and 1 or 0} end
      replies[#replies + 1] = {1, failure .. ' (putting back what the commands before it wrote failed: '
        .. err .. '; it stays written)'}
      return replies
    end
    replies[#replies + 1] = {0, r}
  end
  return replies
end

-- Runs the commands at ARGV[from .. to - 1], each '<n> <word>...' (the old form of
-- revision 1 and 2 clients, where a failed command does not stop the next): their
-- replies, in order.
local function run_old_form(ARGV, from, to)
  local replies, i = {}, from
  while i < to do
    local n = tonumber(ARGV[i])
    local words = {}
    for j = 1, n do words[j] = ARGV[i + j] end
    local r = redis.pcall(unpack(words))
    if type(r) == 'table' and r['err'] ~= nil then
      replies[#replies + 1] = {1, r['err']}
    else
      replies[#replies + 1] = {0, r}
    end
    i = i + n + 1
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
  if old_form then
    -- (whether a command writes is told by its name, whatever the flag says)
    local i = 4
    while i <= #ARGV do
      local n = tonumber(ARGV[i])
      if n == nil or n < 1 or ARGV[i + 1] == nil then return {-8, 'then', 0, 'ERR a malformed command'} end
      if not READS[string.upper(ARGV[i + 1])] then writes = true end
      i = i + n + 1
    end
    if writes and hold[1] ~= 'w' then return {-5} end
    return {1, run_old_form(ARGV, 4, #ARGV + 1)}
  end

  -- where the conditions end, then both branches' commands: the call writes when one
  -- of them does (by its name or its check), whatever the flag says
  local i = 4
  for c = 1, tonumber(conditions) do
    local n = tonumber(ARGV[i])
    if n == nil then return {-8, 'if', c, 'ERR a malformed condition'} end
    i = i + n + 1
  end
  local then_cmds, at, message = parse_commands(ARGV, i, tonumber(then_count))
  if then_cmds == nil then return {-8, 'then', at, message} end
  local else_cmds
  else_cmds, at, message = parse_commands(ARGV, at, nil)
  if else_cmds == nil then return {-8, 'else', at, message} end
  for _, cmd in ipairs(then_cmds) do writes = writes or cmd.writes end
  for _, cmd in ipairs(else_cmds) do writes = writes or cmd.writes end
  if writes and hold[1] ~= 'w' then return {-5} end

  -- the conditions: all read before any command runs; the first that fails decides
  local failed = 0
  i = 4
  for c = 1, tonumber(conditions) do
    local n = tonumber(ARGV[i])
    local holds, err = condition_holds(ARGV, i + 1, n)
    if err then return {-8, 'if', c, err} end
    if not holds and failed == 0 then failed = c end
    i = i + n + 1
  end
  local cmds, branch = then_cmds, 'then'
  if failed > 0 then cmds, branch = else_cmds, 'else' end
  at, message = first_failure(ARGV, cmds)
  if at then return {-8, branch, at, message, 0} end
  local replies, refused = run_all_or_nothing(ARGV, cmds, branch)
  if refused then return refused end
  return {1, failed == 0 and 1 or 0, failed, replies}
end
