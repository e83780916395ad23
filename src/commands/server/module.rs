//! MODULE: Rostrum loads no Redis modules (they are C libraries built
//! against redis-server's internals). MODULE LIST answers the truth, an
//! empty list, so that clients and tools that look for modules at connect
//! time (RedisInsight, redis-om, the client libraries' `module_list`) go
//! on; MODULE LOAD and LOADEX are refused with Redis's error for a module
//! that failed to load, and say why in the log; UNLOAD finds no module.
//! LOAD, LOADEX and UNLOAD are protected by `enable-module-command`, as in
//! Redis 7.0 (checked by the dispatcher, `commands::admit`).

use super::super::args::text;
use super::super::table::{flags::*, CommandSpec};
use super::super::Ctx;
use super::srv;
use crate::error::{CmdError, CmdResult};

const ADMIN_FLAGS: u32 = ADMIN | NOSCRIPT;

/// MODULE's subcommands.
pub const SUBCOMMANDS: &[CommandSpec] = &[
    srv(
        "list",
        2,
        ADMIN_FLAGS,
        list,
        "List all modules loaded by the server",
        "4.0.0",
        "O(N) where N is the number of loaded modules.",
    ),
    srv(
        "load",
        -3,
        ADMIN_FLAGS,
        load,
        "Load a module",
        "4.0.0",
        "O(1)",
    ),
    srv(
        "loadex",
        -3,
        ADMIN_FLAGS,
        load,
        "Load a module with extended parameters",
        "7.0.0",
        "O(1)",
    ),
    srv(
        "unload",
        3,
        ADMIN_FLAGS,
        unload,
        "Unload a module",
        "4.0.0",
        "O(1)",
    ),
    srv(
        "help",
        2,
        LOADING | STALE,
        help,
        "Show helpful text about the different subcommands",
        "5.0.0",
        "O(1)",
    ),
];

/// No module is loaded.
fn list(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.array(0);
    Ok(())
}

/// MODULE LOAD and LOADEX: refused, as redis-server refuses a library it
/// cannot load (its reason in the log).
fn load(_ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    tracing::warn!(
        path = %text(a[2]),
        "MODULE {}: Rostrum does not load Redis modules",
        text(a[1]).to_uppercase()
    );
    Err(CmdError::err(
        "Error loading the extension. Please check the server logs.",
    ))
}

fn unload(_ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    Err(CmdError::err(
        "Error unloading module: no such module with that name",
    ))
}

fn help(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.help(
        "MODULE",
        &[
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
        ],
    );
    Ok(())
}
