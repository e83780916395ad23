//! Server commands: COMMAND, INFO, CONFIG, CLIENT, DBSIZE, FLUSHALL, ...

use super::table::{flags::*, table, CommandSpec, KeySpec};
use super::Ctx;
use crate::error::{CmdError, CmdResult};

const fn srv(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: super::table::Handler,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        group: "server",
        summary,
        ..CommandSpec::new(name, arity, flags, keys, handler)
    }
}

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        subcommands: COMMAND_SUBS,
        ..srv(
            "command",
            -1,
            LOADING | STALE,
            KeySpec::None,
            command,
            "Get array of Redis command details",
        )
    },
    srv(
        "dbsize",
        1,
        READONLY | FAST,
        KeySpec::None,
        dbsize,
        "Return the number of keys in the selected database",
    ),
    srv(
        "flushall",
        -1,
        WRITE,
        KeySpec::All,
        flushall,
        "Remove all keys from all databases",
    ),
    srv(
        "flushdb",
        -1,
        WRITE,
        KeySpec::All,
        flushdb,
        "Remove all keys from the current database",
    ),
];

const COMMAND_SUBS: &[CommandSpec] = &[srv(
    "count",
    2,
    LOADING | STALE,
    KeySpec::None,
    command_count,
    "Get total number of Redis commands",
)];

/// Checks a client name as CLIENT SETNAME does (no spaces or newlines).
pub fn validate_client_name(name: &[u8]) -> Result<(), CmdError> {
    if name.iter().any(|&c| c < b'!' || c > b'~') {
        return Err(CmdError::err(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

fn command(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.array(0);
    Ok(())
}

fn command_count(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.int(table().len() as i64);
    Ok(())
}

fn dbsize(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let db = ctx.client.db;
    let n: usize = (0..crate::engine::SHARD_COUNT)
        .map(|i| {
            let g = ctx.server.keyspace.lock_one(i, false);
            g.shard()
                .dbs
                .get(db)
                .map(|d| {
                    d.iter()
                        .filter(|(_, e)| e.expire_at().is_none_or(|t| t > ctx.keys.now_ms))
                        .count()
                })
                .unwrap_or(0)
        })
        .sum();
    ctx.out.int(n as i64);
    Ok(())
}

fn flush_mode(a: &[&[u8]]) -> Result<(), CmdError> {
    match a.len() {
        1 => Ok(()),
        2 if super::args::is(a[1], "async") || super::args::is(a[1], "sync") => Ok(()),
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
    ctx.out.ok();
    Ok(())
}

fn flushdb(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    flush_mode(a)?;
    let db = ctx.keys.db;
    let mut n = 0;
    for g in ctx.keys.locked.guards_mut() {
        if let Some(s) = g.shard_mut() {
            if let Some(d) = s.dbs.get_mut(db) {
                n += d.clear();
            }
        }
    }
    ctx.keys.dirty += n as u64 + 1;
    ctx.out.ok();
    Ok(())
}
