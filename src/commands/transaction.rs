//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! Commands are queued by the dispatcher while a MULTI is open. EXEC locks
//! every shard (KeySpec::All) and runs the queue through `commands::call`,
//! so no other client sees or changes anything half-way.

use std::sync::atomic::Ordering;

use super::table::{flags::*, CommandSpec, KeySpec};
use super::{resolve, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::state::client::ClientState;
use crate::state::Server;

const fn tx(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: super::table::Handler,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        group: "transactions",
        summary,
        since: "2.0.0",
        ..CommandSpec::new(name, arity, flags, keys, handler)
    }
}

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    tx(
        "multi",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
        KeySpec::None,
        multi,
        "Mark the start of a transaction block",
    ),
    tx(
        "exec",
        1,
        NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG,
        KeySpec::All,
        exec,
        "Execute all commands issued after MULTI",
    ),
    tx(
        "discard",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
        KeySpec::None,
        discard,
        "Discard all commands issued after MULTI",
    ),
    CommandSpec {
        since: "2.2.0",
        lock_write: true,
        ..tx(
            "watch",
            -2,
            NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
            KeySpec::Range {
                first: 1,
                last: -1,
                step: 1,
            },
            watch,
            "Watch the given keys to determine execution of the MULTI/EXEC block",
        )
    },
    CommandSpec {
        since: "2.2.0",
        ..tx(
            "unwatch",
            1,
            NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
            KeySpec::None,
            unwatch,
            "Forget about all watched keys",
        )
    },
];

fn multi(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CmdError::err("MULTI calls can not be nested"));
    }
    ctx.client.multi = Some(Vec::new());
    ctx.client.multi_error = false;
    ctx.client.info.multi.store(0, Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

fn end_multi(client: &mut ClientState) {
    client.multi = None;
    client.multi_error = false;
    client.info.multi.store(u64::MAX, Ordering::Relaxed);
}

/// Discards the client's transaction and its WATCHes (a malformed EXEC).
pub fn abort(server: &Server, client: &mut ClientState) {
    end_multi(client);
    super::unwatch_all(server, client, None);
}

fn discard(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    if ctx.client.multi.is_none() {
        return Err(CmdError::err("DISCARD without MULTI"));
    }
    end_multi(ctx.client);
    super::unwatch_all(ctx.server, ctx.client, None);
    ctx.out.ok();
    Ok(())
}

/// Whether a WATCHed key changed, or expired, since WATCH.
fn watch_broken(ctx: &Ctx) -> bool {
    if ctx.client.watch_dirty.load(Ordering::Acquire) {
        return true;
    }
    ctx.client.watched.iter().any(|(db, key, was_live)| {
        *was_live
            && !ctx
                .keys
                .part_in(key, *db)
                .map(|p| p.contains(key, ctx.keys.now_ms))
                .unwrap_or(false)
    })
}

fn exec(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let Some(queue) = ctx.client.multi.take() else {
        return Err(CmdError::err("EXEC without MULTI"));
    };
    let aborted = ctx.client.multi_error;
    end_multi(ctx.client);
    let broken = watch_broken(ctx);
    super::unwatch_all(ctx.server, ctx.client, Some(&mut ctx.keys.locked));
    if aborted {
        return Err(CmdError::line(
            "EXECABORT Transaction discarded because of previous errors.",
        ));
    }
    if broken {
        ctx.out.null_array();
        return Ok(());
    }
    ctx.out.array(queue.len());
    // Blocking commands answer at once inside a transaction.
    let deny = std::mem::replace(&mut ctx.client.deny_blocking, true);
    for q in &queue {
        let args: Vec<&[u8]> = q.args.iter().map(|a| a.as_slice()).collect();
        match resolve(&args) {
            Ok(cmd) => {
                // Rules may have changed since the command was queued.
                match super::acl::check(
                    ctx.server,
                    ctx.client,
                    cmd,
                    &args,
                    super::acl::Context::Multi,
                ) {
                    Ok(()) => super::call(ctx, cmd, &args),
                    Err(e) => ctx.out.error_bytes(&e.line_bytes()),
                }
            }
            Err(e) => ctx.out.error_bytes(&e.line_bytes()),
        }
    }
    ctx.client.deny_blocking = deny;
    Ok(())
}

fn watch(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CmdError::err("WATCH inside MULTI is not allowed"));
    }
    let db = ctx.keys.db;
    for key in &a[1..] {
        if ctx
            .client
            .watched
            .iter()
            .any(|(d, k, _)| *d == db && k.as_slice() == *key)
        {
            continue;
        }
        let now = ctx.keys.now_ms;
        let flag = ctx.client.watch_dirty.clone();
        let part = ctx.keys.part_in_mut(key, db)?;
        let live = part.contains(key, now);
        part.watch(key, &flag);
        ctx.client.watched.push((db, key.to_vec(), live));
    }
    ctx.out.ok();
    Ok(())
}

fn unwatch(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    super::unwatch_all(ctx.server, ctx.client, None);
    ctx.out.ok();
    Ok(())
}
