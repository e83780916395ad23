//! Generic key commands: DEL, EXISTS, TYPE, EXPIRE and the rest.

use super::table::{flags::*, CommandSpec, KeySpec};
use super::Ctx;
use crate::error::CmdResult;

const ALL_ARGS: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 1,
};

const fn generic(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: super::table::Handler,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        group: "generic",
        summary,
        ..CommandSpec::new(name, arity, flags, keys, handler)
    }
}

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    generic("del", -2, WRITE, ALL_ARGS, del, "Delete a key"),
    generic(
        "exists",
        -2,
        READONLY | FAST,
        ALL_ARGS,
        exists,
        "Determine if a key exists",
    ),
];

fn del(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let mut n = 0;
    for k in &a[1..] {
        if ctx.keys.remove(k)?.is_some() {
            n += 1;
        }
    }
    ctx.out.int(n);
    Ok(())
}

fn exists(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let mut n = 0;
    for k in &a[1..] {
        if ctx.keys.exists(k)? {
            n += 1;
        }
    }
    ctx.out.int(n);
    Ok(())
}
