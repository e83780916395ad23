//! Sorted-set commands: every Z* command of Redis 7.0, with its argument
//! rules, error lines and RESP2 / RESP3 reply shapes. The structure itself
//! (encodings, ranks, ranges) lives in `engine::zset`; this family parses
//! arguments, applies them through the engine and writes replies straight
//! from the engine's iterators.
//!
//! - [`write`]: ZADD, ZINCRBY, ZREM, ZREMRANGEBYRANK / SCORE / LEX
//! - [`read`]: ZCARD, ZSCORE, ZMSCORE, ZRANK, ZREVRANK, ZCOUNT, ZLEXCOUNT,
//!   ZRANDMEMBER, ZSCAN
//! - [`range`]: ZRANGE and its older forms (ZREVRANGE, ZRANGEBYSCORE, ...),
//!   ZRANGESTORE
//! - [`pop`]: ZPOPMIN, ZPOPMAX, ZMPOP and the blocking BZPOPMIN, BZPOPMAX,
//!   BZMPOP
//! - [`setops`]: ZUNION, ZINTER, ZDIFF, their STORE forms, ZINTERCARD (plain
//!   sets count as sorted sets whose scores are 1)

mod pop;
mod range;
mod read;
mod setops;
mod write;

use smallvec::SmallVec;

use super::args;
use super::table::{flags::*, CommandSpec, Handler, KeySpec, RunHandler};
use super::{Ctx, Keys};
use crate::engine::zset::{RangeError, ZSet, ZSetLimits};
use crate::engine::Value;
use crate::error::CmdError;
use crate::protocol::number::{format_double, MAX_DOUBLE_CHARS};
use crate::protocol::Reply;
use crate::state::notify::Class;

/// BZPOPMIN / BZPOPMAX: every argument between the name and the timeout.
const KEYS_BEFORE_TIMEOUT: KeySpec = KeySpec::Range {
    first: 1,
    last: -2,
    step: 1,
};

#[allow(clippy::too_many_arguments)]
const fn zset_cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: Handler,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, keys, handler).documented(
        "sorted-set",
        summary,
        since,
        complexity,
    )
}

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    zset_cmd(
        "zadd",
        -4,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        write::zadd,
        "Add one or more members to a sorted set, or update its score if it already exists",
        "1.2.0",
        "O(log(N)) for each item added, where N is the number of elements in the sorted set.",
    )
    .batched(RunHandler::Prepare(write::zadd_prepare)),
    zset_cmd(
        "zincrby",
        4,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        write::zincrby,
        "Increment the score of a member in a sorted set",
        "1.2.0",
        "O(log(N)) where N is the number of elements in the sorted set.",
    )
    .batched(RunHandler::Prepare(write::zincrby_prepare)),
    zset_cmd(
        "zrem",
        -3,
        WRITE | FAST,
        KeySpec::FIRST,
        write::zrem,
        "Remove one or more members from a sorted set",
        "1.2.0",
        "O(M*log(N)) with N being the number of elements in the sorted set and M the number of elements to be removed.",
    ),
    zset_cmd(
        "zremrangebyrank",
        4,
        WRITE,
        KeySpec::FIRST,
        write::zremrangebyrank,
        "Remove all members in a sorted set within the given indexes",
        "2.0.0",
        "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.",
    ),
    zset_cmd(
        "zremrangebyscore",
        4,
        WRITE,
        KeySpec::FIRST,
        write::zremrangebyscore,
        "Remove all members in a sorted set within the given scores",
        "1.2.0",
        "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.",
    ),
    zset_cmd(
        "zremrangebylex",
        4,
        WRITE,
        KeySpec::FIRST,
        write::zremrangebylex,
        "Remove all members in a sorted set between the given lexicographical range",
        "2.8.9",
        "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.",
    ),
    zset_cmd(
        "zcard",
        2,
        READONLY | FAST,
        KeySpec::FIRST,
        read::zcard,
        "Get the number of members in a sorted set",
        "1.2.0",
        "O(1)",
    ),
    zset_cmd(
        "zscore",
        3,
        READONLY | FAST,
        KeySpec::FIRST,
        read::zscore,
        "Get the score associated with the given member in a sorted set",
        "1.2.0",
        "O(1)",
    )
    .batched(RunHandler::Answer(read::zscore_run)),
    zset_cmd(
        "zmscore",
        -3,
        READONLY | FAST,
        KeySpec::FIRST,
        read::zmscore,
        "Get the score associated with the given members in a sorted set",
        "6.2.0",
        "O(N) where N is the number of members being requested.",
    ),
    zset_cmd(
        "zrank",
        3,
        READONLY | FAST,
        KeySpec::FIRST,
        read::zrank,
        "Determine the index of a member in a sorted set",
        "2.0.0",
        "O(log(N))",
    )
    .batched(RunHandler::Answer(read::zrank_run)),
    zset_cmd(
        "zrevrank",
        3,
        READONLY | FAST,
        KeySpec::FIRST,
        read::zrevrank,
        "Determine the index of a member in a sorted set, with scores ordered from high to low",
        "2.0.0",
        "O(log(N))",
    )
    .batched(RunHandler::Answer(read::zrevrank_run)),
    zset_cmd(
        "zcount",
        4,
        READONLY | FAST,
        KeySpec::FIRST,
        read::zcount,
        "Count the members in a sorted set with scores within the given values",
        "2.0.0",
        "O(log(N)) with N being the number of elements in the sorted set.",
    ),
    zset_cmd(
        "zlexcount",
        4,
        READONLY | FAST,
        KeySpec::FIRST,
        read::zlexcount,
        "Count the number of members in a sorted set between a given lexicographical range",
        "2.8.9",
        "O(log(N)) with N being the number of elements in the sorted set.",
    ),
    zset_cmd(
        "zrandmember",
        -2,
        READONLY,
        KeySpec::FIRST,
        read::zrandmember,
        "Get one or multiple random elements from a sorted set",
        "6.2.0",
        "O(N) where N is the number of elements returned",
    ),
    zset_cmd(
        "zscan",
        -3,
        READONLY,
        KeySpec::FIRST,
        read::zscan,
        "Incrementally iterate sorted sets elements and associated scores",
        "2.8.0",
        "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..",
    ),
    zset_cmd(
        "zrange",
        -4,
        READONLY,
        KeySpec::FIRST,
        range::zrange,
        "Return a range of members in a sorted set",
        "1.2.0",
        "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.",
    ),
    zset_cmd(
        "zrangestore",
        -5,
        WRITE | DENYOOM,
        KeySpec::FIRST_TWO,
        range::zrangestore,
        "Store a range of members from sorted set into another key",
        "6.2.0",
        "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements stored into the destination key.",
    ),
    zset_cmd(
        "zrevrange",
        -4,
        READONLY,
        KeySpec::FIRST,
        range::zrevrange,
        "Return a range of members in a sorted set, by index, with scores ordered from high to low",
        "1.2.0",
        "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.",
    ),
    zset_cmd(
        "zrangebyscore",
        -4,
        READONLY,
        KeySpec::FIRST,
        range::zrangebyscore,
        "Return a range of members in a sorted set, by score",
        "1.0.5",
        "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).",
    ),
    zset_cmd(
        "zrevrangebyscore",
        -4,
        READONLY,
        KeySpec::FIRST,
        range::zrevrangebyscore,
        "Return a range of members in a sorted set, by score, with scores ordered from high to low",
        "2.2.0",
        "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).",
    ),
    zset_cmd(
        "zrangebylex",
        -4,
        READONLY,
        KeySpec::FIRST,
        range::zrangebylex,
        "Return a range of members in a sorted set, by lexicographical range",
        "2.8.9",
        "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).",
    ),
    zset_cmd(
        "zrevrangebylex",
        -4,
        READONLY,
        KeySpec::FIRST,
        range::zrevrangebylex,
        "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.",
        "2.8.9",
        "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).",
    ),
    zset_cmd(
        "zpopmin",
        -2,
        WRITE | FAST,
        KeySpec::FIRST,
        pop::zpopmin,
        "Remove and return members with the lowest scores in a sorted set",
        "5.0.0",
        "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.",
    ),
    zset_cmd(
        "zpopmax",
        -2,
        WRITE | FAST,
        KeySpec::FIRST,
        pop::zpopmax,
        "Remove and return members with the highest scores in a sorted set",
        "5.0.0",
        "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.",
    ),
    zset_cmd(
        "zmpop",
        -4,
        WRITE,
        KeySpec::Find(zmpop_keys),
        pop::zmpop,
        "Remove and return members with scores in a sorted set",
        "7.0.0",
        "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.",
    ),
    zset_cmd(
        "bzpopmin",
        -3,
        WRITE | NOSCRIPT | BLOCKING | FAST,
        KEYS_BEFORE_TIMEOUT,
        pop::bzpopmin,
        "Remove and return the member with the lowest score from one or more sorted sets, or block until one is available",
        "5.0.0",
        "O(log(N)) with N being the number of elements in the sorted set.",
    ),
    zset_cmd(
        "bzpopmax",
        -3,
        WRITE | NOSCRIPT | BLOCKING | FAST,
        KEYS_BEFORE_TIMEOUT,
        pop::bzpopmax,
        "Remove and return the member with the highest score from one or more sorted sets, or block until one is available",
        "5.0.0",
        "O(log(N)) with N being the number of elements in the sorted set.",
    ),
    zset_cmd(
        "bzmpop",
        -5,
        WRITE | BLOCKING,
        KeySpec::Find(bzmpop_keys),
        pop::bzmpop,
        "Remove and return members with scores in a sorted set or block until one is available",
        "7.0.0",
        "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.",
    ),
    zset_cmd(
        "zunion",
        -3,
        READONLY,
        KeySpec::Find(numkeys_at_1),
        setops::zunion,
        "Add multiple sorted sets",
        "6.2.0",
        "O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.",
    ),
    zset_cmd(
        "zinter",
        -3,
        READONLY,
        KeySpec::Find(numkeys_at_1),
        setops::zinter,
        "Intersect multiple sorted sets",
        "6.2.0",
        "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.",
    ),
    zset_cmd(
        "zdiff",
        -3,
        READONLY,
        KeySpec::Find(numkeys_at_1),
        setops::zdiff,
        "Subtract multiple sorted sets",
        "6.2.0",
        "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.",
    ),
    zset_cmd(
        "zintercard",
        -3,
        READONLY,
        KeySpec::Find(numkeys_at_1),
        setops::zintercard,
        "Intersect multiple sorted sets and return the cardinality of the result",
        "7.0.0",
        "O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.",
    ),
    zset_cmd(
        "zunionstore",
        -4,
        WRITE | DENYOOM,
        KeySpec::Find(store_keys),
        setops::zunionstore,
        "Add multiple sorted sets and store the resulting sorted set in a new key",
        "2.0.0",
        "O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.",
    ),
    zset_cmd(
        "zinterstore",
        -4,
        WRITE | DENYOOM,
        KeySpec::Find(store_keys),
        setops::zinterstore,
        "Intersect multiple sorted sets and store the resulting sorted set in a new key",
        "2.0.0",
        "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.",
    ),
    zset_cmd(
        "zdiffstore",
        -4,
        WRITE | DENYOOM,
        KeySpec::Find(store_keys),
        setops::zdiffstore,
        "Subtract multiple sorted sets and store the resulting sorted set in a new key",
        "6.2.0",
        "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.",
    ),
];

// ---------------------------------------------------------------------------
// Key positions of the numkeys commands

/// `numkeys` keys right after the count at argument `at` (none when the
/// count is not a positive integer: the handler reports that error before
/// touching any key).
fn numkeys_keys(a: &[&[u8]], at: usize) -> SmallVec<[usize; 4]> {
    match a.get(at).and_then(|n| args::int(n).ok()) {
        Some(n) if n > 0 => (at + 1..a.len())
            .take(usize::try_from(n).unwrap_or(usize::MAX))
            .collect(),
        _ => SmallVec::new(),
    }
}

/// ZUNION, ZINTER, ZDIFF, ZINTERCARD: `numkeys key...`.
fn numkeys_at_1(a: &[&[u8]]) -> SmallVec<[usize; 4]> {
    numkeys_keys(a, 1)
}

/// ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE: `destination numkeys key...`.
fn store_keys(a: &[&[u8]]) -> SmallVec<[usize; 4]> {
    let mut keys = SmallVec::new();
    if a.len() > 1 {
        keys.push(1);
    }
    keys.extend(numkeys_keys(a, 2));
    keys
}

/// ZMPOP: `numkeys key... MIN|MAX [COUNT n]`.
fn zmpop_keys(a: &[&[u8]]) -> SmallVec<[usize; 4]> {
    numkeys_keys(a, 1)
}

/// BZMPOP: `timeout numkeys key... MIN|MAX [COUNT n]`.
fn bzmpop_keys(a: &[&[u8]]) -> SmallVec<[usize; 4]> {
    numkeys_keys(a, 2)
}

// ---------------------------------------------------------------------------
// Shared helpers

/// The encoding limits, read once per command so CONFIG SET applies at once
/// (the config lock is released before the command works).
fn limits(ctx: &Ctx) -> ZSetLimits {
    let config = ctx.server.config.read();
    ZSetLimits::new(
        config.zset_max_listpack_entries,
        config.zset_max_listpack_value,
    )
}

/// The sorted set under `key` for reading (counts a keyspace hit or miss);
/// `WRONGTYPE` if the key holds another type.
fn read_zset<'k>(keys: &'k mut Keys<'_>, key: &[u8]) -> Result<Option<&'k ZSet>, CmdError> {
    keys.typed(key, |v| match v {
        Value::ZSet(x) => Some(x),
        _ => None,
    })
}

/// The sorted set under `key` for change; `WRONGTYPE` if another type.
fn write_zset<'k>(keys: &'k mut Keys<'_>, key: &[u8]) -> Result<Option<&'k mut ZSet>, CmdError> {
    keys.typed_mut(key, |v| match v {
        Value::ZSet(x) => Some(x),
        _ => None,
    })
}

/// Records a change of `key` after members went away, raising `event`:
/// deletes the key when the set became empty (Redis never keeps empty sets;
/// `del` follows), else marks it modified.
fn after_removal(
    keys: &mut Keys<'_>,
    key: &[u8],
    emptied: bool,
    event: &'static str,
) -> Result<(), CmdError> {
    keys.notify(Class::ZSET, event, key);
    if emptied {
        keys.remove(key)?;
        keys.notify(Class::GENERIC, "del", key);
        Ok(())
    } else {
        keys.modified(key)
    }
}

/// Stores `result` under `dst`, replacing any value (and its TTL), or
/// deletes `dst` when `result` is empty; replies the number of members
/// (ZRANGESTORE and the *STORE set operations), raising `event` (or `del`
/// for a deleted `dst`).
fn store(ctx: &mut Ctx, dst: &[u8], result: ZSet, event: &'static str) -> Result<(), CmdError> {
    let n = result.len();
    if n == 0 {
        if ctx.keys.remove(dst)?.is_some() {
            ctx.keys.notify(Class::GENERIC, "del", dst);
        }
    } else {
        ctx.keys.set(dst, Value::ZSet(result), false)?;
        ctx.keys.notify(Class::ZSET, event, dst);
    }
    ctx.out.int(n as i64);
    Ok(())
}

/// A range argument error as its Redis error line.
fn range_error(e: RangeError) -> CmdError {
    CmdError::line(match e {
        RangeError::NotFloat => "ERR min or max is not a float",
        RangeError::NotLexItem => "ERR min or max not valid string range item",
    })
}

/// Writes member / score pairs the way every Z* reply with scores looks:
/// a flat array in RESP2, an array of `[member, score]` pairs in RESP3.
/// Without scores, a flat array of members in both.
struct ScoredReply {
    withscores: bool,
    pairs: bool,
}

impl ScoredReply {
    /// Writes the header of a reply of `n` entries.
    fn begin(out: &mut Reply, n: usize, withscores: bool) -> ScoredReply {
        let pairs = withscores && out.resp3;
        out.array(if withscores && !pairs { 2 * n } else { n });
        ScoredReply { withscores, pairs }
    }

    /// Writes one entry.
    #[inline]
    fn entry(&self, out: &mut Reply, member: &[u8], score: f64) {
        if self.pairs {
            out.array(2);
        }
        out.bulk(member);
        if self.withscores {
            out.double(score);
        }
    }

    /// Writes every entry of `items`, which must yield exactly the `n`
    /// given to [`ScoredReply::begin`].
    fn entries<'a>(&self, out: &mut Reply, items: impl Iterator<Item = (&'a [u8], f64)>) {
        for (m, s) in items {
            self.entry(out, m, s);
        }
    }
}

/// A score as a bulk string (ZSCAN sends scores as strings in both
/// protocols).
fn bulk_score(out: &mut Reply, score: f64) {
    let mut buf = [0u8; MAX_DOUBLE_CHARS];
    let n = format_double(score, &mut buf);
    out.bulk(&buf[..n]);
}

/// Parses an integer argument (`ERR value is not an integer or out of
/// range`).
fn long(arg: &[u8]) -> Result<i64, CmdError> {
    args::int(arg)
}

/// Normalizes Redis's rank arguments (negative counts from the end) against
/// a set of `len` members: `None` for an empty range, else `(start, end)`
/// with `end` clamped to the last rank.
fn rank_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let llen = i64::try_from(len).unwrap_or(i64::MAX);
    let mut start = if start < 0 { llen + start } else { start };
    let mut end = if end < 0 { llen + end } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= llen {
        return None;
    }
    if end >= llen {
        end = llen - 1;
    }
    Some((start as usize, end as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_ranges_as_redis() {
        assert_eq!(rank_range(0, -1, 3), Some((0, 2)));
        assert_eq!(rank_range(-100, 100, 3), Some((0, 2)));
        assert_eq!(rank_range(2, 1, 3), None);
        assert_eq!(rank_range(3, 5, 3), None);
        assert_eq!(rank_range(0, -4, 3), None);
        assert_eq!(rank_range(-1, -1, 3), Some((2, 2)));
        assert_eq!(rank_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
        assert_eq!(rank_range(0, 0, 0), None);
    }

    #[test]
    fn numkeys_key_positions() {
        let a: Vec<&[u8]> = vec![b"zunionstore", b"d", b"2", b"a", b"b", b"WEIGHTS"];
        assert_eq!(store_keys(&a).as_slice(), &[1, 3, 4]);
        let a: Vec<&[u8]> = vec![b"zunion", b"9", b"a"];
        assert_eq!(numkeys_at_1(&a).as_slice(), &[2]);
        let a: Vec<&[u8]> = vec![b"zunion", b"x", b"a"];
        assert!(numkeys_at_1(&a).is_empty());
        let a: Vec<&[u8]> = vec![b"bzmpop", b"0", b"1", b"a", b"MIN"];
        assert_eq!(bzmpop_keys(&a).as_slice(), &[3]);
        let a: Vec<&[u8]> = vec![b"zmpop", b"-1", b"a", b"MIN"];
        assert!(zmpop_keys(&a).is_empty());
    }
}
