//! Persistence commands: BGREWRITEAOF, SAVE, BGSAVE.
//!
//! Rostrum has no RDB snapshots: its only file is the AOF. So SAVE and
//! BGSAVE save the way the AOF does, with a rewrite: a compact file of the
//! current data (`dir`/`appendfilename`, fsynced, swapped in atomically),
//! which is what a restart with `appendonly yes` loads. SAVE answers once
//! that file is on disk (only the calling client waits; others are served
//! meanwhile) and updates LASTSAVE; BGSAVE starts it and answers at once.

use super::table::{flags::*, CommandSpec, KeySpec};
use super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::state::journal::{self, RewriteStart};

const fn cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: super::table::Handler,
    summary: &'static str,
    since: &'static str,
) -> CommandSpec {
    CommandSpec {
        group: "server",
        summary,
        since,
        ..CommandSpec::new(name, arity, flags, KeySpec::None, handler)
    }
}

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    cmd(
        "bgrewriteaof",
        1,
        ADMIN | NOSCRIPT,
        bgrewriteaof,
        "Asynchronously rewrite the append-only file",
        "1.0.0",
    ),
    cmd(
        "save",
        1,
        ADMIN | NOSCRIPT | NO_MULTI,
        save,
        "Synchronously save the dataset to disk",
        "1.0.0",
    ),
    cmd(
        "bgsave",
        -1,
        ADMIN | NOSCRIPT,
        bgsave,
        "Asynchronously save the dataset to disk",
        "1.0.0",
    ),
];

fn bgrewriteaof(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    match journal::request_rewrite(&ctx.server.aof) {
        RewriteStart::Started => ctx
            .out
            .simple(b"Background append only file rewriting started"),
        RewriteStart::InProgress => {
            return Err(CmdError::err(
                "Background append only file rewriting already in progress",
            ))
        }
    }
    Ok(())
}

fn bgsave(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let schedule = match a.len() {
        1 => false,
        2 if super::args::is(a[1], "schedule") => true,
        _ => return Err(CmdError::Syntax),
    };
    if ctx.server.aof.rewriting()
        || journal::request_rewrite(&ctx.server.aof) == RewriteStart::InProgress
    {
        if schedule {
            journal::schedule_rewrite(&ctx.server.aof);
            ctx.out.simple(b"Background saving scheduled");
            return Ok(());
        }
        return Err(CmdError::err(
            "Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.",
        ));
    }
    ctx.out.simple(b"Background saving started");
    Ok(())
}

fn save(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    // SAVE holds no shard lock; the rewrite thread needs the worker free
    // of nothing else, so waiting here only holds up this client.
    let server = ctx.server;
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    let ok = if multi_thread {
        tokio::task::block_in_place(|| journal::save_blocking(&server.aof))
    } else {
        journal::save_blocking(&server.aof)
    };
    if !ok {
        return Err(CmdError::line("ERR"));
    }
    ctx.out.ok();
    Ok(())
}
