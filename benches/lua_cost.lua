-- lua_cost.lua: where the library's general path spends its Lua time, outside Redis.
-- Runs the shipped functions (src/lua, assembled in the order of `library_text!` in
-- src/scripts/library.rs, as benches/script_cost.py does) in a plain Lua 5.1, the
-- dialect Redis embeds, against a fake keyspace (hashes in Lua tables; a clock that
-- moves 1 ms per TIME), through the steps of a contended hand-off as
-- benches/script_cost.py sends them: owner-1 holds (the fast path), owner-2 and owner-3
-- queue, owner-1's release (its grant said nobody else was there, as B2's holder's does)
-- hands the lock to owner-2, owner-2 takes it without the clock,
-- owner-2's release (told the queue's head) hands it to owner-3. Prints the time of
-- each step (hot: the same steps on fresh keys, N times) and, per sequence, the calls
-- of the string library and `tonumber` the functions make (C functions, which a Lua
-- count hook does not see). The fake's own calls cost far less than a server's
-- redis.call: compare steps with each other, not with server figures.
--
--   lua5.1 benches/lua_cost.lua [N]        (from the repository's root; apt install lua5.1)

local N = tonumber(arg and arg[1] or '20000')
local root = './'

-- the library's text, as the client loads it (less its first line, the shebang)
local function read(path)
  local f = assert(io.open(root .. path))
  local s = f:read('*a')
  f:close()
  return s
end
local parts = {"local PREFIX = 'rwlock4_'\nlocal GENERAL_ONLY = false\n"}
for file in string.gmatch(read('src/scripts/library.rs'), 'include_str!%("%.%./lua/([%w_]+%.lua)"%)') do
  parts[#parts + 1] = read('src/lua/' .. file)
end

-- the fake server
local store = {}
local clock_us = 1700000000000000
local functions = {}
redis = {}
function redis.register_function(a, b)
  if type(a) == 'table' then functions[a.function_name] = a.callback else functions[a] = b end
end
function redis.error_reply(e) return {err = e} end
function redis.status_reply(s) return {ok = s} end
local function command(cmd, ...)
  local a = {...}
  cmd = string.upper(cmd)
  local h = store[a[1]]
  if cmd == 'HMGET' then
    local out = {}
    for i = 2, #a do out[i - 1] = (h and h[a[i]]) or false end
    return out
  elseif cmd == 'HGET' then
    return (h and h[a[2]]) or false
  elseif cmd == 'HSET' then
    if not h then h = {}; store[a[1]] = h end
    for i = 2, #a, 2 do h[a[i]] = tostring(a[i + 1]) end
    return 1
  elseif cmd == 'HDEL' then
    if h then for i = 2, #a do h[a[i]] = nil end end
    return 1
  elseif cmd == 'HGETALL' then
    local out = {}
    if h then for f, v in pairs(h) do out[#out + 1] = f; out[#out + 1] = v end end
    return out
  elseif cmd == 'TIME' then
    clock_us = clock_us + 1000
    -- (digits by concatenation: below 1e14, exact; the fake's own calls are not counted)
    return {'' .. math.floor(clock_us / 1000000), '' .. clock_us % 1000000}
  elseif cmd == 'EXISTS' then
    return h and 1 or 0
  elseif cmd == 'TYPE' then
    return {ok = h and 'hash' or 'none'}
  elseif cmd == 'PEXPIREAT' or cmd == 'SPUBLISH' or cmd == 'PUBLISH' then
    return 0
  end
  error('the fake server has no ' .. cmd)
end
function redis.call(cmd, ...)
  local r = command(cmd, ...)
  if type(r) == 'table' and r.err then error(r.err) end
  return r
end
function redis.pcall(cmd, ...) return command(cmd, ...) end
assert(loadstring(table.concat(parts, '\n'), 'library'))()

local function fcall(name, key, ...) return functions[name]({key}, {...}) end
local steps = {
  {'owner-1 acquires (fast path)', 'rwlock4_acquire', 'w', 'owner-1', '1', '30000', '1', '1', '1'},
  {'owner-2 queues', 'rwlock4_acquire', 'w', 'owner-2', '2', '30000', '1', '1', '1'},
  {'owner-3 queues', 'rwlock4_acquire', 'w', 'owner-3', '3', '30000', '1', '1', '1'},
  {'owner-1 releases: hands over', 'rwlock4_release', 'owner-1', '1'},
  {'owner-2 takes (no clock)', 'rwlock4_acquire', 'w', 'owner-2', '2', '30000', '3', '2', '1'},
  {'owner-2 releases (told t:1)', 'rwlock4_release', 'owner-2', '2', '1', 't:1'},
}
local function sequence(i, each)
  local key = 'cost:{h' .. i .. '}'
  for j, step in ipairs(steps) do
    local reply = fcall(step[2], key, unpack(step, 3))
    if each then each(j, reply) end
  end
  store[key] = nil
end

-- the replies say the hand-offs happened (as benches/script_cost.py checks)
sequence(0, function(j, r)
  if j == 5 then assert(r[1] == 1 and r[3] == 't:1', 'the take') end
  if j == 6 then assert(r[1] == 1, 'the last release') end
end)

local spent = {}
for j = 1, #steps do spent[j] = 0 end
local t = 0
local timed = function(j)
  local c = os.clock()
  spent[j] = spent[j] + c - t
  t = c
end
for i = 1, N do
  t = os.clock()
  sequence(i, timed)
end
print(string.format('| step (Lua 5.1, outside Redis, %d times) | µs per call |', N))
print('|---|---|')
for j, step in ipairs(steps) do
  print(string.format('| %s | %.1f |', step[1], spent[j] / N * 1e6))
end

-- the C functions the steps call, per sequence
local calls = {}
local wrapped = {}
for _, name in ipairs({'match', 'format', 'gmatch', 'find', 'sub', 'gsub'}) do
  wrapped[name] = string[name]
  string[name] = function(...)
    calls['string.' .. name] = (calls['string.' .. name] or 0) + 1
    return wrapped[name](...)
  end
end
local tn = tonumber
tonumber = function(...) calls.tonumber = (calls.tonumber or 0) + 1; return tn(...) end
local M = 100
for i = 1, M do sequence(N + i) end
for name, f in pairs(wrapped) do string[name] = f end
tonumber = tn
local names = {}
for name in pairs(calls) do names[#names + 1] = name end
table.sort(names, function(a, b) return calls[a] > calls[b] end)
print('\n| C function | calls per sequence |\n|---|---|')
for _, name in ipairs(names) do print(string.format('| %s | %.0f |', name, calls[name] / M)) end
