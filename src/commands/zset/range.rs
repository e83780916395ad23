//! ZRANGE in all its forms (by rank, score or lex; forward or REV; LIMIT;
//! WITHSCORES), the older commands that are fixed forms of it (ZREVRANGE,
//! ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX), and
//! ZRANGESTORE. One parser serves all of them, as Redis's
//! `zrangeGenericCommand` does, so they share every error line.

use super::{args, limits, long, range_error, rank_range, read_zset, store, Ctx, ScoredReply};
use crate::engine::zset::{Range, RangeByLex, RangeByScore, ZSet};
use crate::error::{CmdError, CmdResult};

/// What the range is over; `Auto` until a BYSCORE / BYLEX word (ZRANGE).
#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Auto,
    Rank,
    Score,
    Lex,
}

/// The walk's direction; `Auto` until a REV word (ZRANGE).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Auto,
    Forward,
    Reverse,
}

/// A parsed range of any kind.
enum Bounds {
    Rank(i64, i64),
    Score(RangeByScore),
    Lex(RangeByLex),
}

/// A parsed ZRANGE-family request.
struct Request {
    bounds: Bounds,
    reverse: bool,
    withscores: bool,
    /// LIMIT offset (0 when absent).
    offset: i64,
    /// LIMIT count (-1 when absent: no limit).
    limit: i64,
}

/// Parses the arguments after the source key at `key_idx`, with Redis's
/// checks in Redis's order.
fn parse(
    a: &[&[u8]],
    key_idx: usize,
    store: bool,
    mut by: By,
    mut dir: Direction,
) -> Result<Request, CmdError> {
    let mut withscores = false;
    let mut offset = 0;
    let mut limit = -1;
    let mut j = key_idx + 3;
    while j < a.len() {
        let arg = a[j];
        let left = a.len() - j - 1;
        if !store && args::is(arg, "withscores") {
            withscores = true;
        } else if args::is(arg, "limit") && left >= 2 {
            offset = long(a[j + 1])?;
            limit = long(a[j + 2])?;
            j += 2;
        } else if dir == Direction::Auto && args::is(arg, "rev") {
            dir = Direction::Reverse;
        } else if by == By::Auto && args::is(arg, "bylex") {
            by = By::Lex;
        } else if by == By::Auto && args::is(arg, "byscore") {
            by = By::Score;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let reverse = dir == Direction::Reverse;
    if by == By::Auto {
        by = By::Rank;
    }
    if limit != -1 && by == By::Rank {
        return Err(CmdError::line(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && by == By::Lex {
        return Err(CmdError::line(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let (mut min, mut max) = (a[key_idx + 1], a[key_idx + 2]);
    // Reversed score and lex ranges are written max first.
    if reverse && by != By::Rank {
        std::mem::swap(&mut min, &mut max);
    }
    let bounds = match by {
        By::Score => Bounds::Score(RangeByScore::parse(min, max).map_err(range_error)?),
        By::Lex => Bounds::Lex(RangeByLex::parse(min, max).map_err(range_error)?),
        _ => Bounds::Rank(long(min)?, long(max)?),
    };
    Ok(Request {
        bounds,
        reverse,
        withscores,
        offset,
        limit,
    })
}

impl Request {
    /// The members the request selects from `z`, in reply order, with the
    /// number of them.
    fn select<'a>(&'a self, z: &'a ZSet) -> (Range<'a>, usize) {
        // A negative LIMIT offset selects nothing; a negative count, no
        // limit (Redis's counting loops behave so).
        let offset = usize::try_from(self.offset);
        let limit = usize::try_from(self.limit).ok();
        let range = match (&self.bounds, offset) {
            (Bounds::Rank(start, end), _) => {
                return match rank_range(*start, *end, z.len()) {
                    Some((s, e)) => (z.range_by_rank(s, e, self.reverse), e - s + 1),
                    None => (z.range_by_rank(1, 0, false), 0),
                };
            }
            (_, Err(_)) => return (z.range_by_rank(1, 0, false), 0),
            (Bounds::Score(r), Ok(o)) => z.range_by_score(r, self.reverse, o, limit),
            (Bounds::Lex(r), Ok(o)) => z.range_by_lex(r, self.reverse, o, limit),
        };
        let n = range.clone().count();
        (range, n)
    }
}

fn zrange_generic(ctx: &mut Ctx, a: &[&[u8]], by: By, dir: Direction) -> CmdResult {
    let req = parse(a, 1, false, by, dir)?;
    let Some(z) = read_zset(&mut ctx.keys, a[1])? else {
        ctx.out.array(0);
        return Ok(());
    };
    let (range, n) = req.select(z);
    let reply = ScoredReply::begin(ctx.out, n, req.withscores);
    reply.entries(ctx.out, range);
    Ok(())
}

/// `ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count]
/// [WITHSCORES]`
pub(super) fn zrange(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, a, By::Auto, Direction::Auto)
}

/// `ZREVRANGE key start stop [WITHSCORES]`
pub(super) fn zrevrange(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, a, By::Rank, Direction::Reverse)
}

/// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`
pub(super) fn zrangebyscore(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, a, By::Score, Direction::Forward)
}

/// `ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]`
pub(super) fn zrevrangebyscore(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, a, By::Score, Direction::Reverse)
}

/// `ZRANGEBYLEX key min max [LIMIT offset count]`
pub(super) fn zrangebylex(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, a, By::Lex, Direction::Forward)
}

/// `ZREVRANGEBYLEX key max min [LIMIT offset count]`
pub(super) fn zrevrangebylex(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, a, By::Lex, Direction::Reverse)
}

/// `ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]`
pub(super) fn zrangestore(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let req = parse(a, 2, true, By::Auto, Direction::Auto)?;
    let limits = limits(ctx);
    let mut result = ZSet::new();
    if let Some(z) = read_zset(&mut ctx.keys, a[2])? {
        let (range, _) = req.select(z);
        for (m, s) in range {
            result.insert(m, s, limits);
        }
    }
    store(ctx, a[1], result, "zrangestore")
}
