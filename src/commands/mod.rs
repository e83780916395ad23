//! Commands: the table, the dispatcher, and one module per family. A family
//! module parses arguments, applies them through `engine`, and writes the
//! reply; it never touches sockets.

pub mod args;
pub mod bitmap;
pub mod connection;
pub mod ctx;
pub mod keys;
pub mod long_double;
pub mod persistence;
pub mod scripting;
pub mod server;
pub mod set;
pub mod string;
pub mod table;
pub mod transaction;
pub mod zset;

use std::sync::atomic::Ordering;
use std::time::Instant;

pub use ctx::{Ctx, Keys};
use table::{flags, table, Command, CommandSpec, KeySpec, Lookup};

use crate::engine::Locked;
use crate::error::CmdError;
use crate::protocol::Reply;
use crate::server::client::{ClientState, Queued, ReplyMode};
use crate::server::state::Server;

/// Every family's commands; the table is built from this list.
pub const FAMILIES: &[&[CommandSpec]] = &[
    connection::COMMANDS,
    string::COMMANDS,
    keys::COMMANDS,
    server::COMMANDS,
    bitmap::COMMANDS,
    set::COMMANDS,
    transaction::COMMANDS,
    persistence::COMMANDS,
    zset::COMMANDS,
    scripting::COMMANDS,
];

/// Commands that run at once even inside MULTI.
const MULTI_IMMEDIATE: &[&str] = &["exec", "discard", "multi", "watch", "quit", "reset"];

/// Runs one command from a client and writes its reply to `out`.
pub fn execute(server: &Server, client: &mut ClientState, out: &mut Reply, args: &[&[u8]]) {
    let start_len = out.len();
    let cmd = match resolve(args) {
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
                    return finish_reply_mode(client, out, start_len);
                }
            }
            reject(server, client, out, None, &e);
            return finish_reply_mode(client, out, start_len);
        }
    };
    let spec = cmd.spec;
    if !client.authenticated && !spec.has(flags::NO_AUTH) {
        reject(server, client, out, Some(cmd), &CmdError::NoAuth);
        return finish_reply_mode(client, out, start_len);
    }
    // AOF: writes are refused while the file can't be written (MISCONF).
    if let Some(e) = crate::persistence::refuse_write(server, client, spec) {
        reject(server, client, out, Some(cmd), &e);
        return finish_reply_mode(client, out, start_len);
    }
    // A script running: wait for it, or BUSY past busy-reply-threshold.
    if let Err(e) = crate::scripting::wait_not_busy(server, spec) {
        reject(server, client, out, Some(cmd), &e);
        return finish_reply_mode(client, out, start_len);
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
        return finish_reply_mode(client, out, start_len);
    }

    let write = spec.has(flags::WRITE) || spec.lock_write;
    let ks = &server.keyspace;
    let locked = match spec.keys {
        KeySpec::None => Locked::none(),
        // Keyspace-wide commands (EXEC, FLUSHALL, SWAPDB, KEYS) run alone.
        KeySpec::All => ks.lock_all(true),
        _ => {
            let idx = spec.key_indexes(args);
            ks.lock_shards(idx.iter().map(|&i| args[i]), write)
        }
    };
    // AOF rewrite running: save the shards this command may change first.
    crate::persistence::before_write(server, client, spec, args, &locked);
    let start = client.clock.last;
    let now_ms = if server.aof.loading() {
        0
    } else {
        client.clock.unix_ms_at(start)
    };
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
            propagate: None,
            hits: 0,
            misses: 0,
        },
    };
    ctx.keys.db = ctx.client.db;
    let start_db = ctx.keys.db;
    let end = invoke(&mut ctx, cmd, args, start);
    ctx.client.clock.last = end;
    // AOF: log what changed before the locks go, so the log order is the
    // order in which changes were applied.
    let wait = crate::persistence::feed(server, &mut ctx.keys, start_db, args);
    if wait > 0 {
        ctx.client.aof_wait = wait;
    }
    let (hits, misses) = (ctx.keys.hits, ctx.keys.misses);
    let ready = std::mem::take(&mut ctx.keys.ready);
    drop(ctx);
    if !ready.is_empty() {
        server.signal_ready(&ready);
    }
    client.pending_hits += hits;
    client.pending_misses += misses;
    client.info.last_cmd_ms.store(now_ms, Ordering::Relaxed);
    finish_reply_mode(client, out, start_len);
}

/// Runs a resolved command inside an existing context (locks held): how
/// EXEC and scripts run their commands. What it changes is collected for
/// the AOF in the enclosing command's `keys.propagate`.
pub fn call(ctx: &mut Ctx<'_, '_>, cmd: &Command, args: &[&[u8]]) {
    let saved = crate::persistence::nested_begin(ctx);
    invoke(ctx, cmd, args, Instant::now());
    crate::persistence::nested_end(ctx, saved, args);
}

/// Runs a resolved command's handler (the dispatcher's last step), timed
/// from `start`; returns when it ended.
fn invoke(ctx: &mut Ctx<'_, '_>, cmd: &Command, args: &[&[u8]], start: Instant) -> Instant {
    let reply_start = ctx.out.len();
    let result = (cmd.spec.handler)(ctx, args);
    let end = Instant::now();
    let us = end.saturating_duration_since(start).as_micros() as u64;
    let failed = match result {
        Ok(()) => false,
        Err(e) => {
            // A handler errs before writing; drop anything partial anyway.
            ctx.out.truncate(reply_start);
            ctx.out.error_bytes(&e.line_bytes());
            ctx.server.count_error(&e.code());
            true
        }
    };
    record(ctx.client, cmd.id, us, failed, false);
    ctx.client.info.last_cmd.store(cmd.id, Ordering::Relaxed);
    let threshold = ctx.server.slowlog_threshold_us.load(Ordering::Relaxed);
    if threshold >= 0 && us >= threshold as u64 && !cmd.spec.has(flags::SKIP_SLOWLOG) {
        let name = ctx.client.info.name.lock().clone();
        ctx.server
            .slowlog_push(us, args, &ctx.client.info.addr, &name);
    }
    end
}

/// Looks a command up and checks its arity.
pub fn resolve(args: &[&[u8]]) -> Result<&'static Command, CmdError> {
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
    if !cmd.spec.arity_ok(args.len()) {
        return Err(CmdError::WrongArity(cmd.full_name.clone()));
    }
    Ok(cmd)
}

fn reject(
    server: &Server,
    client: &mut ClientState,
    out: &mut Reply,
    cmd: Option<&Command>,
    e: &CmdError,
) {
    out.error_bytes(&e.line_bytes());
    server.count_error(&e.code());
    if let Some(c) = cmd {
        record(client, c.id, 0, false, true);
    }
}

fn record(client: &mut ClientState, slot: usize, us: u64, failed: bool, rejected: bool) {
    if client.pending_stats.is_empty() {
        client.pending_stats = vec![(0, 0, 0, 0); table().slots()];
    }
    let Some(s) = client.pending_stats.get_mut(slot) else {
        return;
    };
    if *s == (0, 0, 0, 0) {
        client.pending_slots.push(slot);
    }
    if rejected {
        s.3 += 1;
    } else {
        s.0 += 1;
        s.1 += us;
        s.2 += failed as u64;
    }
}

/// Adds a client's pending statistics to the server's.
pub fn flush_stats(server: &Server, client: &mut ClientState) {
    let mut processed = 0;
    for slot in client.pending_slots.drain(..) {
        let Some(s) = client.pending_stats.get_mut(slot) else {
            continue;
        };
        let Some(dst) = server.command_stats.get(slot) else {
            continue;
        };
        let (calls, us, failed, rejected) = std::mem::take(s);
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
    if processed > 0 {
        server
            .stats
            .commands_processed
            .fetch_add(processed, Ordering::Relaxed);
    }
    let hits = std::mem::take(&mut client.pending_hits);
    if hits > 0 {
        server
            .stats
            .keyspace_hits
            .fetch_add(hits, Ordering::Relaxed);
    }
    let misses = std::mem::take(&mut client.pending_misses);
    if misses > 0 {
        server
            .stats
            .keyspace_misses
            .fetch_add(misses, Ordering::Relaxed);
    }
}

/// Cleans up what a client leaves behind when it disconnects (WATCHes).
pub fn disconnect(server: &Server, client: &mut ClientState) {
    unwatch_all(server, client, None);
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
