//! String commands: GET, SET and the rest of the family.

use super::table::{flags::*, CommandSpec, KeySpec};
use super::Ctx;
use crate::engine::string::StrValue;
use crate::engine::Value;
use crate::error::{CmdError, CmdResult};

const KEY1: KeySpec = KeySpec::Range {
    first: 1,
    last: 1,
    step: 1,
};

const fn string(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: super::table::Handler,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        group: "string",
        summary,
        ..CommandSpec::new(name, arity, flags, keys, handler)
    }
}

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    string(
        "get",
        2,
        READONLY | FAST,
        KEY1,
        get,
        "Get the value of a key",
    ),
    string(
        "set",
        -3,
        WRITE | DENYOOM,
        KEY1,
        set,
        "Set the string value of a key",
    ),
];

/// The string under `key`, `WRONGTYPE` if another type.
pub fn get_str<'k>(
    keys: &'k mut super::Keys<'_>,
    key: &[u8],
) -> Result<Option<&'k StrValue>, CmdError> {
    match keys.value(key)? {
        None => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s)),
        Some(_) => Err(CmdError::WrongType),
    }
}

fn get(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    match get_str(&mut ctx.keys, a[1])? {
        Some(s) => ctx.out.bulk(&s.as_bytes()),
        None => ctx.out.null(),
    }
    Ok(())
}

fn set(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if a.len() != 3 {
        return Err(CmdError::Syntax);
    }
    ctx.keys
        .set(a[1], Value::Str(StrValue::from_bytes(a[2])), false)?;
    ctx.out.ok();
    Ok(())
}
