//! Commands that only read one sorted set: ZCARD, ZSCORE, ZMSCORE, ZRANK,
//! ZREVRANK, ZCOUNT, ZLEXCOUNT, ZRANDMEMBER and ZSCAN.

use rand::seq::index;
use rand::Rng;

use super::{args, bulk_score, long, range_error, read_zset, Ctx, ScoredReply};
use crate::commands::set::MAX_RANDOM_REPEATS;
use crate::engine::glob;
use crate::engine::zset::{RangeByLex, RangeByScore, ZSet};
use crate::engine::Value;
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;

/// `ZCARD key`
pub(super) fn zcard(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let n = read_zset(&mut ctx.keys, a[1])?.map_or(0, |z| z.len());
    ctx.out.int(n as i64);
    Ok(())
}

/// `ZSCORE key member`
pub(super) fn zscore(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    match read_zset(&mut ctx.keys, a[1])?.and_then(|z| z.score(a[2])) {
        Some(s) => ctx.out.double(s),
        None => ctx.out.null(),
    }
    Ok(())
}

/// `ZMSCORE key member [member ...]`
pub(super) fn zmscore(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let z = read_zset(&mut ctx.keys, a[1])?;
    ctx.out.array(a.len() - 2);
    for m in &a[2..] {
        match z.and_then(|z| z.score(m)) {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

fn rank_generic(ctx: &mut Ctx, a: &[&[u8]], reverse: bool) -> CmdResult {
    match read_zset(&mut ctx.keys, a[1])?.and_then(|z| z.rank(a[2], reverse)) {
        Some((rank, _)) => ctx.out.int(rank as i64),
        None => ctx.out.null(),
    }
    Ok(())
}

/// `ZRANK key member` (Redis 7.0 has no WITHSCORE option yet).
pub(super) fn zrank(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    rank_generic(ctx, a, false)
}

/// `ZREVRANK key member`
pub(super) fn zrevrank(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    rank_generic(ctx, a, true)
}

/// Answers a run of pipelined calls on one key holding a sorted set: `find`
/// gives each member's answer at once, `reply` writes one (absent members
/// get a null). False when the key holds no sorted set, so that the calls
/// run one at a time (and answer null or WRONGTYPE as usual).
fn answer_run<T>(
    ctx: &mut Ctx,
    key: &[u8],
    members: &[&[u8]],
    find: impl FnOnce(&ZSet, &mut Vec<Option<T>>),
    reply: impl Fn(&mut Reply, T),
) -> bool {
    let Some(Value::ZSet(z)) = ctx.keys.value_read_by(key, members.len()) else {
        return false;
    };
    let mut found = Vec::with_capacity(members.len());
    find(z, &mut found);
    for f in found {
        match f {
            Some(v) => reply(ctx.out, v),
            None => ctx.out.null(),
        }
    }
    true
}

/// ZRANK or ZREVRANK for a run of calls on one key: the ranks are found
/// together (`ZSet::ranks`).
fn rank_run(ctx: &mut Ctx, key: &[u8], members: &[&[u8]], reverse: bool) -> bool {
    let find = |z: &ZSet, out: &mut Vec<_>| z.ranks(members, reverse, out);
    answer_run(ctx, key, members, find, |o, (r, _)| o.int(r as i64))
}

/// [`zrank`] for a run of calls on one key.
pub(super) fn zrank_run(ctx: &mut Ctx, key: &[u8], members: &[&[u8]]) -> bool {
    rank_run(ctx, key, members, false)
}

/// [`zrevrank`] for a run of calls on one key.
pub(super) fn zrevrank_run(ctx: &mut Ctx, key: &[u8], members: &[&[u8]]) -> bool {
    rank_run(ctx, key, members, true)
}

/// [`zscore`] for a run of calls on one key: the lookups' misses overlap
/// (`ZSet::scores`).
pub(super) fn zscore_run(ctx: &mut Ctx, key: &[u8], members: &[&[u8]]) -> bool {
    answer_run(
        ctx,
        key,
        members,
        |z, out| z.scores(members, out),
        |o, s| o.double(s),
    )
}

/// `ZCOUNT key min max`
pub(super) fn zcount(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let range = RangeByScore::parse(a[2], a[3]).map_err(range_error)?;
    let n = read_zset(&mut ctx.keys, a[1])?.map_or(0, |z| z.count_by_score(&range));
    ctx.out.int(n as i64);
    Ok(())
}

/// `ZLEXCOUNT key min max`
pub(super) fn zlexcount(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let range = RangeByLex::parse(a[2], a[3]).map_err(range_error)?;
    let n = read_zset(&mut ctx.keys, a[1])?.map_or(0, |z| z.count_by_lex(&range));
    ctx.out.int(n as i64);
    Ok(())
}

/// `ZRANDMEMBER key [count [WITHSCORES]]`
pub(super) fn zrandmember(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let Some(&count_arg) = a.get(2) else {
        match read_zset(&mut ctx.keys, a[1])?.and_then(|z| z.random_member(&mut rand::rng())) {
            Some((m, _)) => ctx.out.bulk(m),
            None => ctx.out.null(),
        }
        return Ok(());
    };
    let count = long(count_arg)?;
    if count == i64::MIN {
        return Err(CmdError::line(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    let withscores = match a.get(3) {
        None => false,
        Some(w) if a.len() == 4 && args::is(w, "withscores") => {
            if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
                return Err(CmdError::line("ERR value is out of range"));
            }
            true
        }
        Some(_) => return Err(CmdError::Syntax),
    };
    // Redis would try to send any number of repeats (and fill the output
    // buffer until the client is dropped); Rostrum refuses huge ones.
    if count < 0 && count.unsigned_abs() > MAX_RANDOM_REPEATS {
        return Err(CmdError::line("ERR value is out of range"));
    }
    let Some(z) = read_zset(&mut ctx.keys, a[1])? else {
        ctx.out.array(0);
        return Ok(());
    };
    let rng = &mut rand::rng();
    let len = z.len();
    if count == 0 {
        ctx.out.array(0);
    } else if count < 0 || count == 1 {
        // Independent picks, repeats allowed.
        let n = count.unsigned_abs() as usize;
        let reply = ScoredReply::begin(ctx.out, n, withscores);
        if z.is_listpack() {
            // A listpack is walked from its start to find a rank: read it
            // once (at most a few hundred entries) instead.
            let entries: Vec<(&[u8], f64)> = z.iter().collect();
            for _ in 0..n {
                if let Some(&(m, s)) = entries.get(rng.random_range(0..len)) {
                    reply.entry(ctx.out, m, s);
                }
            }
        } else {
            for _ in 0..n {
                if let Some((m, s)) = z.random_member(rng) {
                    reply.entry(ctx.out, m, s);
                }
            }
        }
    } else if count as u64 >= len as u64 {
        // The whole set, highest first (Redis walks its set iterator from
        // the tail).
        let reply = ScoredReply::begin(ctx.out, len, withscores);
        reply.entries(ctx.out, z.range_by_rank(0, len - 1, true));
    } else {
        distinct_sample(ctx.out, z, count as usize, withscores);
    }
    Ok(())
}

/// `count` distinct members (fewer than the set has) chosen uniformly.
fn distinct_sample(out: &mut Reply, z: &ZSet, count: usize, withscores: bool) {
    let mut ranks = index::sample(&mut rand::rng(), z.len(), count).into_vec();
    ranks.sort_unstable();
    let reply = ScoredReply::begin(out, ranks.len(), withscores);
    if z.is_listpack() {
        // One walk picks every chosen rank.
        let mut wanted = ranks.iter().peekable();
        for (i, (m, s)) in z.iter().enumerate() {
            if wanted.next_if(|&&r| r == i).is_some() {
                reply.entry(out, m, s);
            }
        }
    } else {
        for r in ranks {
            if let Some((m, s)) = z.get_by_rank(r, false) {
                reply.entry(out, m, s);
            }
        }
    }
}

/// `ZSCAN key cursor [MATCH pattern] [COUNT count]`
pub(super) fn zscan(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let cursor = args::scan_cursor(a[2]).ok_or_else(|| CmdError::line("ERR invalid cursor"))?;
    let Some(z) = read_zset(&mut ctx.keys, a[1])? else {
        ctx.out.array(2);
        ctx.out.bulk(b"0");
        ctx.out.array(0);
        return Ok(());
    };
    let args::ScanOptions { count, pattern, .. } = args::scan_options(&a[3..], false)?;
    // The engine lends members only inside the callback: write the pairs
    // to a side buffer, then the header with their count.
    let mut body = Reply::new(ctx.out.resp3);
    let mut found = 0usize;
    let next = z.scan(cursor, count, |m, s| {
        if pattern.is_none_or(|p| glob::matches(p, m, false)) {
            body.bulk(m);
            bulk_score(&mut body, s);
            found += 1;
        }
    });
    ctx.out.array(2);
    ctx.out.bulk(itoa::Buffer::new().format(next).as_bytes());
    ctx.out.array(found * 2);
    ctx.out.raw(&body.buf);
    Ok(())
}
