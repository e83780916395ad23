//! Commands that add, change or remove members: ZADD, ZINCRBY, ZREM and the
//! ZREMRANGEBY* family.

use smallvec::SmallVec;

use super::{after_removal, args, limits, long, range_error, rank_range, write_zset, Ctx, Value};
use crate::engine::zset::{RangeByLex, RangeByScore, ZAddFlags, ZSet, ZSetLimits};
use crate::error::{CmdError, CmdResult};
use crate::state::notify::Class;

/// ZADD's options as written, CH included.
#[derive(Default)]
struct ZAddOptions {
    flags: ZAddFlags,
    ch: bool,
}

/// What a run of ZADD over its pairs did.
#[derive(Default)]
struct ZAddTally {
    added: usize,
    updated: usize,
    /// Pairs that were not skipped by NX / XX / GT / LT.
    processed: usize,
    /// The last member's score (ZADD INCR's reply).
    score: f64,
}

/// Applies the score / member pairs to `z`, in order, as Redis's `zsetAdd`
/// loop does.
fn apply_pairs(
    z: &mut ZSet,
    pairs: &[(f64, &[u8])],
    flags: ZAddFlags,
    limits: ZSetLimits,
) -> Result<ZAddTally, CmdError> {
    let mut t = ZAddTally::default();
    for &(score, member) in pairs {
        let outcome = z
            .zadd(member, score, flags, limits)
            .map_err(|_| CmdError::line("ERR resulting score is not a number (NaN)"))?;
        t.added += outcome.is_added() as usize;
        t.updated += (outcome.is_changed() && !outcome.is_added()) as usize;
        if let Some(s) = outcome.score() {
            t.processed += 1;
            t.score = s;
        }
    }
    Ok(t)
}

/// ZADD and ZINCRBY (Redis's `zaddGenericCommand`): options, then pairs.
fn zadd_generic(ctx: &mut Ctx, a: &[&[u8]], mut opts: ZAddOptions) -> CmdResult {
    let key = a[1];
    let mut idx = 2;
    while let Some(&opt) = a.get(idx) {
        let f = &mut opts.flags;
        if args::is(opt, "nx") {
            f.nx = true;
        } else if args::is(opt, "xx") {
            f.xx = true;
        } else if args::is(opt, "ch") {
            opts.ch = true;
        } else if args::is(opt, "incr") {
            f.incr = true;
        } else if args::is(opt, "gt") {
            f.gt = true;
        } else if args::is(opt, "lt") {
            f.lt = true;
        } else {
            break;
        }
        idx += 1;
    }
    let rest = &a[idx..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let f = opts.flags;
    if f.nx && f.xx {
        return Err(CmdError::line(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if [f.gt, f.lt, f.nx].iter().filter(|&&b| b).count() > 1 {
        return Err(CmdError::line(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && rest.len() > 2 {
        return Err(CmdError::line(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    // Every score is checked before the key is looked at, as in Redis.
    let mut pairs: SmallVec<[(f64, &[u8]); 8]> = SmallVec::with_capacity(rest.len() / 2);
    for pair in rest.chunks_exact(2) {
        pairs.push((args::float(pair[0])?, pair[1]));
    }
    let limits = limits(ctx);
    let tally = match write_zset(&mut ctx.keys, key)? {
        Some(z) => {
            let t = apply_pairs(z, &pairs, f, limits)?;
            if t.added + t.updated > 0 {
                ctx.keys.modified(key)?;
            }
            t
        }
        // No key and XX: nothing to do.
        None if f.xx => ZAddTally::default(),
        None => {
            let mut z = ZSet::new();
            let t = apply_pairs(&mut z, &pairs, f, limits)?;
            if !z.is_empty() {
                ctx.keys.set(key, Value::ZSet(z), false)?;
            }
            t
        }
    };
    if tally.added + tally.updated > 0 {
        let event = if f.incr { "zincr" } else { "zadd" };
        ctx.keys.notify(Class::ZSET, event, key);
    }
    if f.incr {
        if tally.processed > 0 {
            ctx.out.double(tally.score);
        } else {
            ctx.out.null();
        }
    } else {
        let n = if opts.ch {
            tally.added + tally.updated
        } else {
            tally.added
        };
        ctx.out.int(n as i64);
    }
    Ok(())
}

/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]`
pub(super) fn zadd(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    zadd_generic(ctx, a, ZAddOptions::default())
}

/// `ZINCRBY key increment member`: ZADD INCR (so, as in Redis, an option
/// word in the increment's place is read as an option and leaves an odd
/// number of arguments: a syntax error).
pub(super) fn zincrby(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let opts = ZAddOptions {
        flags: ZAddFlags {
            incr: true,
            ..ZAddFlags::default()
        },
        ch: false,
    };
    zadd_generic(ctx, a, opts)
}

/// Reads ahead for a run of pipelined `ZADD key score member` calls (or,
/// with `incr`, `ZINCRBY key increment member`) on one key holding a big
/// sorted set: the calls then run one at a time, their memory in cache
/// (`ZSet::prepare_scores`). Calls whose score is not a number are left
/// out; they fail when they run.
fn prepare_run(ctx: &mut Ctx, key: &[u8], rest: &[&[u8]], incr: bool) {
    let Some(Value::ZSet(z)) = ctx.keys.value_read_by(key, 0) else {
        return;
    };
    let calls: SmallVec<[(&[u8], f64); 16]> = rest
        .chunks_exact(2)
        .filter_map(|c| Some((c[1], args::float(c[0]).ok()?)))
        .collect();
    z.prepare_scores(&calls, incr);
}

/// [`zadd`] read ahead for a run of calls on one key.
pub(super) fn zadd_prepare(ctx: &mut Ctx, key: &[u8], rest: &[&[u8]]) {
    prepare_run(ctx, key, rest, false);
}

/// [`zincrby`] read ahead for a run of calls on one key.
pub(super) fn zincrby_prepare(ctx: &mut Ctx, key: &[u8], rest: &[&[u8]]) {
    prepare_run(ctx, key, rest, true);
}

/// `ZREM key member [member ...]`
pub(super) fn zrem(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let key = a[1];
    let Some(z) = write_zset(&mut ctx.keys, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let mut deleted = 0;
    for m in &a[2..] {
        deleted += z.remove(m) as i64;
        if z.is_empty() {
            break;
        }
    }
    let emptied = z.is_empty();
    if deleted > 0 {
        after_removal(&mut ctx.keys, key, emptied, "zrem")?;
    }
    ctx.out.int(deleted);
    Ok(())
}

/// The range a ZREMRANGEBY* command removes, parsed before the key is read.
enum RemoveRange {
    Rank(i64, i64),
    Score(RangeByScore),
    Lex(RangeByLex),
}

fn zremrange(ctx: &mut Ctx, key: &[u8], range: RemoveRange) -> CmdResult {
    let Some(z) = write_zset(&mut ctx.keys, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let deleted = match &range {
        RemoveRange::Rank(start, end) => match rank_range(*start, *end, z.len()) {
            Some((s, e)) => z.remove_range_by_rank(s, e),
            None => 0,
        },
        RemoveRange::Score(r) => z.remove_range_by_score(r),
        RemoveRange::Lex(r) => z.remove_range_by_lex(r),
    };
    let emptied = z.is_empty();
    if deleted > 0 {
        let event = match range {
            RemoveRange::Rank(..) => "zremrangebyrank",
            RemoveRange::Score(_) => "zremrangebyscore",
            RemoveRange::Lex(_) => "zremrangebylex",
        };
        after_removal(&mut ctx.keys, key, emptied, event)?;
    }
    ctx.out.int(deleted as i64);
    Ok(())
}

/// `ZREMRANGEBYRANK key start stop`
pub(super) fn zremrangebyrank(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let range = RemoveRange::Rank(long(a[2])?, long(a[3])?);
    zremrange(ctx, a[1], range)
}

/// `ZREMRANGEBYSCORE key min max`
pub(super) fn zremrangebyscore(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let range = RangeByScore::parse(a[2], a[3]).map_err(range_error)?;
    zremrange(ctx, a[1], RemoveRange::Score(range))
}

/// `ZREMRANGEBYLEX key min max`
pub(super) fn zremrangebylex(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let range = RangeByLex::parse(a[2], a[3]).map_err(range_error)?;
    zremrange(ctx, a[1], RemoveRange::Lex(range))
}
