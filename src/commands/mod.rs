//! Commands: the table, the dispatcher, and one module per family. A family
//! module parses arguments, applies them through `engine`, and writes the
//! reply; it never touches sockets.

pub mod acl;
pub mod args;
pub mod bitmap;
pub mod cluster;
pub mod connection;
pub mod debug;
pub mod dump;
pub mod hash;
pub mod keys;
pub mod lbwatch;
pub mod leaderboard;
pub mod list;
pub mod long_double;
pub mod persistence;
pub mod pubsub;
pub mod replication;
pub mod run;
pub mod scripting;
pub mod server;
pub mod set;
pub mod sort;
pub mod stream;
pub mod string;
pub mod table;
pub mod transaction;
pub mod zset;

use std::sync::atomic::Ordering;
use std::time::Instant;

use smallvec::SmallVec;

pub use crate::state::{Ctx, Keys};
pub use run::{execute_pipelined, execute_run, read_ahead, PipelineRun};
use table::{flags, table, Command, CommandSpec, KeySpec, Lookup};

use crate::engine::Locked;
use crate::error::CmdError;
use crate::protocol::Reply;
use crate::state::client::{ClientState, PendingStat, Queued, ReplyMode};
use crate::state::journal;
use crate::state::memory;
use crate::state::notify;
use crate::state::pubsub::Own;
use crate::state::Server;

/// Every family's commands; the table is built from this list.
pub const FAMILIES: &[&[CommandSpec]] = &[
    connection::COMMANDS,
    acl::COMMANDS,
    string::COMMANDS,
    keys::COMMANDS,
    server::COMMANDS,
    bitmap::COMMANDS,
    set::COMMANDS,
    transaction::COMMANDS,
    persistence::COMMANDS,
    zset::COMMANDS,
    scripting::COMMANDS,
    list::COMMANDS,
    hash::COMMANDS,
    pubsub::COMMANDS,
    sort::COMMANDS,
    leaderboard::COMMANDS,
    cluster::COMMANDS,
    dump::COMMANDS,
    stream::COMMANDS,
    lbwatch::COMMANDS,
    replication::COMMANDS,
    debug::COMMANDS,
];

/// Commands that run at once even inside MULTI.
const MULTI_IMMEDIATE: &[&str] = &["exec", "discard", "multi", "watch", "quit", "reset"];

/// The shard locks of a connection's last command, kept while it runs the
/// commands it has pipelined: consecutive commands on the same shards (a
/// pipeline of ZADDs to one board) take the locks once, instead of once
/// per command, and do not contend with other threads at every command.
///
/// Held only between the commands of one batch of parsed input, never
/// across a wait: a command that needs other shards, or none, or all,
/// drops it before locking anything (locks are only ever taken by a thread
/// holding none), and it is reused at most [`LockCache::MAX_REUSE`] times
/// in a row so other connections get their turn.
#[derive(Default)]
pub struct LockCache<'s> {
    held: Option<Locked<'s>>,
    write: bool,
    reused: u32,
}

impl<'s> LockCache<'s> {
    /// Consecutive commands served by one taking of the locks.
    pub const MAX_REUSE: u32 = 32;

    /// An empty cache.
    pub fn new() -> Self {
        LockCache {
            held: None,
            write: false,
            reused: 0,
        }
    }

    /// The held locks if they are exactly the shards `idx` (ascending,
    /// deduplicated) in a mode good for `write`; otherwise releases them.
    fn take_covering(&mut self, idx: &[usize], write: bool) -> Option<Locked<'s>> {
        let held = self.held.take()?;
        let fits = (self.write || !write)
            && self.reused < Self::MAX_REUSE
            && held.shards().eq(idx.iter().copied());
        if fits {
            self.reused += 1;
            Some(held)
        } else {
            None
        }
    }

    fn keep(&mut self, locked: Locked<'s>, write: bool, fresh: bool) {
        if fresh {
            self.reused = 0;
            self.write = write;
        }
        self.held = Some(locked);
    }

    /// Releases the held locks.
    pub fn clear(&mut self) {
        self.held = None;
    }
}

/// Runs one command from a client and writes its reply to `out`.
pub fn execute(server: &Server, client: &mut ClientState, out: &mut Reply, args: &[&[u8]]) {
    execute_cached(server, client, out, args, &mut LockCache::new());
}

/// [`execute`] for a command of a pipeline: may reuse, and leaves in
/// `cache`, the shard locks of keyed commands (see [`LockCache`]).
pub fn execute_cached<'s>(
    server: &'s Server,
    client: &mut ClientState,
    out: &mut Reply,
    args: &[&[u8]],
    cache: &mut LockCache<'s>,
) {
    execute_resolved(server, client, out, args, resolve_for(client, args), cache);
}

/// [`execute_cached`] for a command already looked up ([`resolve`]).
fn execute_resolved<'s>(
    server: &'s Server,
    client: &mut ClientState,
    out: &mut Reply,
    args: &[&[u8]],
    resolved: Result<&'static Command, CmdError>,
    cache: &mut LockCache<'s>,
) {
    let start_len = out.len();
    if let Some(adm) = admit(server, client, out, args, resolved, cache) {
        let cmd = adm.cmd;
        run_admitted(server, client, out, args, cache, adm, |ctx, start| {
            invoke(ctx, cmd, args, start)
        });
    }
    finish_reply_mode(client, out, start_len);
    if !client.tracking.own.is_empty() {
        server::tracking::write_pending(client, out);
    }
}

/// A command [`admit`] let through, and the locks it is to run under.
struct Admitted<'s> {
    cmd: &'static Command,
    write: bool,
    /// The shards of a keyed command, ascending.
    shards: Option<SmallVec<[usize; 4]>>,
    /// Locks kept from the previous command, when they are these shards'.
    reused: Option<Locked<'s>>,
}

/// The dispatcher's checks before a command runs: lookup and arity (as
/// [`resolve`] found them), authentication, MISCONF, a busy script, and
/// queueing inside MULTI. A command that fails one, or is queued, is
/// answered here (None).
fn admit<'s>(
    server: &'s Server,
    client: &mut ClientState,
    out: &mut Reply,
    args: &[&[u8]],
    resolved: Result<&'static Command, CmdError>,
    cache: &mut LockCache<'s>,
) -> Option<Admitted<'s>> {
    // Behind a command CLIENT PAUSE postponed, the pipeline's next ones
    // wait too, in order.
    if let Some((queue, _)) = client.postponed.as_mut() {
        queue.push(args.iter().map(|a| a.to_vec()).collect());
        return None;
    }
    let cmd = match resolved {
        Ok(c) => c,
        Err(e) => {
            if client.multi.is_some() {
                client.multi_error = true;
                // A malformed EXEC ends the transaction, as in Redis.
                if args
                    .first()
                    .is_some_and(|n| n.eq_ignore_ascii_case(b"exec"))
                {
                    transaction::abort(server, client);
                    let line = e.to_string();
                    let msg = line.strip_prefix("ERR ").unwrap_or(&line);
                    let e = CmdError::line(format!(
                        "EXECABORT Transaction discarded because of: {msg}"
                    ));
                    reject(server, client, out, None, &e);
                    return None;
                }
            }
            // A known command refused for its arity counts as rejected.
            if let Lookup::Found(c) = table().lookup(args) {
                record(client, c.id, 0, false, true);
            }
            reject(server, client, out, None, &e);
            return None;
        }
    };
    let spec = cmd.spec;
    // Protected commands (Redis 7.0), checked before authentication.
    if let Some(line) = debug::refusal(server, &cmd.full_name, &client.info.addr) {
        reject(server, client, out, Some(cmd), &CmdError::line(line));
        return None;
    }
    if !client.authenticated && !spec.has(flags::NO_AUTH) {
        reject(server, client, out, Some(cmd), &CmdError::NoAuth);
        return None;
    }
    let context = if client.multi.is_some() {
        acl::Context::Multi
    } else {
        acl::Context::Toplevel
    };
    if let Err(e) = acl::check(server, client, cmd, args, context) {
        reject(server, client, out, Some(cmd), &e);
        return None;
    }
    // Replication: -LOADING, -MASTERDOWN, -READONLY, -NOREPLICAS.
    if let Some(e) = refuse_replication(server, client, spec) {
        client.multi_error |= client.multi.is_some();
        reject(server, client, out, Some(cmd), &e);
        return None;
    }
    // AOF: writes are refused while the file can't be written (MISCONF).
    if let Some(e) = refuse_write(server, client, spec) {
        reject(server, client, out, Some(cmd), &e);
        return None;
    }
    // RESP2 subscribe mode: only the Pub/Sub commands, PING, QUIT, RESET.
    if !out.resp3 && client.pubsub.active() && !pubsub::allowed_in_subscribe_mode(spec) {
        let e = pubsub::subscribe_mode_error(&cmd.full_name);
        reject(server, client, out, Some(cmd), &e);
        return None;
    }
    // A monitor is a replica of sorts: the keyspace is not for it.
    if let Some(e) = server::monitor::refused_in_monitor_mode(client, spec) {
        client.multi_error |= client.multi.is_some();
        reject(server, client, out, Some(cmd), &e);
        return None;
    }
    let write = spec.has(flags::WRITE) || spec.lock_write;
    let ks = &server.keyspace;
    // The shards of a keyed command, ascending; locks still held from the
    // previous command are reused when they are exactly these.
    let shards = match spec.keys {
        _ if spec.keys_are_channels() => None,
        _ if spec.lock_all => None,
        KeySpec::Range { .. } | KeySpec::Find(_) => {
            Some(ks.shards_of(spec.key_indexes(args).iter().map(|&i| args[i])))
        }
        KeySpec::None | KeySpec::All => None,
    };
    let mut reused = match &shards {
        Some(idx) if client.multi.is_none() => cache.take_covering(idx, write),
        _ => None,
    };
    if reused.is_none() {
        // Nothing may be held past here: waits and fresh locks follow.
        cache.clear();
        // A script running: wait for it, or BUSY past busy-reply-threshold.
        if let Err(e) = wait_not_busy(server, spec) {
            reject(server, client, out, Some(cmd), &e);
            return None;
        }
    }
    // maxmemory: evict first, then refuse what would grow memory.
    let mut out_of_memory = false;
    // (After the wait for a busy script, so that eviction does not wait
    // for its locks.)
    if server.memory.maxmemory() != 0
        && !server.aof.loading()
        && server
            .memory
            .over_limit(crate::state::memory::not_counted(server))
    {
        // Eviction locks shards: nothing may be held.
        reused = None;
        match refuse_oom(server, client, spec, cache) {
            Err(e) => {
                reject(server, client, out, Some(cmd), &e);
                return None;
            }
            Ok(oom) => out_of_memory = oom,
        }
    }
    if matches!(spec.name, "eval" | "evalsha" | "fcall" | "fcall_ro") {
        client.script_oom = out_of_memory;
    }
    // CLIENT PAUSE: the command waits (the connection runs it again when
    // the pause ends), as Redis postpones it before queueing or running.
    let may_write = || {
        spec.has(flags::WRITE)
            || spec.has(flags::MAY_REPLICATE)
            || (spec.name == "exec" && queued_may_write(client))
    };
    if let Some(until) = server.pause.holds(may_write) {
        cache.clear();
        server.pause.wait(client.id());
        client.postponed = Some((vec![args.iter().map(|a| a.to_vec()).collect()], until));
        return None;
    }
    if client.multi.is_some() && !MULTI_IMMEDIATE.contains(&spec.name) {
        if spec.has(flags::NO_MULTI) {
            client.multi_error = true;
            reject(
                server,
                client,
                out,
                Some(cmd),
                &CmdError::err("Command not allowed inside a transaction"),
            );
        } else if let Some(q) = client.multi.as_mut() {
            q.push(Queued {
                args: args.iter().map(|a| a.to_vec()).collect(),
            });
            client.info.multi.store(q.len() as u64, Ordering::Relaxed);
            out.simple(b"QUEUED");
        }
        return None;
    }
    Some(Admitted {
        cmd,
        write,
        shards,
        reused,
    })
}

/// Runs an admitted command: takes its locks (or the reused ones), runs
/// `body` (its handler, timed from the given start, returning its end) in
/// a context, logs what changed to the AOF, and keeps the locks in `cache`
/// for the next pipelined command.
fn run_admitted<'s>(
    server: &'s Server,
    client: &mut ClientState,
    out: &mut Reply,
    args: &[&[u8]],
    cache: &mut LockCache<'s>,
    adm: Admitted<'s>,
    body: impl FnOnce(&mut Ctx<'_, '_>, Instant) -> Instant,
) {
    let ks = &server.keyspace;
    let spec = adm.cmd.spec;
    let fresh = adm.reused.is_none();
    let mut locked = match (adm.reused, &adm.shards) {
        (Some(locked), _) => locked,
        (None, Some(idx)) => ks.lock_sorted(idx, adm.write),
        // Keyspace-wide commands (EXEC, FLUSHALL, SWAPDB, KEYS, SORT) run
        // alone.
        (None, None) if spec.lock_all || matches!(spec.keys, KeySpec::All) => ks.lock_all(true),
        (None, None) => Locked::none(),
    };
    // AOF rewrite running: save the shards this command may change first.
    journal::before_write(
        &server.aof,
        || shards_written(server, client, spec, args),
        &mut locked,
    );
    let start = client.clock.last;
    // The primary's stream applies with expiry off, as the AOF's replay:
    // keys expire on a replica when their primary's DEL comes.
    let now_ms = if server.aof.loading() || client.repl.is_master {
        0
    } else {
        client.clock.unix_ms_at(start)
    };
    let touch = !client.no_touch || spec.name == "touch";
    let mut ctx = Ctx {
        server,
        client,
        out,
        keys: Keys {
            ks,
            locked,
            db: 0,
            now_ms,
            dirty: 0,
            ready: Vec::new(),
            track_ready: server.blocked_clients.load(Ordering::Relaxed) > 0,
            tracked: server.tracking.active().then(Vec::new),
            propagate: None,
            hits: 0,
            misses: 0,
            notify_flags: server.notify_flags.load(Ordering::Relaxed),
            events: Vec::new(),
            stale: Vec::new(),
            touch,
        },
    };
    ctx.keys.db = ctx.client.db;
    let start_db = ctx.keys.db;
    if ctx.keys.tracked.is_some() {
        server::tracking::before_command(&mut ctx, adm.cmd, args);
    }
    let end = body(&mut ctx, start);
    ctx.client.clock.last = end;
    // AOF: log what changed before the locks go, so the log order is the
    // order in which changes were applied.
    let wait = journal::feed(&server.aof, &mut ctx.keys, start_db, args);
    if wait > 0 {
        ctx.client.aof_wait = wait;
    }
    if ctx.keys.dirty > 0 && server.aof.backlog.emitting() {
        // WAIT counts this client's last write (Redis's `woff`).
        ctx.client.repl.woff = server.aof.backlog.end();
    }
    if ctx.keys.tracked.is_some() {
        server::tracking::after_command(&mut ctx, adm.cmd, args);
    }
    let (hits, misses) = (ctx.keys.hits, ctx.keys.misses);
    let ready = std::mem::take(&mut ctx.keys.ready);
    let stale = std::mem::take(&mut ctx.keys.stale);
    let locked = std::mem::replace(&mut ctx.keys.locked, Locked::none());
    drop(ctx);
    // Keep the locks for the next pipelined command unless this one
    // blocked (its connection waits now), opened a transaction or left
    // expired keys to remove.
    let keep = client.blocked.is_none() && client.multi.is_none() && stale.is_empty();
    if adm.shards.is_some() && keep {
        cache.keep(locked, adm.write, fresh);
    } else {
        drop(locked);
    }
    if !stale.is_empty() {
        remove_stale(server, &stale, now_ms);
    }
    if !ready.is_empty() {
        if client.await_woken {
            let me = client.id();
            let woken = &mut client.woken;
            server.wake_waiters(&ready, |c| {
                if c.id != me && !woken.iter().any(|(w, _)| w.id == c.id) {
                    woken.push((c.clone(), c.turns.load(Ordering::Acquire)));
                }
            });
        } else {
            server.signal_ready(&ready);
        }
    }
    client.pending_hits += hits;
    client.pending_misses += misses;
    client.info.last_cmd_ms.store(now_ms, Ordering::Relaxed);
}

/// Removes the keys a command's reads found expired (Redis's lazy expiry on
/// read), now that it holds no lock: each key's shard is locked for
/// writing and the key removed if it is still there and expired (a write
/// in between may have replaced it). Not while an AOF rewrite holds expiry
/// back; the expiry cycle gets them later.
fn remove_stale(server: &Server, stale: &[(usize, bytes::Bytes)], now_ms: u64) {
    // CLIENT PAUSE holds deletions too: the keys read as absent meanwhile.
    // A replica hides them (reads go by the clock) but its primary's DEL
    // removes them, as in Redis.
    if journal::expiry_paused(&server.aof)
        || server.pause.until().is_some()
        || server.replication.is_replica()
    {
        return;
    }
    let ks = &server.keyspace;
    for (db, key) in stale {
        let mut guard = ks.lock_one(ks.shard_of(key), true);
        let Some(part) = guard.shard_mut().and_then(|s| s.dbs.get_mut(*db)) else {
            continue;
        };
        if part.expire_if_needed(key, now_ms) {
            part.touch_watched(key);
            let removed = part.take_expired();
            server.removed_expired(*db, removed);
        }
    }
}

/// Whether the open transaction holds a command that may write or be
/// propagated (EXEC waits for a CLIENT PAUSE WRITE then).
fn queued_may_write(client: &ClientState) -> bool {
    client.multi.as_ref().is_some_and(|q| {
        q.iter().any(|c| {
            let args: Vec<&[u8]> = c.args.iter().map(|a| a.as_slice()).collect();
            resolve(&args)
                .is_ok_and(|cmd| cmd.spec.has(flags::WRITE) || cmd.spec.has(flags::MAY_REPLICATE))
        })
    })
}
/// Redis's error while the last background RDB save failed and
/// `stop-writes-on-bgsave-error` is on.
const RDB_MISCONF: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

/// Refuses a write while the AOF cannot be written (Redis's MISCONF), before
/// the command runs or is queued. For EXEC the transaction is discarded.
/// Why replication refuses this command now: a replica loading its
/// primary's data (-LOADING), a replica without its primary under
/// `replica-serve-stale-data no` (-MASTERDOWN), a write on a read-only
/// replica (-READONLY), a write on a primary short of good replicas
/// (-NOREPLICAS). The primary's own link is never refused.
fn refuse_replication(
    server: &Server,
    client: &ClientState,
    spec: &CommandSpec,
) -> Option<CmdError> {
    let repl = &server.replication;
    if client.repl.is_master {
        return None;
    }
    if repl.is_replica() {
        if repl.loading.load(Ordering::Relaxed) && !spec.has(flags::LOADING) {
            return Some(CmdError::line(
                "LOADING Redis is loading the dataset in memory",
            ));
        }
        if !spec.has(flags::STALE)
            && !repl.serve_stale.load(Ordering::Relaxed)
            && !repl.link.lock().up
        {
            return Some(CmdError::line(
                "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
            ));
        }
        if spec.has(flags::WRITE) && repl.read_only.load(Ordering::Relaxed) {
            return Some(CmdError::line(
                "READONLY You can't write against a read only replica.",
            ));
        }
        return None;
    }
    if spec.has(flags::WRITE) {
        // The wall clock only when `min-replicas-to-write` asks for it: a
        // clock read cost every write 2% of the server's CPU at -P 16.
        if let Some(line) = repl.refuse_write(crate::state::unix_ms) {
            return Some(CmdError::line(line));
        }
    }
    None
}

fn refuse_write(server: &Server, client: &mut ClientState, spec: &CommandSpec) -> Option<CmdError> {
    let line = match journal::misconf(&server.aof) {
        Some(reason) => format!("MISCONF Errors writing to the AOF file: {reason}"),
        None if server.aof.rdb_failed.load(Ordering::Acquire) && {
            let c = server.config.read();
            c.stop_writes_on_bgsave_error && !c.save.is_empty()
        } =>
        {
            RDB_MISCONF.to_string()
        }
        None => return None,
    };
    let exec_writes = spec.name == "exec"
        && client.multi.as_ref().is_some_and(|q| {
            q.iter().any(|c| {
                let args: Vec<&[u8]> = c.args.iter().map(|a| a.as_slice()).collect();
                resolve(&args).is_ok_and(|cmd| cmd.spec.has(flags::WRITE))
            })
        });
    if !(spec.has(flags::WRITE) || spec.name == "ping" || exec_writes) {
        return None;
    }
    if exec_writes {
        client.multi = None;
        client.multi_error = false;
        client.info.multi.store(u64::MAX, Ordering::Relaxed);
        unwatch_all(server, client, None);
        return Some(CmdError::line(format!(
            "EXECABORT Transaction discarded because of: {line}"
        )));
    }
    if client.multi.is_some() {
        client.multi_error = true;
    }
    Some(CmdError::line(line))
}

/// Redis's memory check before a command, over `maxmemory`: keys are
/// evicted first (holding no lock: the pipelined locks
/// go); if that cannot bring memory under the limit, DENYOOM commands are
/// refused, EXEC with a queued one is aborted, and inside MULTI every
/// command but EXEC, DISCARD, QUIT and RESET is refused (queueing takes
/// memory too), flagging the transaction. Otherwise says whether memory
/// is still over the limit with nothing to evict (for scripts).
fn refuse_oom<'s>(
    server: &'s Server,
    client: &mut ClientState,
    spec: &CommandSpec,
    cache: &mut LockCache<'s>,
) -> Result<bool, CmdError> {
    cache.clear();
    let out_of_memory = memory::perform_evictions(server) == memory::Outcome::Fail;
    if !out_of_memory {
        return Ok(false);
    }
    let in_multi = client.multi.is_some();
    let is_exec = spec.name == "exec";
    let denyoom = spec.has(flags::DENYOOM)
        || (is_exec
            && client.multi.as_ref().is_some_and(|q| {
                q.iter().any(|c| {
                    let args: Vec<&[u8]> = c.args.iter().map(|a| a.as_slice()).collect();
                    resolve(&args).is_ok_and(|cmd| cmd.spec.has(flags::DENYOOM))
                })
            }));
    let queued_refused = in_multi && !matches!(spec.name, "exec" | "discard" | "quit" | "reset");
    if !(denyoom || queued_refused) {
        return Ok(true);
    }
    if is_exec && in_multi {
        transaction::abort(server, client);
        return Err(CmdError::line(format!(
            "EXECABORT Transaction discarded because of: {OOM_LINE}"
        )));
    }
    if in_multi {
        client.multi_error = true;
    }
    Err(CmdError::line(OOM_LINE))
}

/// Redis's error for a command refused over `maxmemory`.
pub(crate) const OOM_LINE: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// The shards a command may change, for the rewrite's copy-before-write:
/// none for a command that cannot write, `None` for every shard.
fn shards_written(
    server: &Server,
    client: &ClientState,
    spec: &CommandSpec,
    args: &[&[u8]],
) -> Option<SmallVec<[usize; 4]>> {
    let may_write = spec.has(flags::WRITE) || spec.has(flags::MAY_REPLICATE) || spec.name == "exec";
    if !may_write {
        return Some(SmallVec::new());
    }
    let ks = &server.keyspace;
    match spec.keys {
        KeySpec::All if spec.name == "exec" => {
            let mut out = SmallVec::new();
            for q in client.multi.as_deref().unwrap_or(&[]) {
                let a: Vec<&[u8]> = q.args.iter().map(|x| x.as_slice()).collect();
                let Ok(cmd) = resolve(&a) else {
                    continue;
                };
                if matches!(cmd.spec.keys, KeySpec::All) {
                    return None;
                }
                for i in cmd.spec.key_indexes(&a) {
                    if let Some(k) = a.get(i) {
                        out.push(ks.shard_of(k));
                    }
                }
            }
            Some(out)
        }
        KeySpec::All => None,
        _ => Some(
            spec.key_indexes(args)
                .into_iter()
                .filter_map(|i| args.get(i).map(|k| ks.shard_of(k)))
                .collect(),
        ),
    }
}

/// Before a command locks anything: while a script runs, a command not
/// flagged ALLOW_BUSY waits for it to end, and gets `BUSY` once it has run
/// past `busy-reply-threshold` (see `scripting::Scripting::wait_not_busy`).
fn wait_not_busy(server: &Server, spec: &CommandSpec) -> Result<(), CmdError> {
    let scripting = &server.scripting;
    if !scripting.busy() || spec.has(flags::ALLOW_BUSY) {
        return Ok(());
    }
    let threshold = server.config.read().busy_reply_threshold;
    scripting.wait_not_busy(threshold)
}

/// Runs a resolved command inside an existing context (locks held): how
/// EXEC and scripts run their commands. What it changes is collected for
/// the AOF in the enclosing command's `keys.propagate`.
pub fn call(ctx: &mut Ctx<'_, '_>, cmd: &Command, args: &[&[u8]]) {
    let saved = journal::nested_begin(&mut ctx.keys);
    invoke(ctx, cmd, args, Instant::now());
    journal::nested_end(&ctx.server.aof, &mut ctx.keys, saved, args);
    server::tracking::after_call(ctx, cmd, args);
}

/// Runs a resolved command's handler (the dispatcher's last step), timed
/// from `start`; returns when it ended.
fn invoke(ctx: &mut Ctx<'_, '_>, cmd: &Command, args: &[&[u8]], start: Instant) -> Instant {
    let reply_start = ctx.out.len();
    let result = (cmd.spec.handler)(ctx, args);
    let end = Instant::now();
    let ns = end.saturating_duration_since(start).as_nanos() as u64;
    let failed = match result {
        // A script's error reply is written, not returned.
        Ok(()) => ctx.out.buf.get(reply_start) == Some(&b'-'),
        Err(e) => {
            // A handler errs before writing; drop anything partial anyway.
            ctx.out.truncate(reply_start);
            ctx.out.error_bytes(&e.line_bytes());
            ctx.server.count_error(&e.code());
            true
        }
    };
    if !ctx.keys.events.is_empty() {
        publish_events(ctx, reply_start);
    }
    account(ctx, cmd, args, ns, failed);
    end
}

/// Publishes the keyspace events the command raised. The client's own
/// copies (a RESP3 client subscribed to them) go ahead of the command's
/// reply, which starts at `reply_start` (in a script: with the pushes that
/// precede the script's reply).
fn publish_events(ctx: &mut Ctx<'_, '_>, reply_start: usize) {
    let events = std::mem::take(&mut ctx.keys.events);
    let mut own_copies = Vec::new();
    let mut own = Own {
        id: ctx.client.id(),
        resp3: ctx.client.info.resp.load(Ordering::Relaxed) == 3,
        out: &mut own_copies,
    };
    notify::publish(&ctx.server.pubsub, ctx.keys.notify_flags, &events, &mut own);
    if own_copies.is_empty() {
        return;
    }
    if ctx.client.in_script {
        ctx.client.script_pushes.extend_from_slice(&own_copies);
    } else {
        let at = reply_start.min(ctx.out.buf.len());
        ctx.out.buf.splice(at..at, own_copies);
    }
}

/// Counts a call of `cmd` that took `ns` nanoseconds in the command
/// statistics and latency histograms, and in the slow log past its
/// threshold.
fn account(ctx: &mut Ctx<'_, '_>, cmd: &Command, args: &[&[u8]], ns: u64, failed: bool) {
    account_with(ctx, cmd, || args, ns, failed);
}

/// [`account`] with the call's arguments made by `args` only when a
/// monitor or the slow log takes them (a run of pipelined calls rebuilds
/// each call's from the run).
fn account_with<'a, A: std::ops::Deref<Target = [&'a [u8]]>>(
    ctx: &mut Ctx<'_, '_>,
    cmd: &Command,
    args: impl Fn() -> A,
    ns: u64,
    failed: bool,
) {
    if ctx.server.monitors.active() {
        server::monitor::feed_executed(ctx, cmd, &args());
    }
    let us = ns / 1000;
    record(ctx.client, cmd.id, us, failed, false);
    // A command that blocked is timed when it is served, not now.
    if ctx.server.latency_tracking.load(Ordering::Relaxed) && ctx.client.blocked.is_none() {
        let bucket = crate::state::latency::bucket_of(ns) as u32;
        ctx.client.pending_latency.push((cmd.id as u32, bucket));
        // A long pipeline adds its calls as it goes: the buffer stays small.
        if ctx.client.pending_latency.len() >= LATENCY_BATCH {
            flush_latency(ctx.server, ctx.client);
        }
    }
    ctx.client.info.last_cmd.store(cmd.id, Ordering::Relaxed);
    let threshold = ctx.server.slowlog_threshold_us.load(Ordering::Relaxed);
    if threshold >= 0 && us >= threshold as u64 && !cmd.spec.has(flags::SKIP_SLOWLOG) {
        let name = ctx.client.info.name.lock().clone();
        ctx.server
            .slowlog_push(us, &args(), &ctx.client.info.addr, &name);
    }
}

/// The command name a thread looked up last, as the client wrote it, and
/// what it found: a pipeline repeats one name, and comparing a few bytes
/// costs a tenth of lower-casing and hashing them.
#[derive(Clone, Copy)]
struct LastLookup {
    name: [u8; 16],
    len: u8,
    cmd: &'static Command,
}

thread_local! {
    static LAST_LOOKUP: std::cell::Cell<Option<LastLookup>> = const { std::cell::Cell::new(None) };
}

/// Looks a command up and checks its arity.
pub fn resolve(args: &[&[u8]]) -> Result<&'static Command, CmdError> {
    let name = args.first().copied().unwrap_or_default();
    let cached = LAST_LOOKUP
        .with(|c| c.get())
        .filter(|l| l.name.get(..l.len as usize) == Some(name))
        .map(|l| l.cmd);
    let cmd = match cached {
        Some(c) => c,
        None => lookup_uncached(args, name)?,
    };
    if !cmd.spec.arity_ok(args.len()) {
        return Err(CmdError::WrongArity(cmd.full_name.clone()));
    }
    Ok(cmd)
}

/// [`resolve`] for `client`: the server's own clients (id 0: AOF loading,
/// a replica's full sync, the season timer, /metrics) also find a command
/// `rename-command` renamed or hid by its original name, because what the
/// server writes and runs itself (FLUSHALL before a sync, DEL for an
/// expired key, a rewritten AOF base) names commands that way; clients'
/// names go first, so an AOF holding the new names loads too.
pub fn resolve_for(client: &ClientState, args: &[&[u8]]) -> Result<&'static Command, CmdError> {
    let found = resolve(args);
    if found.is_err() && client.info.id == 0 && table().has_renames() {
        if let Lookup::Found(cmd) = table().lookup_original(args) {
            if cmd.spec.arity_ok(args.len()) {
                return Ok(cmd);
            }
        }
    }
    found
}

/// [`resolve`]'s table lookup, which remembers a command found by its name
/// alone (no subcommands).
fn lookup_uncached(args: &[&[u8]], name: &[u8]) -> Result<&'static Command, CmdError> {
    let t = table();
    let cmd = match t.lookup(args) {
        Lookup::Found(c) => c,
        Lookup::Unknown => return Err(CmdError::unknown_command(args)),
        Lookup::UnknownSub(c) => {
            return Err(CmdError::unknown_subcommand(
                c.spec.name,
                args.get(1).copied().unwrap_or(b""),
            ))
        }
        Lookup::MissingSub(c) => return Err(CmdError::WrongArity(c.full_name.clone())),
    };
    // Not a subcommand (found by the second argument too) nor a container.
    if cmd.subs.is_empty() && !cmd.full_name.contains('|') && name.len() <= 16 {
        let mut last = LastLookup {
            name: [0; 16],
            len: name.len() as u8,
            cmd,
        };
        last.name[..name.len()].copy_from_slice(name);
        LAST_LOOKUP.with(|c| c.set(Some(last)));
    }
    Ok(cmd)
}

/// Answers a command the dispatcher refused. Rare, so kept out of line
/// (`cold`): inlined at each of `admit`'s checks, its code stretched the
/// path every admitted command runs over more instruction cache lines,
/// each missed once a request after the kernel's socket calls (HGET
/// `-P 1` under callgrind's cache model: 221 first-level instruction
/// misses a request with it inlined, 173-180 without, a count that also
/// moves with code placement; Redis 82).
#[cold]
#[inline(never)]
fn reject(
    server: &Server,
    client: &mut ClientState,
    out: &mut Reply,
    cmd: Option<&Command>,
    e: &CmdError,
) {
    // As Redis's rejectCommand: a command refused inside MULTI dooms the
    // transaction, and a refused EXEC discards it (EXECABORT naming why:
    // BUSY while a script runs, ...).
    if client.multi.is_some() {
        if cmd.is_some_and(|c| c.spec.name == "exec") {
            transaction::abort(server, client);
            let line = e.to_string();
            let why = line.strip_prefix("ERR ").unwrap_or(&line);
            let e = CmdError::line(format!("EXECABORT Transaction discarded because of: {why}"));
            out.error_bytes(&e.line_bytes());
            server.count_error(&e.code());
            if let Some(c) = cmd {
                record(client, c.id, 0, false, true);
            }
            return;
        }
        client.multi_error = true;
    }
    out.error_bytes(&e.line_bytes());
    server.count_error(&e.code());
    if let Some(c) = cmd {
        record(client, c.id, 0, false, true);
    }
    // A refused command ends CLIENT CACHING's effect too.
    if client.multi.is_none() && !cmd.is_some_and(|c| c.full_name.starts_with("client|")) {
        client.tracking.caching = false;
    }
}

fn record(client: &mut ClientState, slot: usize, us: u64, failed: bool, rejected: bool) {
    // The most recent entry first: a pipeline repeats its commands.
    let at = match client.pending_stats.iter().rposition(|s| s.slot == slot) {
        Some(at) => at,
        None => {
            client.pending_stats.push(PendingStat {
                slot,
                ..PendingStat::default()
            });
            client.pending_stats.len() - 1
        }
    };
    let Some(s) = client.pending_stats.get_mut(at) else {
        return;
    };
    if rejected {
        s.rejected += 1;
    } else {
        s.calls += 1;
        s.usec += us;
        s.failed += failed as u64;
    }
}

/// Latency samples a client holds before adding them to the histograms.
const LATENCY_BATCH: usize = 128;

/// Adds a client's pending latency samples to the server's histograms.
fn flush_latency(server: &Server, client: &mut ClientState) {
    if client.pending_latency.is_empty() {
        return;
    }
    let stats = server.command_stats(table().slots());
    for (slot, bucket) in client.pending_latency.drain(..) {
        if let Some(s) = stats.get(slot as usize) {
            s.record_latency(bucket as usize);
        }
    }
}

/// Adds a client's pending statistics to the server's.
pub fn flush_stats(server: &Server, client: &mut ClientState) {
    let mut processed = 0;
    let stats = match client.pending_stats.is_empty() {
        true => &[][..],
        false => server.command_stats(table().slots()),
    };
    for s in client.pending_stats.drain(..) {
        let Some(dst) = stats.get(s.slot) else {
            continue;
        };
        let PendingStat {
            calls,
            usec: us,
            failed,
            rejected,
            ..
        } = s;
        processed += calls + rejected;
        if calls > 0 {
            dst.calls.fetch_add(calls, Ordering::Relaxed);
            dst.usec.fetch_add(us, Ordering::Relaxed);
        }
        if failed > 0 {
            dst.failed.fetch_add(failed, Ordering::Relaxed);
        }
        if rejected > 0 {
            dst.rejected.fetch_add(rejected, Ordering::Relaxed);
        }
    }
    flush_latency(server, client);
    let hot = server.stats.hot.local();
    if processed > 0 {
        hot.commands_processed
            .fetch_add(processed, Ordering::Relaxed);
    }
    let hits = std::mem::take(&mut client.pending_hits);
    if hits > 0 {
        hot.keyspace_hits.fetch_add(hits, Ordering::Relaxed);
    }
    let misses = std::mem::take(&mut client.pending_misses);
    if misses > 0 {
        hot.keyspace_misses.fetch_add(misses, Ordering::Relaxed);
    }
}

/// Cleans up what a client leaves behind when it disconnects (WATCHes,
/// subscriptions, tracking, monitor mode).
pub fn disconnect(server: &Server, client: &mut ClientState) {
    unwatch_all(server, client, None);
    server.pubsub.forget(&client.info, &mut client.pubsub);
    lbwatch::forget(server, client);
    server.tracking.disable(&client.info, &mut client.tracking);
    server::monitor::leave(server, client);
}

/// Removes every WATCH of the client. `held` is the caller's locks when it
/// holds every shard (EXEC); otherwise each shard is locked in turn.
pub fn unwatch_all<'s>(
    server: &'s Server,
    client: &mut ClientState,
    mut held: Option<&mut Locked<'s>>,
) {
    let ks = &server.keyspace;
    for (db, key, _) in client.watched.drain(..) {
        let idx = ks.shard_of(&key);
        let mut own;
        let guard = match held.as_deref_mut().and_then(|l| l.guard_mut(idx)) {
            Some(g) => g,
            None => {
                own = ks.lock_one(idx, true);
                &mut own
            }
        };
        if let Some(part) = guard.shard_mut().and_then(|s| s.dbs.get_mut(db)) {
            part.unwatch(&key, &client.watch_dirty);
        }
    }
    client.watch_dirty.store(false, Ordering::Release);
}

fn finish_reply_mode(client: &mut ClientState, out: &mut Reply, start_len: usize) {
    match client.reply_mode {
        ReplyMode::On => {}
        ReplyMode::Off => out.truncate(start_len),
        // CLIENT REPLY SKIP itself answers nothing; the next command is skipped.
        ReplyMode::Skip => {
            out.truncate(start_len);
            client.reply_mode = ReplyMode::SkipNext;
        }
        ReplyMode::SkipNext => {
            out.truncate(start_len);
            client.reply_mode = ReplyMode::On;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Keyspace;

    #[test]
    fn lock_cache_reuses_only_the_same_shards_in_a_fitting_mode() {
        let ks = Keyspace::new(1);
        let (a, b) = (ks.shard_of(b"a"), ks.shard_of(b"b"));
        let mut cache = LockCache::new();
        // A read lock serves reads, not writes.
        cache.keep(ks.lock_sorted(&[a], false), false, true);
        assert!(cache.take_covering(&[a], true).is_none());
        assert!(cache.held.is_none(), "a miss releases the locks");
        cache.keep(ks.lock_sorted(&[a], false), false, true);
        let l = cache.take_covering(&[a], false).expect("same shard, read");
        cache.keep(l, false, false);
        // A write lock serves both.
        cache.clear();
        cache.keep(ks.lock_sorted(&[a], true), true, true);
        let l = cache
            .take_covering(&[a], false)
            .expect("write serves a read");
        cache.keep(l, false, false);
        let l = cache
            .take_covering(&[a], true)
            .expect("still the write lock");
        cache.keep(l, true, false);
        // Other shards: released, so the caller can lock afresh.
        if a != b {
            assert!(cache.take_covering(&[b], true).is_none());
            assert!(ks.lock_sorted(&[a], true).shards().eq([a]));
        }
        // Reused at most MAX_REUSE times in a row. (When `a` and `b` share
        // a shard the cache still holds `a`: release it before locking
        // `a` again, or the test deadlocks on itself.)
        cache.clear();
        cache.keep(ks.lock_sorted(&[a], true), true, true);
        for _ in 0..LockCache::MAX_REUSE {
            let l = cache.take_covering(&[a], true).expect("within the bound");
            cache.keep(l, true, false);
        }
        assert!(cache.take_covering(&[a], true).is_none());
    }

    /// A batch's statistics gather per command slot, in the order first
    /// used, and reach the server's counters whole when flushed.
    #[test]
    fn pending_stats_gather_per_command_and_flush_whole() {
        let server = crate::state::Server::new(Default::default(), None);
        let info = std::sync::Arc::new(crate::state::client::ClientInfo::new(
            1,
            String::new(),
            String::new(),
            0,
        ));
        let mut client = ClientState::new(info, true);
        let slots = table().slots();
        let (a, b) = (3, slots - 1);
        record(&mut client, a, 10, false, false);
        record(&mut client, b, 5, true, false);
        record(&mut client, a, 7, true, false);
        record(&mut client, b, 0, false, true);
        let seen: Vec<_> = client
            .pending_stats
            .iter()
            .map(|s| (s.slot, s.calls, s.usec, s.failed, s.rejected))
            .collect();
        assert_eq!(seen, [(a, 2, 17, 1, 0), (b, 1, 5, 1, 1)]);
        flush_stats(&server, &mut client);
        assert!(client.pending_stats.is_empty());
        let got = |i: usize| {
            let s = server.command_totals(i);
            [s.calls, s.usec, s.failed, s.rejected]
        };
        assert_eq!(got(a), [2, 17, 1, 0]);
        assert_eq!(got(b), [1, 5, 1, 1]);
        assert_eq!(server.stats.total(|h| &h.commands_processed), 4);
        // A slot past the table is dropped, not a panic.
        record(&mut client, slots + 5, 1, false, false);
        flush_stats(&server, &mut client);
        assert_eq!(got(a), [2, 17, 1, 0]);
    }
}
