-- Rostrum's Lua prelude: the sandbox scripts run in and the Lua half of the
-- `redis` API. It runs once in a fresh VM; its argument is a table of Rust
-- primitives (`prims`) and it returns the entry points the Rust side uses.
--
-- Scripts never see the real globals table. They run with a read-only proxy
-- environment: reading an unknown global raises "Script attempted to access
-- nonexistent global variable", writing any global (or a field of a library
-- table such as `redis` or `string`) raises "Attempt to modify a readonly
-- table", as Redis 7.0 does.

local prims = ...

local error, type, tostring, select = error, type, tostring, select
local rawget, rawset, rawequal, next = rawget, rawset, rawequal, next
local setmetatable, getmetatable = setmetatable, getmetatable
local pcall, xpcall, loadstring, setfenv = pcall, xpcall, loadstring, setfenv
local string_byte, string_find, string_sub = string.byte, string.find, string.sub

local READONLY = 'Attempt to modify a readonly table'

-- proxy -> the real table behind it.
local protected = setmetatable({}, { __mode = 'k' })

local function readonly_write()
  error(READONLY, 2)
end

-- A read-only proxy of `real`; reads go to `index` (default: `real`).
local function protect(real, index)
  local proxy = setmetatable({}, {
    __index = index or real,
    __newindex = readonly_write,
    __metatable = false,
  })
  protected[proxy] = real
  return proxy
end

local function nonexistent_global(k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 3)
end

-- A read-only proxy of `real` whose reads find names in `real`, or with
-- `lookup(name)` when given; a name not found is an error, as Redis's
-- script globals are. Without `lookup`, the proxy's __index is `real`
-- itself, which gets a metatable raising that error: scripts read every
-- global through the proxy, and a table __index costs no Lua call. (Code
-- here that may look for a missing name in such a `real` uses rawget.)
local function strict(real, lookup)
  local index
  if lookup then
    index = function(_, k)
      local v = lookup(k)
      if v == nil then
        nonexistent_global(k)
      end
      return v
    end
  else
    setmetatable(real, {
      __index = function(_, k)
        nonexistent_global(k)
      end,
      __metatable = false,
    })
    index = real
  end
  return protect(real, index)
end

-- The globals scripts can read.
local G = {}
for _, name in ipairs({
  'assert', 'collectgarbage', 'error', 'gcinfo', 'getmetatable', 'ipairs',
  'select', 'tonumber', 'tostring', 'type', 'unpack', 'xpcall', 'rawequal',
  '_VERSION',
}) do
  G[name] = _G[name]
end
for _, name in ipairs({ 'string', 'math', 'table', 'coroutine' }) do
  G[name] = protect(_G[name])
end
-- Strings' methods come from the read-only `string`, and their metatable
-- is out of reach, so no script can change what the next one sees.
do
  local string_meta = getmetatable('')
  string_meta.__index = G.string
  string_meta.__metatable = false
end
-- Redis's own generator behind math.random (lrand48), as in Redis.
math.random = prims.random
math.randomseed = prims.randomseed
G.bit = protect(prims.bit)
G.struct = protect(prims.struct)
G.cjson = protect(prims.cjson)
G.cmsgpack = protect(prims.cmsgpack)

-- Raw access and iteration see through the proxies.
G.rawget = function(t, k)
  return rawget(protected[t] or t, k)
end
G.rawset = function(t, k, v)
  if protected[t] then
    error(READONLY, 0)
  end
  return rawset(t, k, v)
end
G.next = function(t, k)
  return next(protected[t] or t, k)
end
-- Iterates a proxy through G.next, never handing out the table behind it.
G.pairs = function(t)
  return G.next, t, nil
end
G.setmetatable = function(t, mt)
  if protected[t] then
    error(READONLY, 0)
  end
  return setmetatable(t, mt)
end

-- The script environment: G behind a read-only proxy.
local env = strict(G)
G._G = env

-- Chunks compiled by scripts get the same environment; bytecode is refused.
local function load_text(s, name)
  if type(s) == 'string' and string_byte(s, 1) == 27 then
    return nil, 'binary chunks are not allowed'
  end
  local f, e = loadstring(s, name)
  if f then
    setfenv(f, env)
  end
  return f, e
end
G.loadstring = load_text
G.load = function(reader, name)
  if type(reader) == 'string' then
    return load_text(reader, name)
  end
  local parts = {}
  while true do
    local piece = reader()
    if piece == nil or piece == '' then
      break
    end
    parts[#parts + 1] = piece
  end
  return load_text(table.concat(parts), name)
end

-- An error raised by a Rust primitive arrives as userdata: its message, or
-- the error table of a Redis-style error.
local function error_text(e)
  if type(e) == 'userdata' then
    return prims.error_text(e)
  end
  return e
end

local function push_error(msg)
  return { err = prims.error_line(msg) }
end

-- redis.call and redis.pcall are Rust functions that run a command in the
-- context of the running script's command. The functions that raise
-- Redis-style errors are Rust functions too, so that the error handler
-- finds the caller's line even after a tail call.
local redis = {}
redis.call = prims.call
redis.pcall = prims.pcall
redis.setresp = prims.setresp
redis.sha1hex = prims.sha1hex
redis.log = prims.log
redis.set_repl = prims.set_repl
redis.acl_check_cmd = prims.acl_check_cmd
redis.error_reply = function(...)
  local e = ...
  if select('#', ...) ~= 1 or (type(e) ~= 'string' and type(e) ~= 'number') then
    return push_error('wrong number or type of arguments')
  end
  e = tostring(e)
  if string_sub(e, 1, 1) ~= '-' then
    e = '-' .. e
  end
  return { err = prims.error_line(e) }
end
redis.status_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or (type(s) ~= 'string' and type(s) ~= 'number') then
    return push_error('wrong number or type of arguments')
  end
  return { ok = tostring(s) }
end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.replicate_commands = function()
  return true
end
redis.breakpoint = function()
  return false
end
redis.debug = function() end
redis.REDIS_VERSION = prims.version
redis.REDIS_VERSION_NUM = prims.version_num
G.redis = protect(redis)

-- pcall as in Redis: an error table is reduced to its message, and a killed
-- script stays killed.
G.pcall = function(f, ...)
  local r = { pcall(f, ...) }
  if not r[1] then
    if prims.killed() then
      error(r[2], 0)
    end
    local e = error_text(r[2])
    r[2] = e
    if type(e) == 'table' and type(rawget(e, 'err')) == 'string' then
      r[2] = rawget(e, 'err')
    end
  end
  return unpack(r, 1, table.maxn(r))
end

-- The message handler of a script run: an error table with where it was
-- raised (the first frame of user code).
local function handler(e)
  local source, line = prims.where()
  local from_rust = type(e) == 'userdata'
  e = error_text(e)
  if type(e) ~= 'table' then
    -- A library function's error names its caller's line, as luaL_error.
    if from_rust and source then
      e = string_sub(source, 2) .. ':' .. tostring(line) .. ': ' .. tostring(e)
    end
    e = { err = 'ERR ' .. tostring(e) }
  end
  if source then
    rawset(e, 'source', source)
    rawset(e, 'line', line)
  end
  return e
end
G.__redis__err__handler = handler

-- Functions (FUNCTION LOAD): while a library loads, its code sees only
-- `redis` with register_function and log; afterwards the functions it
-- registered see the same globals as scripts.
local loading = false
local registered = nil

local FLAGS = {
  ['no-writes'] = true, ['allow-oom'] = true, ['allow-stale'] = true,
  ['no-cluster'] = true, ['allow-cross-slot-keys'] = true,
}

local function valid_name(name)
  return name ~= '' and not string_find(name, '[^%w_]')
end

local function register(name, callback, flags, description)
  if not valid_name(name) then
    error(push_error('Library names can only contain letters, numbers, or underscores(_) and must be at least one character long'))
  end
  for _, f in ipairs(registered) do
    if f.name == name then
      error(push_error('Function already exists in the library'))
    end
  end
  registered[#registered + 1] = {
    name = name, callback = callback, flags = flags, description = description,
  }
end

local function register_function(...)
  local n = select('#', ...)
  if n == 1 then
    local t = ...
    if type(t) ~= 'table' then
      error(push_error('calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).'))
    end
    local name, callback, flags, description
    for k, v in next, t do
      if k == 'function_name' then
        if type(v) ~= 'string' and type(v) ~= 'number' then
          error(push_error('function_name argument given to redis.register_function must be a string'))
        end
        name = tostring(v)
      elseif k == 'callback' then
        if type(v) ~= 'function' then
          error(push_error('callback argument given to redis.register_function must be a function'))
        end
        callback = v
      elseif k == 'flags' then
        if type(v) ~= 'table' then
          error(push_error('flags argument to redis.register_function must be a table representing function flags'))
        end
        flags = {}
        for _, flag in ipairs(v) do
          if type(flag) ~= 'string' or not FLAGS[flag] then
            error(push_error('unknown flag given'))
          end
          flags[#flags + 1] = flag
        end
      elseif k == 'description' then
        if type(v) ~= 'string' and type(v) ~= 'number' then
          error(push_error('description argument given to redis.register_function must be a string'))
        end
        description = tostring(v)
      else
        error(push_error('unknown argument given to redis.register_function'))
      end
    end
    if name == nil then
      error(push_error('redis.register_function must get a function name argument'))
    end
    if callback == nil then
      error(push_error('redis.register_function must get a callback argument'))
    end
    register(name, callback, flags or {}, description)
    return
  end
  if n ~= 2 then
    error(push_error('wrong number of arguments to redis.register_function'))
  end
  local name, callback = ...
  if type(name) ~= 'string' and type(name) ~= 'number' then
    error(push_error('first argument to redis.register_function must be a string'))
  end
  if type(callback) ~= 'function' then
    error(push_error('second argument to redis.register_function must be a function'))
  end
  register(tostring(name), callback, {}, nil)
end

-- While a library loads, `redis` has only these fields; others raise the
-- nonexistent-global error, as Redis does.
local load_redis = {
  register_function = register_function,
  log = redis.log,
  LOG_DEBUG = redis.LOG_DEBUG,
  LOG_VERBOSE = redis.LOG_VERBOSE,
  LOG_NOTICE = redis.LOG_NOTICE,
  LOG_WARNING = redis.LOG_WARNING,
  REDIS_VERSION = redis.REDIS_VERSION,
  REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM,
}
local load_redis_proxy = strict(load_redis)
local load_api = { redis = load_redis_proxy }

local function_env = strict(G, function(k)
  if loading then
    return load_api[k]
  end
  return rawget(G, k)
end)

local api = {}
api.env = env
api.function_env = function_env

-- Runs a compiled script (KEYS and ARGV as globals) or a function
-- (keys and args as arguments). Returns true and the first result, or
-- false and an error table.
function api.run(f, keys, args, is_function)
  if is_function then
    G.KEYS, G.ARGV = nil, nil
    return xpcall(function()
      return f(keys, args)
    end, handler)
  end
  G.KEYS, G.ARGV = keys, args
  return xpcall(f, handler)
end

-- Runs a library's code; returns true and the registered functions, or
-- false and an error table.
function api.load_library(chunk)
  registered = {}
  loading = true
  local ok, e = xpcall(chunk, handler)
  loading = false
  local list = registered
  registered = nil
  if not ok then
    return false, e
  end
  return true, list
end

return api
