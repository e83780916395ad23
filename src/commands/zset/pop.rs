//! Popping the lowest or highest members: ZPOPMIN, ZPOPMAX, ZMPOP, and the
//! blocking BZPOPMIN, BZPOPMAX, BZMPOP (which wait on empty keys through
//! `Ctx::block_on` and are run again when a key changes).

use std::time::Duration;

use super::args::MPop;
use super::{after_removal, args, write_zset, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::state::ctx::found_when_blocked;

/// Which end of the set a pop takes from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Min,
    Max,
}

/// The reply shape of a pop, as Redis 7.0 picks it per command.
#[derive(Clone, Copy)]
struct Shape {
    /// The key comes first (BZPOP*, ZMPOP, BZMPOP).
    with_key: bool,
    /// Members as `[member, score]` pairs (ZMPOP and BZMPOP always; ZPOP*
    /// with a count in RESP3) instead of a flat list.
    nested: bool,
    /// No key to pop from replies a null array (ZMPOP) instead of an empty
    /// one (ZPOP*).
    nil_when_empty: bool,
}

/// Pops from the first existing key of `keys` (Redis's
/// `genericZpopCommand`): up to `count` members (`None`: the one-member form
/// without a count).
fn pop_first(
    ctx: &mut Ctx,
    keys: &[&[u8]],
    end: End,
    count: Option<usize>,
    shape: Shape,
) -> CmdResult {
    let mut chosen = None;
    for &key in keys {
        if write_zset(&mut ctx.keys, key)?.is_some() {
            chosen = Some(key);
            break;
        }
    }
    let Some(key) = chosen else {
        if shape.nil_when_empty {
            ctx.out.null_array();
        } else {
            ctx.out.array(0);
        }
        return Ok(());
    };
    if count == Some(0) {
        ctx.out.array(0);
        return Ok(());
    }
    let Some(z) = write_zset(&mut ctx.keys, key)? else {
        ctx.out.array(0);
        return Ok(());
    };
    let n = count.unwrap_or(1).min(z.len());
    let out = &mut *ctx.out;
    match (shape.with_key, shape.nested) {
        (false, false) => out.array(2 * n),
        (false, true) => out.array(n),
        (true, false) => {
            out.array(2 * n + 1);
            out.bulk(key);
        }
        (true, true) => {
            out.array(2);
            out.bulk(key);
            out.array(n);
        }
    }
    let emit = |m: &[u8], s: f64| {
        if shape.nested {
            out.array(2);
        }
        out.bulk(m);
        out.double(s);
    };
    match end {
        End::Min => z.pop_min(n, emit),
        End::Max => z.pop_max(n, emit),
    };
    let emptied = z.is_empty();
    let event = match end {
        End::Min => "zpopmin",
        End::Max => "zpopmax",
    };
    after_removal(&mut ctx.keys, key, emptied, event)
}

fn zpop(ctx: &mut Ctx, a: &[&[u8]], end: End) -> CmdResult {
    if a.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match a.get(2) {
        None => None,
        Some(arg) => {
            let n = args::int(arg)
                .ok()
                .filter(|&n| n >= 0)
                .ok_or_else(|| CmdError::line("ERR value is out of range, must be positive"))?;
            Some(usize::try_from(n).unwrap_or(usize::MAX))
        }
    };
    let shape = Shape {
        with_key: false,
        nested: ctx.out.resp3 && count.is_some(),
        nil_when_empty: false,
    };
    pop_first(ctx, &a[1..2], end, count, shape)
}

/// `ZPOPMIN key [count]`
pub(super) fn zpopmin(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    zpop(ctx, a, End::Min)
}

/// `ZPOPMAX key [count]`
pub(super) fn zpopmax(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    zpop(ctx, a, End::Max)
}

/// Serves a blocking pop (Redis's `blockingGenericZpopCommand`): pops from
/// the first key holding a set, or blocks the client on `keys`. Where
/// blocking is not allowed (MULTI, scripts) it replies as on timeout.
fn blocking_pop(
    ctx: &mut Ctx,
    a: &[&[u8]],
    keys: &[&[u8]],
    timeout: Option<Duration>,
    end: End,
    count: Option<usize>,
    shape: Shape,
) -> CmdResult {
    let rerun = ctx.client.rerun;
    for (i, &key) in keys.iter().enumerate() {
        let mine = ctx.may_serve(key);
        let found = found_when_blocked(rerun, write_zset(&mut ctx.keys, key))?;
        if found.is_some_and(|z| !z.is_empty()) && mine {
            return pop_first(ctx, &keys[i..=i], end, count, shape);
        }
    }
    if !ctx.block_on(keys, timeout, a) {
        ctx.out.null_array();
    }
    Ok(())
}

fn bzpop(ctx: &mut Ctx, a: &[&[u8]], end: End) -> CmdResult {
    let last = a.len() - 1;
    let timeout = args::timeout(a[last])?;
    let shape = Shape {
        with_key: true,
        nested: false,
        nil_when_empty: false,
    };
    blocking_pop(ctx, a, &a[1..last], timeout, end, None, shape)
}

/// `BZPOPMIN key [key ...] timeout`
pub(super) fn bzpopmin(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    bzpop(ctx, a, End::Min)
}

/// `BZPOPMAX key [key ...] timeout`
pub(super) fn bzpopmax(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    bzpop(ctx, a, End::Max)
}

/// Parses ZMPOP / BZMPOP arguments (`numkeys key... MIN|MAX [COUNT
/// count]`) from the numkeys at `numkeys_idx`.
fn parse_mpop<'a>(a: &'a [&'a [u8]], numkeys_idx: usize) -> Result<MPop<'a, End>, CmdError> {
    args::mpop(a, numkeys_idx, |w| {
        if args::is(w, "min") {
            Ok(End::Min)
        } else if args::is(w, "max") {
            Ok(End::Max)
        } else {
            Err(CmdError::Syntax)
        }
    })
}

const MPOP_SHAPE: Shape = Shape {
    with_key: true,
    nested: true,
    nil_when_empty: true,
};

/// `ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]`
pub(super) fn zmpop(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let p = parse_mpop(a, 1)?;
    pop_first(ctx, p.keys, p.end, Some(p.count), MPOP_SHAPE)
}

/// `BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]`
pub(super) fn bzmpop(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let p = parse_mpop(a, 2)?;
    let timeout = args::timeout(a[1])?;
    blocking_pop(ctx, a, p.keys, timeout, p.end, Some(p.count), MPOP_SHAPE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpop_arguments() {
        let a: Vec<&[u8]> = vec![b"zmpop", b"2", b"a", b"b", b"max", b"COUNT", b"3"];
        let p = parse_mpop(&a, 1).unwrap();
        assert_eq!(p.keys, &a[2..4]);
        assert!(p.end == End::Max && p.count == 3);
        let numkeys = CmdError::line("ERR numkeys should be greater than 0");
        for n in [&b"0"[..], b"-1", b"x"] {
            let a: Vec<&[u8]> = vec![b"zmpop", n, b"a", b"min"];
            assert_eq!(parse_mpop(&a, 1).err(), Some(numkeys.clone()));
        }
        let a: Vec<&[u8]> = vec![b"zmpop", b"9223372036854775807", b"a", b"min"];
        assert_eq!(parse_mpop(&a, 1).err(), Some(CmdError::Syntax));
        let a: Vec<&[u8]> = vec![b"zmpop", b"1", b"a", b"min", b"count", b"1", b"count", b"1"];
        assert_eq!(parse_mpop(&a, 1).err(), Some(CmdError::Syntax));
    }
}
