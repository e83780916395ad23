//! Server commands: introspection and administration (COMMAND, INFO,
//! CONFIG, CLIENT, MONITOR, SLOWLOG, LATENCY, MEMORY, DBSIZE, FLUSHALL,
//! TIME, SHUTDOWN, ...). Each larger command has its own submodule; the small ones
//! live here with the family's table.

mod client;
mod command;
mod config;
mod diag;
mod info;
mod module;
pub mod monitor;
mod syntax;
pub mod tracking;

use super::args::is;
use super::table::{flags::*, CommandSpec, Handler, KeySpec};
use super::Ctx;
use crate::engine::keyspace::Shard;
use crate::error::{CmdError, CmdResult};
use crate::state::journal;
use crate::state::unix_us;
use std::sync::atomic::Ordering;

pub use client::{client_info_line, validate_client_name};
pub use info::MemoryFigures;

/// A command of the `server` group.
const fn srv(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: Handler,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
) -> CommandSpec {
    CommandSpec {
        group: "server",
        summary,
        since,
        complexity,
        ..CommandSpec::new(name, arity, flags, KeySpec::None, handler)
    }
}

/// A container command (its subcommands do the work).
const fn container(
    name: &'static str,
    group: &'static str,
    summary: &'static str,
    since: &'static str,
    subcommands: &'static [CommandSpec],
) -> CommandSpec {
    CommandSpec {
        group,
        summary,
        since,
        complexity: "Depends on subcommand.",
        subcommands,
        ..CommandSpec::new(name, -2, 0, KeySpec::None, no_subcommand)
    }
}

/// Never runs: the dispatcher answers a container called without a
/// subcommand with an arity error.
fn no_subcommand(_ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    Err(CmdError::WrongArity(super::args::text(a[0]).to_lowercase()))
}

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    command::COMMAND,
    info::INFO,
    monitor::MONITOR,
    container(
        "config",
        "server",
        "A container for server configuration commands",
        "2.0.0",
        config::SUBCOMMANDS,
    ),
    container(
        "client",
        "connection",
        "A container for client connection commands",
        "2.4.0",
        client::SUBCOMMANDS,
    ),
    container(
        "slowlog",
        "server",
        "A container for slow log commands",
        "2.2.12",
        diag::SLOWLOG,
    ),
    container(
        "latency",
        "server",
        "A container for latency diagnostics commands",
        "2.8.13",
        diag::LATENCY,
    ),
    container(
        "memory",
        "server",
        "A container for memory diagnostics commands",
        "4.0.0",
        diag::MEMORY,
    ),
    container(
        "module",
        "server",
        "A container for module commands",
        "4.0.0",
        module::SUBCOMMANDS,
    ),
    srv(
        "dbsize",
        1,
        READONLY | FAST,
        dbsize,
        "Return the number of keys in the selected database",
        "1.0.0",
        "O(1)",
    ),
    CommandSpec {
        keys: KeySpec::All,
        ..srv(
            "flushall",
            -1,
            WRITE,
            flushall,
            "Remove all keys from all databases",
            "1.0.0",
            "O(N) where N is the total number of keys in all databases",
        )
    },
    CommandSpec {
        keys: KeySpec::All,
        ..srv(
            "flushdb",
            -1,
            WRITE,
            flushdb,
            "Remove all keys from the current database",
            "1.0.0",
            "O(N) where N is the number of keys in the selected database",
        )
    },
    srv(
        "time",
        1,
        LOADING | STALE | FAST,
        time,
        "Return the current server time",
        "2.6.0",
        "O(1)",
    ),
    srv(
        "lastsave",
        1,
        LOADING | STALE | FAST,
        lastsave,
        "Get the UNIX time stamp of the last successful save to disk",
        "1.0.0",
        "O(1)",
    ),
    srv(
        "shutdown",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY,
        shutdown,
        "Synchronously save the dataset to disk and then shut down the server",
        "1.0.0",
        "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)",
    ),
];

/// Runs `f` on every shard in turn, through the command's own guards when
/// it holds them all (inside EXEC), else locking one shard at a time.
fn for_each_shard(ctx: &Ctx, mut f: impl FnMut(&Shard)) {
    let ks = &ctx.server.keyspace;
    for i in 0..crate::engine::SHARD_COUNT {
        if ctx.keys.locked.holds_all() {
            if let Some(g) = ctx.keys.locked.guard(i) {
                f(g.shard());
            }
        } else {
            f(ks.lock_one(i, false).shard());
        }
    }
}

/// Keys expired since start, summed over every shard (see
/// [`for_each_shard`]).
fn expired_keys(ctx: &Ctx) -> u64 {
    let mut n = 0;
    for_each_shard(ctx, |s| {
        n += s.dbs.iter().map(|d| d.expired_count()).sum::<u64>()
    });
    n
}

fn dbsize(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let (db, now) = (ctx.keys.db, ctx.keys.now_ms);
    // A replica counts the keys whose time passed but that are still
    // stored (its primary's DEL removes them), as Redis's does.
    let stored = ctx.server.replication.is_replica();
    let mut n = 0;
    for_each_shard(ctx, |s| {
        n += s
            .dbs
            .get(db)
            .map_or(0, |d| if stored { d.len() } else { d.live_len(now) })
    });
    ctx.out.int(n as i64);
    Ok(())
}

/// Checks FLUSHALL / FLUSHDB's optional `ASYNC` / `SYNC`.
fn flush_mode(a: &[&[u8]]) -> Result<(), CmdError> {
    match a {
        [_] => Ok(()),
        [_, mode] if is(mode, "async") || is(mode, "sync") => Ok(()),
        _ => Err(CmdError::Syntax),
    }
}

fn flushall(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    flush_mode(a)?;
    let mut n = 0;
    for g in ctx.keys.locked.guards_mut() {
        if let Some(s) = g.shard_mut() {
            for db in s.dbs.iter_mut() {
                n += db.clear();
            }
        }
    }
    ctx.keys.dirty += n as u64 + 1;
    tracking::flushed(ctx);
    ctx.out.ok();
    Ok(())
}

fn flushdb(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    flush_mode(a)?;
    let db = ctx.keys.db;
    let mut n = 0;
    for g in ctx.keys.locked.guards_mut() {
        if let Some(d) = g.shard_mut().and_then(|s| s.dbs.get_mut(db)) {
            n += d.clear();
        }
    }
    ctx.keys.dirty += n as u64 + 1;
    tracking::flushed(ctx);
    ctx.out.ok();
    Ok(())
}

fn time(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let us = unix_us();
    ctx.out.array(2);
    ctx.out.bulk_int((us / 1_000_000) as i64);
    ctx.out.bulk_int((us % 1_000_000) as i64);
    Ok(())
}

fn lastsave(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let t = ctx
        .server
        .aof
        .lastsave
        .load(std::sync::atomic::Ordering::Relaxed);
    ctx.out.int(t as i64);
    Ok(())
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: stops the server. The
/// client gets no reply: its connection closes, as with Redis.
fn shutdown(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (mut save, mut nosave, mut abort) = (false, false, false);
    for arg in &a[1..] {
        if is(arg, "nosave") {
            nosave = true;
        } else if is(arg, "save") {
            save = true;
        } else if is(arg, "now") || is(arg, "force") {
            // Rostrum has no replicas to wait for nor an RDB save to fail.
        } else if is(arg, "abort") {
            abort = true;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if (save && nosave) || (abort && a.len() > 2) {
        return Err(CmdError::Syntax);
    }
    if abort {
        // A shutdown here is immediate, so none is ever pending.
        return Err(CmdError::err("No shutdown in progress."));
    }
    tracing::warn!("User requested shutdown...");
    // Saved here, before the server stops: SAVE, or save points without
    // NOSAVE. A failed save keeps the server up unless FORCE is given.
    let force = a[1..].iter().any(|x| is(x, "force"));
    let server = ctx.server;
    if !nosave && (save || !server.config.read().save.is_empty()) {
        tracing::info!("Saving the final RDB snapshot before exiting.");
        let ok = super::persistence::blocking(|| journal::save_blocking(&server.aof));
        if !ok && !force {
            tracing::warn!("Error trying to save the DB, can't exit.");
            return Err(CmdError::err("Errors trying to SHUTDOWN. Check logs."));
        }
    }
    server.aof.exit_saved.store(true, Ordering::Release);
    ctx.server.request_shutdown();
    ctx.client.close_after_reply = true;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::engine::string::StrValue;
    use crate::engine::value::Value;
    use crate::engine::Keyspace;

    #[test]
    fn live_len_skips_expired_keys_not_yet_removed() {
        let ks = Keyspace::new(1);
        let mut g = ks.lock_one(0, true);
        let Some(shard) = g.shard_mut() else {
            panic!("write lock expected");
        };
        let db = &mut shard.dbs[0];
        for (key, expire) in [(&b"a"[..], 0), (b"b", 2000), (b"c", 3000)] {
            db.insert(key, Value::Str(StrValue::from_bytes(b"1")), false, 1000);
            if expire > 0 {
                db.set_expire(key, expire);
            }
        }
        assert_eq!(db.live_len(1999), 3);
        assert_eq!(db.live_len(2000), 2);
        assert_eq!(db.live_len(5000), 1);
        assert_eq!(db.len(), 3);
    }
}
