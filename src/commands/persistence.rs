//! Persistence commands: BGREWRITEAOF, SAVE, BGSAVE.
//!
//! SAVE and BGSAVE write an RDB snapshot (`dir`/`dbfilename`) on the
//! snapshot thread (`persistence::rdb`), which also runs AOF rewrites, one
//! at a time as Redis runs one child at a time. SAVE answers once the file
//! is on disk (only the calling client waits; others are served meanwhile)
//! and updates LASTSAVE; BGSAVE starts it and answers at once.

use super::table::{flags::*, CommandSpec, KeySpec};
use super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::state::journal::{self, BgsaveStart, RewriteStart};

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
        RewriteStart::Scheduled => ctx
            .out
            .simple(b"Background append only file rewriting scheduled"),
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
    match journal::request_bgsave(&ctx.server.aof, schedule) {
        BgsaveStart::Started => ctx.out.simple(b"Background saving started"),
        BgsaveStart::Scheduled => ctx.out.simple(b"Background saving scheduled"),
        BgsaveStart::InProgress => {
            return Err(CmdError::err("Background save already in progress"))
        }
        BgsaveStart::RewriteRunning => return Err(CmdError::err(
            "Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.",
        )),
    }
    Ok(())
}

/// Runs `f` (which blocks) off the async worker when on a multi-thread
/// runtime, so the worker's other clients keep being served.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

fn save(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let server = ctx.server;
    if journal::bgsave_in_progress(&server.aof) {
        return Err(CmdError::err("Background save already in progress"));
    }
    // SAVE holds no shard lock: waiting here only holds up this client.
    if !blocking(|| journal::save_blocking(&server.aof)) {
        return Err(CmdError::line("ERR"));
    }
    ctx.out.ok();
    Ok(())
}
