//! Scripting commands: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT
//! LOAD/EXISTS/FLUSH/KILL/HELP, FCALL, FCALL_RO and FUNCTION
//! LOAD/DELETE/FLUSH/LIST/DUMP/RESTORE/STATS/KILL/HELP. The VM and the
//! conversions live in `crate::scripting`.
//!
//! Scripts and functions run with every shard locked (KeySpec::All), so
//! they are atomic; the commands they call run through `commands::call`
//! (the VM reaches it through this module's [`ScriptHost`] for [`Ctx`])
//! and are what the AOF records. The FUNCTION commands that change libraries
//! also lock every shard, so that an AOF rewrite sees the libraries and the
//! data at the same instant; they are written to the AOF themselves.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::MutexGuard;

use super::args::is;
use super::table::{flags::*, table, CommandSpec, Handler, KeySpec, Lookup};
use super::Ctx;
use crate::engine::glob;
use crate::error::{CmdError, CmdResult};
use crate::protocol::number::parse_i64;
use crate::protocol::Reply;
use crate::scripting::library;
use crate::scripting::vm::{Entered, RestorePolicy};
use crate::scripting::{ScriptHost, Vm, BUSY_EVAL, BUSY_FUNCTION};
use crate::state::Server;

/// Whether `args` name a command of the table (`redis.acl_check_cmd`).
fn is_command(args: &[&[u8]]) -> bool {
    matches!(table().lookup(args), Lookup::Found(_))
}

/// The VM, for a command that holds every shard (no script can be running).
fn vm_now(server: &Server) -> Result<MutexGuard<'_, Option<Vm>>, CmdError> {
    with_memory_limit(server, server.scripting.vm(is_command)?)
}

/// The VM with `lua-maxmemory` as configured now (CONFIG SET applies to
/// the next script).
fn with_memory_limit<'a>(
    server: &Server,
    mut g: MutexGuard<'a, Option<Vm>>,
) -> Result<MutexGuard<'a, Option<Vm>>, CmdError> {
    let limit = server.config.read().lua_maxmemory;
    if let Some(vm) = g.as_mut() {
        vm.set_memory_limit(limit);
    }
    Ok(g)
}

/// The VM, for a command that does not hold the shards: waits for a running
/// script, up to `busy-reply-threshold`.
fn vm_waiting(server: &Server) -> Result<MutexGuard<'_, Option<Vm>>, CmdError> {
    let threshold = server.config.read().busy_reply_threshold;
    with_memory_limit(server, server.scripting.vm_waiting(threshold, is_command)?)
}

/// The dispatcher as a script sees it: `redis.call` runs a command of the
/// table inside the calling command's context, under Redis's rules for
/// scripts.
impl ScriptHost for Ctx<'_, '_> {
    fn call(
        &mut self,
        args: &[&[u8]],
        out: &mut Reply,
        deny_writes: bool,
        wrote: &AtomicBool,
    ) -> Result<(), &'static [u8]> {
        let cmd = match table().lookup(args) {
            Lookup::Found(c) if c.spec.arity_ok(args.len()) => c,
            Lookup::Found(_) | Lookup::MissingSub(_) => {
                return Err(b"ERR Wrong number of args calling Redis command from script")
            }
            Lookup::Unknown | Lookup::UnknownSub(_) => {
                return Err(b"ERR Unknown Redis command called from script")
            }
        };
        if cmd.spec.has(NOSCRIPT) {
            return Err(b"ERR This Redis command is not allowed from script");
        }
        super::acl::check_script(self.server, self.client, cmd, args)?;
        if cmd.spec.has(WRITE) && deny_writes {
            return Err(b"ERR Write commands are not allowed from read-only scripts.");
        }
        // Started over maxmemory: refused until the script has written
        // (then it cannot stop half-way), as Redis's scriptVerifyOOM.
        if self.client.script_oom
            && cmd.spec.has(super::table::flags::DENYOOM)
            && !wrote.load(Ordering::Acquire)
        {
            return Err(super::OOM_LINE.as_bytes());
        }
        if cmd.spec.has(WRITE) {
            wrote.store(true, Ordering::Release);
        }
        std::mem::swap(&mut *self.out, out);
        // `in_script` is on for the whole run (`enter`).
        super::call(self, cmd, args);
        std::mem::swap(&mut *self.out, out);
        // The script published to its own client: the message goes out
        // ahead of the script's reply, as Redis writes it.
        if !self.client.script_pushes.is_empty() {
            self.out.raw(&self.client.script_pushes);
            self.client.script_pushes.clear();
        }
        Ok(())
    }

    fn out(&mut self) -> &mut Reply {
        self.out
    }

    fn count_error(&mut self, line: &[u8]) {
        let line = String::from_utf8_lossy(line);
        self.server
            .count_error(line.split(' ').next().unwrap_or("ERR"));
    }

    fn enter(&mut self) -> Entered {
        // Scripts cannot nest: `leave` clears this again.
        self.client.in_script = true;
        Entered {
            db: self.client.db,
            deny_blocking: std::mem::replace(&mut self.client.deny_blocking, true),
        }
    }

    fn leave(&mut self, saved: Entered) {
        self.client.in_script = false;
        self.client.deny_blocking = saved.deny_blocking;
        if self.client.db != saved.db {
            self.client.db = saved.db;
            self.keys.db = saved.db;
            self.client.info.db.store(saved.db, Ordering::Relaxed);
        }
    }
}

const fn cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: Handler,
    summary: &'static str,
    since: &'static str,
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, keys, handler).documented(
        "scripting",
        summary,
        since,
        "Depends on the script that is executed.",
    )
}

const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: Handler,
    summary: &'static str,
    since: &'static str,
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, keys, handler).documented("scripting", summary, since, "")
}

const EVAL_FLAGS: u32 = NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | STALE;
const EVAL_RO_FLAGS: u32 = NOSCRIPT | SKIP_MONITOR | STALE | READONLY;
const HELP_FLAGS: u32 = LOADING | STALE;
const HELP_SUMMARY: &str = "Show helpful text about the different subcommands";

const SCRIPT_SUBCOMMANDS: &[CommandSpec] = &[
    sub(
        "load",
        3,
        NOSCRIPT | STALE,
        KeySpec::None,
        script_load,
        "Load the specified Lua script into the script cache.",
        "2.6.0",
    ),
    sub(
        "exists",
        -3,
        NOSCRIPT | STALE,
        KeySpec::None,
        script_exists,
        "Check existence of scripts in the script cache.",
        "2.6.0",
    ),
    sub(
        "flush",
        -2,
        NOSCRIPT,
        KeySpec::None,
        script_flush,
        "Remove all the scripts from the script cache.",
        "2.6.0",
    ),
    sub(
        "kill",
        2,
        NOSCRIPT | ALLOW_BUSY,
        KeySpec::None,
        script_kill,
        "Kill the script currently in execution.",
        "2.6.0",
    ),
    sub(
        "debug",
        3,
        NOSCRIPT,
        KeySpec::None,
        script_debug,
        "Set the debug mode for executed scripts.",
        "3.2.0",
    ),
    sub(
        "help",
        2,
        HELP_FLAGS,
        KeySpec::None,
        script_help,
        HELP_SUMMARY,
        "5.0.0",
    ),
];

const FUNCTION_SUBCOMMANDS: &[CommandSpec] = &[
    sub(
        "load",
        -3,
        WRITE | DENYOOM | NOSCRIPT,
        KeySpec::All,
        function_load,
        "Create a function with the given arguments (name, code, description)",
        "7.0.0",
    ),
    sub(
        "delete",
        3,
        WRITE | NOSCRIPT,
        KeySpec::All,
        function_delete,
        "Delete a function by name",
        "7.0.0",
    ),
    sub(
        "flush",
        -2,
        WRITE | NOSCRIPT,
        KeySpec::All,
        function_flush,
        "Deleting all functions",
        "7.0.0",
    ),
    sub(
        "restore",
        -3,
        WRITE | DENYOOM | NOSCRIPT,
        KeySpec::All,
        function_restore,
        "Restore all the functions on the given payload",
        "7.0.0",
    ),
    sub(
        "list",
        -2,
        NOSCRIPT,
        KeySpec::None,
        function_list,
        "List information about all the functions",
        "7.0.0",
    ),
    sub(
        "dump",
        2,
        NOSCRIPT,
        KeySpec::None,
        function_dump,
        "Dump all functions into a serialized binary payload",
        "7.0.0",
    ),
    sub(
        "stats",
        2,
        NOSCRIPT | ALLOW_BUSY,
        KeySpec::None,
        function_stats,
        "Return information about the function currently running (name, description, duration)",
        "7.0.0",
    ),
    sub(
        "kill",
        2,
        NOSCRIPT | ALLOW_BUSY,
        KeySpec::None,
        function_kill,
        "Kill the function currently in execution.",
        "7.0.0",
    ),
    sub(
        "help",
        2,
        HELP_FLAGS,
        KeySpec::None,
        function_help,
        HELP_SUMMARY,
        "7.0.0",
    ),
];

/// Never runs: a container without a subcommand is an arity error.
fn no_subcommand(_ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    Err(CmdError::WrongArity(super::args::text(a[0]).to_lowercase()))
}

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    cmd(
        "eval",
        -3,
        EVAL_FLAGS,
        KeySpec::All,
        eval,
        "Execute a Lua script server side",
        "2.6.0",
    ),
    cmd(
        "evalsha",
        -3,
        EVAL_FLAGS,
        KeySpec::All,
        evalsha,
        "Execute a Lua script server side",
        "2.6.0",
    ),
    cmd(
        "eval_ro",
        -3,
        EVAL_RO_FLAGS,
        KeySpec::All,
        eval_ro,
        "Execute a read-only Lua script server side",
        "7.0.0",
    ),
    cmd(
        "evalsha_ro",
        -3,
        EVAL_RO_FLAGS,
        KeySpec::All,
        evalsha_ro,
        "Execute a read-only Lua script server side",
        "7.0.0",
    ),
    cmd(
        "fcall",
        -3,
        EVAL_FLAGS,
        KeySpec::All,
        fcall,
        "Invoke a function",
        "7.0.0",
    ),
    cmd(
        "fcall_ro",
        -3,
        EVAL_RO_FLAGS,
        KeySpec::All,
        fcall_ro,
        "Invoke a read-only function",
        "7.0.0",
    ),
    CommandSpec {
        subcommands: SCRIPT_SUBCOMMANDS,
        complexity: "Depends on subcommand.",
        ..cmd(
            "script",
            -2,
            0,
            KeySpec::None,
            no_subcommand,
            "A container for Lua scripts management commands",
            "2.6.0",
        )
    },
    CommandSpec {
        subcommands: FUNCTION_SUBCOMMANDS,
        complexity: "Depends on subcommand.",
        ..cmd(
            "function",
            -2,
            0,
            KeySpec::None,
            no_subcommand,
            "A container for function commands",
            "7.0.0",
        )
    },
];

fn vm_of(g: &mut Option<Vm>) -> Result<&mut Vm, CmdError> {
    g.as_mut()
        .ok_or_else(|| CmdError::err("Lua VM unavailable"))
}

/// Arguments of a script: a slice of the command's arguments.
type Args<'x> = &'x [&'x [u8]];

/// Splits `<name> numkeys key... arg...` into keys and args.
fn split_keys<'x>(a: Args<'x>, not_integer: CmdError) -> Result<(Args<'x>, Args<'x>), CmdError> {
    let n = parse_i64(a[2]).ok_or(not_integer)?;
    if n < 0 {
        return Err(CmdError::err("Number of keys can't be negative"));
    }
    let rest = &a[3..];
    if n as u64 > rest.len() as u64 {
        return Err(CmdError::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    Ok(rest.split_at(n as usize))
}

fn run_eval(ctx: &mut Ctx, a: &[&[u8]], by_sha: bool, read_only: bool) -> CmdResult {
    refuse_if_debugging(ctx)?;
    super::server::monitor::feed_script(ctx, a);
    let (keys, args) = split_keys(a, CmdError::NotInteger)?;
    let server = ctx.server;
    let mut g = vm_now(server)?;
    let vm = vm_of(&mut g)?;
    let noscript = || CmdError::line("NOSCRIPT No matching script. Please use EVAL.");
    let loaded;
    let mut lower = [0u8; 40];
    let sha = if by_sha {
        if a[1].len() != lower.len() {
            return Err(noscript());
        }
        lower.copy_from_slice(a[1]);
        lower.make_ascii_lowercase();
        std::str::from_utf8(&lower).map_err(|_| noscript())?
    } else {
        loaded = vm.load_script(a[1])?;
        loaded.as_str()
    };
    vm.eval(ctx, sha, keys, args, read_only)
}

fn eval(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    run_eval(ctx, a, false, false)
}

fn evalsha(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    run_eval(ctx, a, true, false)
}

fn eval_ro(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    run_eval(ctx, a, false, true)
}

fn evalsha_ro(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    run_eval(ctx, a, true, true)
}

fn run_fcall(ctx: &mut Ctx, a: &[&[u8]], read_only: bool) -> CmdResult {
    refuse_if_debugging(ctx)?;
    super::server::monitor::feed_script(ctx, a);
    let (keys, args) = split_keys(a, CmdError::err("Bad number of keys provided"))?;
    let server = ctx.server;
    let mut g = vm_now(server)?;
    vm_of(&mut g)?.fcall(ctx, a[1], keys, args, read_only, a)
}

fn fcall(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    run_fcall(ctx, a, false)
}

fn fcall_ro(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    run_fcall(ctx, a, true)
}

// ---- SCRIPT ----

fn script_load(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let server = ctx.server;
    let mut g = vm_waiting(server)?;
    let sha = vm_of(&mut g)?.load_script(a[2])?;
    ctx.out.bulk(sha.as_bytes());
    Ok(())
}

fn script_exists(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let server = ctx.server;
    let mut g = vm_waiting(server)?;
    let vm = vm_of(&mut g)?;
    ctx.out.array(a.len() - 2);
    for sha in &a[2..] {
        let known =
            std::str::from_utf8(sha).is_ok_and(|s| vm.script_exists(&s.to_ascii_lowercase()));
        ctx.out.int(known as i64);
    }
    Ok(())
}

/// The optional ASYNC|SYNC of the FLUSH subcommands.
fn flush_mode(a: &[&[u8]], err: &'static str) -> CmdResult {
    match a.get(2) {
        None => Ok(()),
        Some(m) if a.len() == 3 && (is(m, "async") || is(m, "sync")) => Ok(()),
        Some(_) => Err(CmdError::err(err)),
    }
}

fn script_flush(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    flush_mode(a, "SCRIPT FLUSH only support SYNC|ASYNC option")?;
    let server = ctx.server;
    let mut g = vm_waiting(server)?;
    vm_of(&mut g)?.flush_scripts();
    ctx.out.ok();
    Ok(())
}

/// SCRIPT KILL (`eval`) and FUNCTION KILL.
fn kill(ctx: &mut Ctx, eval: bool) -> CmdResult {
    let running = &ctx.server.scripting.running;
    if running.elapsed_ms().is_none() {
        return Err(CmdError::line("NOTBUSY No scripts in execution right now."));
    }
    if running.wrote.load(Ordering::Acquire) {
        return Err(CmdError::line(
            "UNKILLABLE Sorry the script already executed write commands against the dataset. \
             You can either wait the script termination or kill the server in a hard way using \
             the SHUTDOWN NOSAVE command.",
        ));
    }
    let running_eval = running.eval.load(Ordering::Acquire);
    if eval && !running_eval {
        return Err(CmdError::line(BUSY_FUNCTION));
    }
    if !eval && running_eval {
        return Err(CmdError::line(BUSY_EVAL));
    }
    running.kill.store(true, Ordering::Release);
    ctx.out.ok();
    Ok(())
}

/// SCRIPT DEBUG: Rostrum has no Lua debugger. YES and SYNC are refused,
/// and the connection's next script (EVAL, EVALSHA, FCALL and their _RO
/// forms) is refused too: `redis-cli --ldb --eval` sends SCRIPT DEBUG,
/// ignores its reply and then sends the script, which must not run (and
/// commit its writes) as if it were being debugged. NO cancels that.
fn script_debug(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if is(a[2], "no") {
        ctx.client.script_debug = false;
        ctx.out.ok();
        return Ok(());
    }
    if !(is(a[2], "yes") || is(a[2], "sync")) {
        return Err(CmdError::err("Use SCRIPT DEBUG YES/SYNC/NO"));
    }
    ctx.client.script_debug = true;
    Err(CmdError::err(SCRIPT_DEBUG_UNSUPPORTED))
}

const SCRIPT_DEBUG_UNSUPPORTED: &str =
    "SCRIPT DEBUG is not supported: this server has no Lua debugger; the next script sent on this connection will be refused";

/// The script a connection sends after SCRIPT DEBUG YES/SYNC: refused
/// (once) instead of run.
fn refuse_if_debugging(ctx: &mut Ctx) -> CmdResult {
    if std::mem::take(&mut ctx.client.script_debug) {
        return Err(CmdError::err(
            "The script was not run: SCRIPT DEBUG was asked on this connection and this server has no Lua debugger",
        ));
    }
    Ok(())
}

fn script_kill(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    kill(ctx, true)
}

fn script_help(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.help(
        "SCRIPT",
        &[
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    );
    Ok(())
}

// ---- FUNCTION ----

fn function_load(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let mut replace = false;
    for opt in &a[2..a.len() - 1] {
        if is(opt, "replace") {
            replace = true;
        } else {
            return Err(CmdError::err(format!(
                "Unknown option given: {}",
                String::from_utf8_lossy(opt)
            )));
        }
    }
    let code = a[a.len() - 1];
    let server = ctx.server;
    let mut g = vm_now(server)?;
    let name = vm_of(&mut g)?.function_load(code, replace)?;
    ctx.keys.dirty += 1;
    ctx.out.bulk(name.as_bytes());
    Ok(())
}

fn function_delete(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let server = ctx.server;
    let mut g = vm_now(server)?;
    if !vm_of(&mut g)?.delete_library(&String::from_utf8_lossy(a[2])) {
        return Err(CmdError::err("Library not found"));
    }
    ctx.keys.dirty += 1;
    ctx.out.ok();
    Ok(())
}

fn function_flush(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    flush_mode(a, "FUNCTION FLUSH only supports SYNC|ASYNC option")?;
    let server = ctx.server;
    let mut g = vm_now(server)?;
    vm_of(&mut g)?.flush_functions();
    ctx.keys.dirty += 1;
    ctx.out.ok();
    Ok(())
}

fn function_restore(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let policy = match a.get(3) {
        None => RestorePolicy::Append,
        Some(p) if is(p, "flush") => RestorePolicy::Flush,
        Some(p) if is(p, "append") => RestorePolicy::Append,
        Some(p) if is(p, "replace") => RestorePolicy::Replace,
        Some(_) => {
            return Err(CmdError::err(
                "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ))
        }
    };
    if a.len() > 4 {
        return Err(CmdError::Syntax);
    }
    let codes = library::undump(a[2])?;
    let server = ctx.server;
    let mut g = vm_now(server)?;
    vm_of(&mut g)?.restore(&codes, policy)?;
    ctx.keys.dirty += 1;
    ctx.out.ok();
    Ok(())
}

fn function_list(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 2;
    while i < a.len() {
        if is(a[i], "withcode") && !with_code {
            with_code = true;
        } else if is(a[i], "libraryname") && pattern.is_none() {
            let Some(p) = a.get(i + 1) else {
                return Err(CmdError::err("library name argument was not given"));
            };
            pattern = Some(p);
            i += 1;
        } else {
            return Err(CmdError::err(format!(
                "Unknown argument {}",
                String::from_utf8_lossy(a[i])
            )));
        }
        i += 1;
    }
    let server = ctx.server;
    let mut g = vm_waiting(server)?;
    let vm = vm_of(&mut g)?;
    let libs: Vec<_> = vm
        .libraries()
        .filter(|l| pattern.is_none_or(|p| glob::matches(p, l.name.as_bytes(), true)))
        .collect();
    let out = &mut *ctx.out;
    out.array(libs.len());
    for lib in libs {
        out.map(3 + with_code as usize);
        out.bulk(b"library_name");
        out.bulk(lib.name.as_bytes());
        out.bulk(b"engine");
        out.bulk(b"LUA");
        out.bulk(b"functions");
        out.array(lib.functions.len());
        for f in &lib.functions {
            out.map(3);
            out.bulk(b"name");
            out.bulk(f.name.as_bytes());
            out.bulk(b"description");
            match &f.description {
                Some(d) => out.bulk(d.as_bytes()),
                None => out.null(),
            }
            out.bulk(b"flags");
            out.set(f.flags.len());
            for flag in &f.flags {
                out.simple(flag.as_bytes());
            }
        }
        if with_code {
            out.bulk(b"library_code");
            out.bulk(&lib.code);
        }
    }
    Ok(())
}

fn function_dump(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let server = ctx.server;
    let mut g = vm_waiting(server)?;
    let payload = library::dump(&vm_of(&mut g)?.library_codes());
    ctx.out.bulk(&payload);
    Ok(())
}

fn function_stats(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let running = &ctx.server.scripting.running;
    if let Some(ms) = running.elapsed_ms() {
        if running.eval.load(Ordering::Acquire) {
            return Err(CmdError::line(BUSY_EVAL));
        }
        let current = running.current.lock().clone();
        // The running function holds the VM: counts kept beside it.
        let (libs, funcs) = *running.counts.lock();
        let out = &mut *ctx.out;
        out.map(2);
        out.bulk(b"running_script");
        match current {
            Some((name, argv)) => {
                out.map(3);
                out.bulk(b"name");
                out.bulk(name.as_bytes());
                out.bulk(b"command");
                out.array(argv.len());
                for arg in &argv {
                    out.bulk(arg);
                }
                out.bulk(b"duration_ms");
                out.int(ms as i64);
            }
            None => out.null(),
        }
        write_engines(out, libs, funcs);
        return Ok(());
    }
    let server = ctx.server;
    let mut g = vm_waiting(server)?;
    let vm = vm_of(&mut g)?;
    let (libs, funcs) = (vm.libraries().count(), vm.function_count());
    let out = &mut *ctx.out;
    out.map(2);
    out.bulk(b"running_script");
    out.null();
    write_engines(out, libs, funcs);
    Ok(())
}

fn write_engines(out: &mut Reply, libs: usize, funcs: usize) {
    out.bulk(b"engines");
    out.map(1);
    out.bulk(b"LUA");
    out.map(2);
    out.bulk(b"libraries_count");
    out.int(libs as i64);
    out.bulk(b"functions_count");
    out.int(funcs as i64);
}

fn function_kill(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    kill(ctx, false)
}

fn function_help(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.help("FUNCTION",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    );
    Ok(())
}
