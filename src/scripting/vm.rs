//! The Lua VM: the sandbox (`prelude.lua`), the EVAL script cache, the
//! function libraries, and running a script or function inside a command's
//! context.
//!
//! `redis.call` and `redis.pcall` are Rust functions, created once with the
//! VM: each runs the command through the [`ScriptHost`] of the command
//! running the script (the dispatcher, with every shard already locked),
//! which the run lends them through a [`CallSlot`], captures the reply in a
//! scratch writer, and decodes it for Lua ([`convert`]). The script body runs under
//! a Lua-side `xpcall`, whose handler records where the error was raised,
//! so every error line ends in ` script: <name>, on @user_script:<line>.`
//! as in Redis.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, Ordering};
use std::sync::Arc;

use mlua::chunk::ChunkMode;
use mlua::{
    Either, Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, Variadic,
};
use smallvec::SmallVec;

use super::convert::{c_double, lua_to_reply, reply_to_lua, Decoded};
use super::library::{self, Shebang};
use super::{libs, sha1_hex, IsCommand, Running};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;

/// What a running script needs from the command that runs it (EVAL, FCALL,
/// ...): the dispatcher behind `redis.call`, and the calling client's state
/// around the run. The command layer implements it, so the VM knows
/// neither the command table nor the server.
pub trait ScriptHost {
    /// Runs one command for `redis.call` / `redis.pcall`, its reply written
    /// to `out`. A command a script may not run is refused, before it runs,
    /// with its error line: unknown, wrong arity, not allowed from scripts,
    /// or a write when `deny_writes`. `wrote` is raised before a write runs.
    fn call(
        &mut self,
        args: &[&[u8]],
        out: &mut Reply,
        deny_writes: bool,
        wrote: &AtomicBool,
    ) -> Result<(), &'static [u8]>;

    /// Where the script's own reply goes.
    fn out(&mut self) -> &mut Reply;

    /// Counts an error reply the script itself makes (an `{err=...}` table
    /// it returns) in the error statistics.
    fn count_error(&mut self, line: &[u8]);

    /// Before the script runs: blocking commands must answer at once, and
    /// SELECT inside the script must not outlive it. Returns what
    /// [`ScriptHost::leave`] restores.
    fn enter(&mut self) -> Entered;

    /// After the script: the client's database and blocking rule as they
    /// were.
    fn leave(&mut self, saved: Entered);
}

/// The client state a script run saves and restores ([`ScriptHost`]).
#[derive(Debug, Clone, Copy)]
pub struct Entered {
    /// The selected database.
    pub db: usize,
    /// Whether blocking was denied before.
    pub deny_blocking: bool,
}

const PRELUDE: &str = include_str!("prelude.lua");
const PRELUDE_NAME: &str = "=rostrum_prelude";
/// The Redis version scripts see (`redis.REDIS_VERSION`).
pub const REDIS_VERSION: &str = "7.0.15";
const REDIS_VERSION_NUM: i64 = 0x07_00_0f;
/// The field of an `{err=...}` table made from a command's error reply
/// (redis.call, redis.pcall): that error was counted in the error
/// statistics already, so a script returning or raising it is not counted
/// again (Redis's own name for the field, visible to scripts as there).
const COUNTED: &str = "ignore_err_stats_update";
/// Instructions between two checks for SCRIPT KILL.
const HOOK_EVERY: u32 = 10_000;
const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

/// A cached EVAL script.
struct Script {
    func: Function,
    shebang: Shebang,
}

/// A function registered by a library.
#[derive(Clone)]
pub struct FunctionDef {
    /// Its name (FCALL's first argument).
    pub name: String,
    /// Its description, if the library gave one.
    pub description: Option<String>,
    /// Its flags (`no-writes`, ...).
    pub flags: Vec<String>,
    callback: Function,
}

impl FunctionDef {
    fn no_writes(&self) -> bool {
        self.flags.iter().any(|f| f == "no-writes")
    }
}

/// A library loaded with FUNCTION LOAD.
#[derive(Clone)]
pub struct Library {
    /// Its name (from the `#!lua name=` header).
    pub name: String,
    /// Its whole text, header included.
    pub code: Vec<u8>,
    /// Its functions, by name.
    pub functions: Vec<FunctionDef>,
}

/// How FUNCTION RESTORE treats libraries that exist already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestorePolicy {
    /// Delete every library first.
    Flush,
    /// Fail on a name collision.
    Append,
    /// Replace libraries of the same name.
    Replace,
}

/// The VM with its scripts and libraries.
pub struct Vm {
    lua: Lua,
    /// Where a run lends its context to redis.call and redis.pcall.
    slot: Arc<CallSlot>,
    /// Buffers redis.call reuses.
    scratch: Scratch,
    /// The RESP version redis.call asks for (redis.setresp), 2 at each run.
    resp: Arc<AtomicU8>,
    env: Table,
    function_env: Table,
    run_fn: Function,
    load_fn: Function,
    running: Arc<Running>,
    scripts: HashMap<String, Script, ahash::RandomState>,
    /// Bytes of the cached scripts' bodies and SHA1 names.
    scripts_bytes: u64,
    /// `lua-maxmemory` as last set (0: no limit).
    memory_limit: u64,
    libraries: BTreeMap<String, Library>,
    /// Function name -> the library that registered it.
    functions: HashMap<String, String>,
}

fn lua_err(e: mlua::Error) -> CmdError {
    CmdError::err(format!("Error running script: {e}"))
}

/// An error line as Redis's `luaPushError` normalizes it: `-CODE msg`
/// keeps its code, anything else gets `ERR`; the line is trimmed of CR/LF.
pub fn error_line(raw: &[u8]) -> Vec<u8> {
    let (code, msg): (&[u8], &[u8]) = match raw.strip_prefix(b"-") {
        Some(rest) => match rest.iter().position(|&b| b == b' ') {
            Some(sp) => (&rest[..sp], &rest[sp + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", raw),
    };
    let is_nl = |b: &u8| *b == b'\r' || *b == b'\n';
    let start = msg.iter().position(|b| !is_nl(b)).unwrap_or(msg.len());
    let end = msg.iter().rposition(|b| !is_nl(b)).map_or(start, |e| e + 1);
    let mut out = code.to_vec();
    out.push(b' ');
    out.extend_from_slice(msg.get(start..end).unwrap_or(b""));
    out
}

/// Where the error being handled was raised: the innermost frame of user
/// code (C functions and the prelude are skipped).
fn error_position(lua: &Lua) -> (Option<String>, Option<usize>) {
    for level in 1.. {
        let frame = lua.inspect_stack(level, |d| {
            let s = d.source();
            (s.what, s.source.map(|x| x.into_owned()), d.current_line())
        });
        match frame {
            None => break,
            Some((what, source, line)) => {
                if what == "C" || source.as_deref() == Some(PRELUDE_NAME) {
                    continue;
                }
                return (source, line);
            }
        }
    }
    (None, None)
}

fn log_line(level: i64, msg: &str) {
    match level {
        0 => tracing::debug!(target: "lua", "{msg}"),
        1 => tracing::debug!(target: "lua", "{msg}"),
        2 => tracing::info!(target: "lua", "{msg}"),
        _ => tracing::warn!(target: "lua", "{msg}"),
    }
}

impl Vm {
    /// A fresh VM with the sandbox and the bundled libraries.
    /// `is_command` answers `redis.acl_check_cmd`.
    pub fn new(running: Arc<Running>, is_command: IsCommand) -> Result<Vm, CmdError> {
        Self::build(running, is_command)
            .map_err(|e| CmdError::err(format!("Can't create the Lua VM: {e}")))
    }

    fn build(running: Arc<Running>, is_command: IsCommand) -> mlua::Result<Vm> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        let prims = lua.create_table()?;
        let resp = Arc::new(AtomicU8::new(2));
        let rs = resp.clone();
        prims.raw_set(
            "setresp",
            lua.create_function(move |_, argv: Variadic<Value>| {
                if argv.len() != 1 {
                    return Err(raise("redis.setresp() requires one argument."));
                }
                let v = match argv.first() {
                    Some(Value::Integer(2)) => 2,
                    Some(Value::Integer(3)) => 3,
                    Some(Value::Number(n)) if *n == 2.0 || *n == 3.0 => *n as i64,
                    _ => return Err(raise("RESP version must be 2 or 3.")),
                };
                rs.store(v as u8, Ordering::Relaxed);
                Ok(())
            })?,
        )?;
        prims.raw_set(
            "sha1hex",
            lua.create_function(|lua, argv: Variadic<Value>| {
                if argv.len() != 1 {
                    return Err(raise("wrong number of arguments"));
                }
                let bytes = argv.first().map(lua_bytes).unwrap_or_default();
                lua.create_string(sha1_hex(&bytes))
            })?,
        )?;
        prims.raw_set(
            "log",
            lua.create_function(move |_, argv: Variadic<Value>| {
                if argv.len() < 2 {
                    return Err(raise("redis.log() requires two arguments or more."));
                }
                let level = match argv.first() {
                    Some(Value::Integer(i)) => *i as f64,
                    Some(Value::Number(n)) => *n,
                    _ => return Err(raise("First argument must be a number (log level).")),
                };
                if !(0.0..=3.0).contains(&level) {
                    return Err(raise("Invalid debug level."));
                }
                let parts: Vec<String> = argv
                    .iter()
                    .skip(1)
                    .map(|v| String::from_utf8_lossy(&lua_bytes(v)).into_owned())
                    .collect();
                log_line(level as i64, &parts.join(" "));
                Ok(())
            })?,
        )?;
        prims.raw_set(
            "set_repl",
            lua.create_function(|_, argv: Variadic<Value>| {
                if argv.len() != 1 {
                    return Err(raise("redis.set_repl() requires one argument."));
                }
                let ok = match argv.first() {
                    Some(Value::Integer(i)) => (0..=3).contains(i),
                    Some(Value::Number(n)) => (0.0..=3.0).contains(n),
                    _ => false,
                };
                if !ok {
                    return Err(raise(
                        "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                    ));
                }
                Ok(())
            })?,
        )?;
        prims.raw_set(
            "error_line",
            lua.create_function(|lua, msg: mlua::LuaString| {
                lua.create_string(error_line(&msg.as_bytes()))
            })?,
        )?;
        prims.raw_set(
            "where",
            lua.create_function(|lua, ()| Ok(error_position(lua)))?,
        )?;
        let r = running.clone();
        prims.raw_set("killed", lua.create_function(move |_, ()| Ok(r.killed()))?)?;
        prims.raw_set(
            "acl_check_cmd",
            lua.create_function(move |_, argv: Variadic<Value>| {
                if argv.is_empty() {
                    return Err(raise(
                        "Please specify at least one argument for this redis lib call",
                    ));
                }
                let args: Vec<Vec<u8>> = argv.iter().map(lua_bytes).collect();
                let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
                if is_command(&refs) {
                    Ok(true)
                } else {
                    Err(raise("Invalid command passed to redis.acl_check_cmd()"))
                }
            })?,
        )?;
        prims.raw_set(
            "error_text",
            lua.create_function(|lua, v: Value| match v {
                Value::Error(e) => match script_error_line(&e) {
                    Some((line, counted)) => {
                        let t = lua.create_table()?;
                        t.raw_set("err", lua.create_string(line)?)?;
                        if counted {
                            t.raw_set(COUNTED, true)?;
                        }
                        Ok(Value::Table(t))
                    }
                    None => Ok(Value::String(lua.create_string(rust_error_text(&e))?)),
                },
                other => Ok(other),
            })?,
        )?;
        let rng = Arc::new(parking_lot::Mutex::new(Lrand48::new()));
        let r = rng.clone();
        prims.raw_set(
            "random",
            lua.create_function(move |_, argv: Variadic<Value>| r.lock().math_random(&argv))?,
        )?;
        prims.raw_set(
            "randomseed",
            lua.create_function(move |_, seed: f64| {
                rng.lock().seed(seed as i64 as i32);
                Ok(())
            })?,
        )?;
        prims.raw_set("version", REDIS_VERSION)?;
        prims.raw_set("version_num", REDIS_VERSION_NUM)?;
        prims.raw_set("bit", libs::bit::create(&lua)?)?;
        prims.raw_set("struct", libs::structlib::create(&lua)?)?;
        prims.raw_set("cjson", libs::cjson::create(&lua)?)?;
        prims.raw_set("cmsgpack", libs::cmsgpack::create(&lua)?)?;

        let slot = Arc::new(CallSlot::default());
        for (name, raise_errors) in [("call", true), ("pcall", false)] {
            let (slot, running, resp) = (slot.clone(), running.clone(), resp.clone());
            prims.raw_set(
                name,
                lua.create_function(move |lua, argv: MultiValue| {
                    let call = Call {
                        resp: resp.load(Ordering::Relaxed),
                        raise_errors,
                    };
                    slot.with(|env| call_command(lua, env, &running, call, argv))
                        .unwrap_or_else(|| {
                            Err(raise("redis.call is only available while a script runs"))
                        })
                })?,
            )?;
        }
        let api: Table = lua
            .load(PRELUDE)
            .set_name(PRELUDE_NAME)
            .set_mode(ChunkMode::Text)
            .call(prims.clone())?;
        let hook_running = running.clone();
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            move |_, _| {
                hook_running.offer_core_if_long();
                if hook_running.must_abort() {
                    Err(mlua::Error::RuntimeError(KILLED.into()))
                } else {
                    Ok(mlua::VmState::Continue)
                }
            },
        )?;
        Ok(Vm {
            slot,
            scratch: Scratch::default(),
            resp,
            env: api.raw_get("env")?,
            function_env: api.raw_get("function_env")?,
            run_fn: api.raw_get("run")?,
            load_fn: api.raw_get("load_library")?,
            lua,
            running,
            scripts: HashMap::default(),
            scripts_bytes: 0,
            memory_limit: 0,
            libraries: BTreeMap::new(),
            functions: HashMap::new(),
        })
    }

    /// Sets the most memory the Lua heap may hold (`lua-maxmemory`; 0: no
    /// limit). An allocation past it fails with Lua's memory error, which
    /// the script gets as an error (see [`Vm::run`]).
    pub fn set_memory_limit(&mut self, bytes: u64) {
        let _ = self.lua.set_memory_limit(bytes as usize);
        self.memory_limit = bytes;
    }

    /// Publishes the VM's memory figures for INFO.
    fn update_memory_figures(&self) {
        let m = &self.running.memory;
        m.vm_bytes
            .store(self.lua.used_memory() as u64, Ordering::Relaxed);
        m.scripts
            .store(self.scripts.len() as u64, Ordering::Relaxed);
        m.scripts_bytes.store(self.scripts_bytes, Ordering::Relaxed);
        let functions: usize = self
            .libraries
            .values()
            .map(|l| l.code.len() + l.functions.iter().map(|f| f.name.len()).sum::<usize>())
            .sum();
        m.functions_bytes.store(functions as u64, Ordering::Relaxed);
    }

    /// After a script or load that ran out of memory: collects what it
    /// left and gives the freed pages back to the system.
    fn recover_from_memory_error(&self) {
        // Until the heap stops shrinking: finalizers run in one cycle free
        // more in the next, and Lua 5.1 halves its concatenation buffer
        // (grown to the size of the failed concatenation) once per cycle.
        let mut used = self.lua.used_memory();
        for _ in 0..64 {
            let _ = self.lua.gc_collect();
            let now = self.lua.used_memory();
            if now >= used {
                break;
            }
            used = now;
        }
        super::return_free_memory();
    }

    /// The error a script that passed `lua-maxmemory` gets.
    fn memory_error(&self) -> CmdError {
        CmdError::err(format!(
            "Lua script ran out of memory: it passed lua-maxmemory ({} bytes); what it allocated was freed",
            self.memory_limit
        ))
    }

    // ---- EVAL scripts ----

    /// Compiles `body` into the cache (SCRIPT LOAD, EVAL); returns its SHA1.
    pub fn load_script(&mut self, body: &[u8]) -> Result<String, CmdError> {
        let sha = sha1_hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let shebang = library::parse_shebang(body)?;
        let code = body.get(shebang.code_at..).unwrap_or(b"");
        let func = self
            .lua
            .load(code)
            .set_name("@user_script")
            .set_mode(ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function();
        let func = match func {
            Ok(f) => f,
            Err(mlua::Error::MemoryError(_)) => {
                self.recover_from_memory_error();
                self.update_memory_figures();
                return Err(self.memory_error());
            }
            Err(e) => {
                return Err(CmdError::err(format!(
                    "Error compiling script (new function): {}",
                    syntax_message(&e)
                )))
            }
        };
        self.scripts_bytes += (body.len() + sha.len()) as u64;
        self.scripts.insert(sha.clone(), Script { func, shebang });
        self.update_memory_figures();
        Ok(sha)
    }

    /// Whether a script is cached (SCRIPT EXISTS).
    pub fn script_exists(&self, sha: &str) -> bool {
        self.scripts.contains_key(sha)
    }

    /// Forgets every cached script (SCRIPT FLUSH).
    pub fn flush_scripts(&mut self) {
        self.scripts.clear();
        self.scripts_bytes = 0;
        self.lua.gc_collect().ok();
        self.update_memory_figures();
    }

    /// Runs the cached script `sha` (EVAL, EVALSHA and their _RO forms).
    pub fn eval(
        &mut self,
        host: &mut dyn ScriptHost,
        sha: &str,
        keys: &[&[u8]],
        args: &[&[u8]],
        read_only: bool,
    ) -> CmdResult {
        let Some(script) = self.scripts.get(sha) else {
            return Err(CmdError::line(
                "NOSCRIPT No matching script. Please use EVAL.",
            ));
        };
        if read_only && script.shebang.present && !script.shebang.no_writes {
            return Err(CmdError::err(
                "Can not execute a script with write flag using *_ro command.",
            ));
        }
        let func = script.func.clone();
        let run = RunKind {
            eval: true,
            name: Cow::Borrowed(sha),
            deny_writes: read_only || script.shebang.no_writes,
        };
        self.run(host, &func, keys, args, &run)
    }

    // ---- Functions ----

    /// Loads a library (FUNCTION LOAD); returns its name.
    pub fn function_load(&mut self, code: &[u8], replace: bool) -> Result<String, CmdError> {
        let header = library::parse_header(code)?;
        if !replace && self.libraries.contains_key(&header.name) {
            return Err(CmdError::err(format!(
                "Library '{}' already exists",
                header.name
            )));
        }
        let body = code.get(header.code_at..).unwrap_or(b"");
        let chunk = self
            .lua
            .load(body)
            .set_name("@user_function")
            .set_mode(ChunkMode::Text)
            .set_environment(self.function_env.clone())
            .into_function()
            .map_err(|e| {
                CmdError::err(format!("Error compiling function: {}", syntax_message(&e)))
            })?;
        self.running.start(false, true);
        let result: mlua::Result<(bool, Value)> = self.load_fn.call(chunk);
        let timed_out = self.running.must_abort();
        self.running.stop();
        let out_of_memory = match &result {
            Err(mlua::Error::MemoryError(_)) => true,
            Ok((false, v)) => is_memory_error(v),
            _ => false,
        };
        if out_of_memory {
            self.recover_from_memory_error();
            self.update_memory_figures();
            return Err(self.memory_error());
        }
        let (ok, value) = result.map_err(lua_err)?;
        let list = match value {
            Value::Table(t) if ok => t,
            other => {
                let msg = if timed_out {
                    "ERR FUNCTION LOAD timeout".to_string()
                } else {
                    error_message(&other)
                };
                return Err(CmdError::err(format!("Error registering functions: {msg}")));
            }
        };
        let mut functions = Vec::new();
        for entry in list.sequence_values::<Table>() {
            let entry = entry.map_err(lua_err)?;
            let flags: Vec<String> = match entry.raw_get::<Value>("flags") {
                Ok(Value::Table(t)) => t
                    .sequence_values::<String>()
                    .filter_map(|f| f.ok())
                    .collect(),
                _ => Vec::new(),
            };
            functions.push(FunctionDef {
                name: entry.raw_get("name").map_err(lua_err)?,
                description: entry.raw_get("description").map_err(lua_err)?,
                flags,
                callback: entry.raw_get("callback").map_err(lua_err)?,
            });
        }
        if functions.is_empty() {
            return Err(CmdError::err("No functions registered"));
        }
        // Listed by name (Redis lists them in its hash table's order).
        functions.sort_by(|a, b| a.name.cmp(&b.name));
        for f in &functions {
            if let Some(owner) = self.functions.get(&f.name) {
                if *owner != header.name {
                    return Err(CmdError::err(format!("Function {} already exists", f.name)));
                }
            }
        }
        self.delete_library(&header.name);
        for f in &functions {
            self.functions.insert(f.name.clone(), header.name.clone());
        }
        self.libraries.insert(
            header.name.clone(),
            Library {
                name: header.name.clone(),
                code: code.to_vec(),
                functions,
            },
        );
        self.update_counts();
        Ok(header.name)
    }

    /// Removes a library and its functions; returns whether it existed.
    pub fn delete_library(&mut self, name: &str) -> bool {
        let found = match self.libraries.remove(name) {
            Some(lib) => {
                for f in &lib.functions {
                    self.functions.remove(&f.name);
                }
                true
            }
            None => false,
        };
        self.update_counts();
        found
    }

    fn update_counts(&self) {
        *self.running.counts.lock() = (self.libraries.len(), self.functions.len());
        self.update_memory_figures();
    }

    /// Removes every library (FUNCTION FLUSH).
    pub fn flush_functions(&mut self) {
        self.libraries.clear();
        self.functions.clear();
        self.update_counts();
        self.lua.gc_collect().ok();
    }

    /// The libraries, by name.
    pub fn libraries(&self) -> impl Iterator<Item = &Library> {
        self.libraries.values()
    }

    /// The number of functions (FUNCTION STATS).
    pub fn function_count(&self) -> usize {
        self.functions.len()
    }

    /// Every library's code (FUNCTION DUMP, the AOF rewrite).
    pub fn library_codes(&self) -> Vec<Vec<u8>> {
        self.libraries.values().map(|l| l.code.clone()).collect()
    }

    /// FUNCTION RESTORE: loads every library of a payload, all or nothing.
    pub fn restore(&mut self, codes: &[Vec<u8>], policy: RestorePolicy) -> CmdResult {
        let saved = (self.libraries.clone(), self.functions.clone());
        if policy == RestorePolicy::Flush {
            self.libraries.clear();
            self.functions.clear();
        }
        for code in codes {
            let replace = policy == RestorePolicy::Replace;
            if let Err(e) = self.function_load(code, replace) {
                (self.libraries, self.functions) = saved;
                self.update_counts();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Runs a function (FCALL, FCALL_RO). `argv` is the whole command, for
    /// FUNCTION STATS.
    pub fn fcall(
        &mut self,
        host: &mut dyn ScriptHost,
        name: &[u8],
        keys: &[&[u8]],
        args: &[&[u8]],
        read_only: bool,
        argv: &[&[u8]],
    ) -> CmdResult {
        let name = String::from_utf8_lossy(name);
        let Some(def) = self
            .functions
            .get(name.as_ref())
            .and_then(|lib| self.libraries.get(lib))
            .and_then(|lib| lib.functions.iter().find(|f| f.name == name))
        else {
            return Err(CmdError::err("Function not found"));
        };
        if read_only && !def.no_writes() {
            return Err(CmdError::err(
                "Can not execute a script with write flag using *_ro command.",
            ));
        }
        let func = def.callback.clone();
        let run = RunKind {
            eval: false,
            name: Cow::Owned(def.name.clone()),
            deny_writes: read_only || def.no_writes(),
        };
        *self.running.current.lock() = Some((
            run.name.to_string(),
            argv.iter().map(|a| a.to_vec()).collect(),
        ));
        self.run(host, &func, keys, args, &run)
    }

    // ---- Running ----

    fn run(
        &mut self,
        host: &mut dyn ScriptHost,
        func: &Function,
        keys: &[&[u8]],
        args: &[&[u8]],
        kind: &RunKind<'_>,
    ) -> CmdResult {
        let lua = &self.lua;
        let to_table = |items: &[&[u8]]| {
            lua.create_sequence_from(items.iter().map(|a| match std::str::from_utf8(a) {
                // mlua pushes a `&str` straight onto the Lua stack.
                Ok(text) => Either::Left(text),
                Err(_) => Either::Right(LuaBytes(a)),
            }))
        };
        let keys_t = to_table(keys).map_err(lua_err)?;
        let args_t = to_table(args).map_err(lua_err)?;
        let running = &self.running;
        running.start(kind.eval, false);
        let saved = host.enter();
        let resp = &self.resp;
        resp.store(2, Ordering::Relaxed);
        let mut env = CallEnv {
            host: &mut *host,
            scratch: &mut self.scratch,
            deny_writes: kind.deny_writes,
        };
        let run_fn = &self.run_fn;
        let result = self.slot.lend(&mut env, || {
            run_fn.call::<(bool, Value)>((func, keys_t, args_t, !kind.eval))
        });
        let mut lua_out_of_memory = false;
        let result = result.map(|(ok, value)| {
            lua_out_of_memory = !ok && is_memory_error(&value);
            let counted = error_counted(&value);
            if ok {
                // A script's own error reply is counted here; one made
                // from a command's error was counted when it answered.
                if let (Some(line), false) = (error_reply_line(&value), counted) {
                    host.count_error(&line);
                }
                lua_to_reply(host.out(), &value, resp.load(Ordering::Relaxed));
                Ok(())
            } else {
                let e = script_error(&value, &kind.name, running.killed());
                if counted {
                    host.out().error_bytes(&e.line_bytes());
                    return Ok(());
                }
                Err(e)
            }
        });
        running.stop();
        self.scratch.trim();
        host.leave(saved);
        let out_of_memory = lua_out_of_memory || matches!(result, Err(mlua::Error::MemoryError(_)));
        if out_of_memory {
            self.recover_from_memory_error();
            self.update_memory_figures();
            return Err(self.memory_error());
        }
        self.update_memory_figures();
        result.map_err(lua_err)?
    }
}

/// Bytes that become a Lua string (KEYS and ARGV).
struct LuaBytes<'b>(&'b [u8]);

impl mlua::IntoLua for LuaBytes<'_> {
    fn into_lua(self, lua: &Lua) -> mlua::Result<Value> {
        lua.create_string(self.0).map(Value::String)
    }
}

/// What kind of run, for errors and write checks.
struct RunKind<'n> {
    eval: bool,
    name: Cow<'n, str>,
    deny_writes: bool,
}

/// A Redis-style error raised from Rust (`redis.call`, `redis.setresp`, ...):
/// the script's error handler turns it into an `{err=...}` table.
/// The flag tells an error reply of a command run by `redis.call` (already
/// counted in the error statistics when the command answered it).
#[derive(Debug)]
pub struct ScriptError(pub Vec<u8>, pub bool);

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl std::error::Error for ScriptError {}

/// A Redis-style error with `msg`, as `luaPushError` builds it (`ERR msg`).
fn raise(msg: &str) -> mlua::Error {
    mlua::Error::external(ScriptError(error_line(msg.as_bytes()), false))
}

/// The line of a [`ScriptError`] inside an mlua error, if it is one.
fn script_error_line(e: &mlua::Error) -> Option<(Vec<u8>, bool)> {
    match e {
        mlua::Error::ExternalError(inner) => inner
            .downcast_ref::<ScriptError>()
            .map(|s| (s.0.clone(), s.1)),
        mlua::Error::CallbackError { cause, .. } => script_error_line(cause),
        _ => None,
    }
}

/// A Lua value as the bytes of an argument (numbers as Lua prints them).
fn lua_bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Integer(i) => i.to_string().into_bytes(),
        Value::Number(n) => super::libs::cjson::format_g(*n, 14).into_bytes(),
        _ => Vec::new(),
    }
}

/// Redis's `lrand48` behind `math.random` (one sequence for every script,
/// reseeded only by `math.randomseed`).
struct Lrand48 {
    x: u64,
}

impl Lrand48 {
    fn new() -> Self {
        Lrand48 {
            x: 0x1234_ABCD_330E,
        }
    }

    fn seed(&mut self, seed: i32) {
        self.x = ((seed as u32 as u64) << 16) | 0x330E;
    }

    fn next(&mut self) -> i32 {
        self.x = (0x5_DEEC_E66D_u64.wrapping_mul(self.x).wrapping_add(0xB)) & ((1 << 48) - 1);
        (self.x >> 17) as i32
    }

    fn math_random(&mut self, argv: &[Value]) -> mlua::Result<f64> {
        let max = i32::MAX as f64;
        let r = (self.next() as f64 % max) / max;
        let int = |v: &Value, n: usize| -> mlua::Result<f64> {
            match v {
                Value::Integer(i) => Ok(*i as i32 as f64),
                Value::Number(x) => Ok(*x as i32 as f64),
                _ => Err(super::libs::lua_error(format!(
                    "bad argument #{n} to 'random' (number expected, got {})",
                    v.type_name()
                ))),
            }
        };
        match argv {
            [] => Ok(r),
            [u] => {
                let u = int(u, 1)?;
                if u < 1.0 {
                    return Err(super::libs::lua_error(
                        "bad argument #1 to 'random' (interval is empty)",
                    ));
                }
                Ok((r * u).floor() + 1.0)
            }
            [l, u] => {
                let (l, u) = (int(l, 1)?, int(u, 2)?);
                if l > u {
                    return Err(super::libs::lua_error(
                        "bad argument #2 to 'random' (interval is empty)",
                    ));
                }
                Ok((r * (u - l + 1.0)).floor() + l)
            }
            _ => Err(super::libs::lua_error("wrong number of arguments")),
        }
    }
}

/// The message of an error raised by a Rust primitive, as Lua would show a
/// `luaL_error` from C.
fn rust_error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::CallbackError { cause, .. } => rust_error_text(cause),
        mlua::Error::FromLuaConversionError { from, to, .. } => {
            format!("bad argument ({to} expected, got {from})")
        }
        other => other.to_string(),
    }
}

/// The message of a compile error, as Lua wrote it.
fn syntax_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// The `err` field of an error table (or the error itself).
fn error_message(v: &Value) -> String {
    match v {
        Value::Table(t) => match t.raw_get::<Value>("err") {
            Ok(Value::String(s)) => s.to_string_lossy(),
            _ => "ERR unknown error".into(),
        },
        Value::String(s) => s.to_string_lossy(),
        other => format!("ERR {other:?}"),
    }
}

/// The error line of a failed script: its message and where it was raised.
/// Whether `v` is an `{err=...}` table made from a command's error reply.
fn error_counted(v: &Value) -> bool {
    matches!(v, Value::Table(t) if matches!(t.raw_get::<Value>(COUNTED), Ok(Value::Boolean(true))))
}

/// The error line of a script's reply that is an `{err=...}` table.
fn error_reply_line(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::Table(t) => match t.raw_get::<Value>("err") {
            Ok(Value::String(s)) => Some(s.as_bytes().to_vec()),
            _ => None,
        },
        _ => None,
    }
}

/// Whether a script's error is Lua's memory error: Lua 5.1 raises it
/// without calling the script's error handler, so it arrives as the bare
/// message (an `error("...")` of the script arrives as a table).
fn is_memory_error(v: &Value) -> bool {
    matches!(v, Value::String(s) if s.as_bytes().as_ref() == b"not enough memory")
}

fn script_error(v: &Value, name: &str, killed: bool) -> CmdError {
    let mut msg = if killed {
        KILLED.to_string()
    } else {
        error_message(v)
    };
    if let Value::Table(t) = v {
        let source: Option<String> = t.raw_get("source").ok().flatten();
        let line: Option<i64> = t.raw_get("line").ok().flatten();
        if let (Some(source), Some(line)) = (source, line) {
            msg.push_str(&format!(" script: {name}, on {source}:{line}."));
        }
    }
    CmdError::line(msg)
}

/// Buffers redis.call reuses: the arguments' bytes and the reply.
#[derive(Default)]
struct Scratch {
    args: Vec<u8>,
    ends: Vec<usize>,
    reply: Vec<u8>,
}

impl Scratch {
    /// Buffers larger than this are freed after a run rather than kept.
    const KEEP: usize = 64 * 1024;

    /// Frees the buffers a big argument or reply grew, so that they do not
    /// stay allocated after the run that needed them.
    fn trim(&mut self) {
        if self.reply.capacity() > Self::KEEP {
            self.reply = Vec::new();
        }
        if self.args.capacity() > Self::KEEP {
            self.args = Vec::new();
        }
        if self.ends.capacity() > Self::KEEP {
            self.ends = Vec::new();
        }
    }
}

/// What redis.call works with while a script runs: the calling command's
/// context (every shard locked) and the VM's buffers.
struct CallEnv<'r> {
    host: &'r mut dyn ScriptHost,
    scratch: &'r mut Scratch,
    /// Writes are refused (read-only scripts and functions).
    deny_writes: bool,
}

/// How [`Vm::run`] hands its [`CallEnv`] to redis.call and redis.pcall,
/// which are created once with the VM rather than for every run: while the
/// script runs, the slot points at the `CallEnv` on `run`'s stack; at any
/// other time it is null.
#[derive(Default)]
struct CallSlot(AtomicPtr<()>);

impl CallSlot {
    /// Runs `f` (the script) with `env` lent to redis.call.
    fn lend<R>(&self, env: &mut CallEnv<'_>, f: impl FnOnce() -> R) -> R {
        /// Empties the slot when the run ends, even by unwinding.
        struct Clear<'s>(&'s AtomicPtr<()>);
        impl Drop for Clear<'_> {
            fn drop(&mut self) {
                self.0.store(ptr::null_mut(), Ordering::Release);
            }
        }
        let clear = Clear(&self.0);
        clear.0.store(ptr::from_mut(env).cast(), Ordering::Release);
        f()
    }

    /// Runs `f` with the lent [`CallEnv`]; `None` when no script runs (or
    /// inside another `with`, which has taken it).
    fn with<R>(&self, f: impl FnOnce(&mut CallEnv<'_>) -> R) -> Option<R> {
        /// Puts the taken pointer back, even by unwinding.
        struct Restore<'s>(&'s AtomicPtr<()>, *mut ());
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                self.0.store(self.1, Ordering::Release);
            }
        }
        let taken = self.0.swap(ptr::null_mut(), Ordering::Acquire);
        if taken.is_null() {
            return None;
        }
        let restore = Restore(&self.0, taken);
        // SAFETY: a non-null pointer in the slot was stored by `lend` from
        // a `&mut CallEnv` that outlives the slot's holding it: `lend`
        // empties the slot before it returns (or unwinds), and `lend`'s
        // caller cannot touch `env` meanwhile, since `lend` borrows it
        // mutably. Every `&mut` made here is unique: the pointer is swapped
        // out of the slot first, so a nested `with` (a redis.call reached
        // from inside this one) finds null, and it is put back only after
        // `f` has returned. `lend` and the Lua code that calls `with` run
        // on one thread: the script runs inside `f` of `lend`, and mlua
        // holds the VM's lock for the whole call. The lifetimes are erased:
        // `f` is generic over them, so the reference cannot leave `f`.
        let env = unsafe { &mut *restore.1.cast::<CallEnv<'_>>() };
        Some(f(env))
    }
}

/// How a redis.call runs: the RESP version asked for, and whether an error
/// reply is raised (redis.call) or returned as a table (redis.pcall).
struct Call {
    resp: u8,
    raise_errors: bool,
}

/// What `redis.call` / `redis.pcall` do: runs one command and returns its
/// reply for Lua; an error reply is raised by redis.call and returned as
/// `{err=...}` by redis.pcall.
fn call_command(
    lua: &Lua,
    env: &mut CallEnv<'_>,
    running: &Running,
    call: Call,
    argv: MultiValue,
) -> mlua::Result<Value> {
    match run_command(lua, env, running, call.resp, argv)? {
        Ok(v) => Ok(v),
        Err(line) if call.raise_errors => Err(mlua::Error::external(ScriptError(line, true))),
        Err(line) => {
            let t = lua.create_table_with_capacity(0, 2)?;
            t.raw_set("err", lua.create_string(line)?)?;
            t.raw_set(COUNTED, true)?;
            Ok(Value::Table(t))
        }
    }
}

/// Runs one command for redis.call: its reply for Lua, or its error line.
fn run_command(
    lua: &Lua,
    env: &mut CallEnv<'_>,
    running: &Running,
    resp: u8,
    argv: MultiValue,
) -> mlua::Result<Result<Value, Vec<u8>>> {
    let fail = |msg: &[u8]| -> mlua::Result<Result<Value, Vec<u8>>> { Ok(Err(msg.to_vec())) };
    if argv.is_empty() {
        return fail(b"ERR Please specify at least one argument for this redis lib call");
    }
    // Every argument's bytes in one buffer.
    let Scratch { args, ends, reply } = &mut *env.scratch;
    args.clear();
    ends.clear();
    for v in argv.iter() {
        match v {
            Value::String(s) => args.extend_from_slice(&s.as_bytes()),
            Value::Integer(i) => args.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
            Value::Number(n) => args.extend_from_slice(&c_double(*n)),
            _ => return fail(b"ERR Lua redis lib command arguments must be strings or integers"),
        }
        ends.push(args.len());
    }
    drop(argv);
    let mut refs: SmallVec<[&[u8]; 8]> = SmallVec::with_capacity(ends.len());
    let mut start = 0;
    for &end in ends.iter() {
        refs.push(&args[start..end]);
        start = end;
    }
    reply.clear();
    let mut out = Reply {
        buf: std::mem::take(reply),
        resp3: resp == 3,
    };
    let ran = env
        .host
        .call(&refs, &mut out, env.deny_writes, &running.wrote);
    *reply = out.buf;
    if let Err(line) = ran {
        return fail(line);
    }
    match reply_to_lua(lua, reply)? {
        Decoded::Value(v) => Ok(Ok(v)),
        Decoded::Error(line) => {
            let mut raw = b"-".to_vec();
            raw.extend_from_slice(&line);
            fail(&error_line(&raw))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines_are_normalized_as_redis_does() {
        assert_eq!(error_line(b"-ERR bad thing\r\n"), b"ERR bad thing");
        assert_eq!(error_line(b"-WRONGTYPE Operation"), b"WRONGTYPE Operation");
        assert_eq!(error_line(b"-Oops"), b"ERR Oops");
        assert_eq!(error_line(b"plain message"), b"ERR plain message");
    }
}

#[cfg(test)]
mod hook_tests {
    use super::*;

    #[test]
    fn the_hook_stops_a_killed_script() {
        let running = Arc::new(Running::new());
        let vm = Vm::new(running.clone(), |_| true).unwrap();
        running.kill.store(true, Ordering::Release);
        let r: mlua::Result<()> = vm.lua.load("while true do end").exec();
        assert!(r.is_err());
    }
}
