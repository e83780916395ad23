//! Set algebra over sorted sets: ZUNION, ZINTER, ZDIFF, their STORE forms,
//! and ZINTERCARD (Redis's `zunionInterDiffGenericCommand`). Inputs may be
//! plain sets, read as sorted sets whose scores are all 1.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::hash_map::Entry;
use std::collections::HashMap;

use super::{args, limits, store, Ctx, Keys, ScoredReply};
use crate::engine::set::{self, SetValue, MEMBER_SCORE};
use crate::engine::zset::{Range, ZSet};
use crate::engine::Value;
use crate::error::{CmdError, CmdResult};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// Folds `value` into `target` (Redis's `zunionInterAggregate`): a sum
    /// of `inf` and `-inf` is 0; MIN and MAX keep the target against NaN.
    #[inline]
    fn apply(self, target: &mut f64, value: f64) {
        match self {
            Aggregate::Sum => {
                *target += value;
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Aggregate::Min => {
                if value < *target {
                    *target = value;
                }
            }
            Aggregate::Max => {
                if value > *target {
                    *target = value;
                }
            }
        }
    }
}

/// One input: a sorted set, a plain set, or a missing key (empty).
#[derive(Clone, Copy)]
enum Source<'a> {
    Missing,
    ZSet(&'a ZSet),
    Set(&'a SetValue),
}

impl<'a> Source<'a> {
    fn len(&self) -> usize {
        match self {
            Source::Missing => 0,
            Source::ZSet(z) => z.len(),
            Source::Set(s) => s.len(),
        }
    }

    /// The member's score in this input (1 for a plain set's members).
    fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            Source::Missing => None,
            Source::ZSet(z) => z.score(member),
            Source::Set(s) => s.contains(member).then_some(MEMBER_SCORE),
        }
    }

    fn iter(&self) -> SourceIter<'a> {
        match *self {
            Source::Missing => SourceIter::Empty,
            Source::ZSet(z) => SourceIter::ZSet(z.iter()),
            Source::Set(s) => SourceIter::Set(s.iter()),
        }
    }
}

/// The members of a [`Source`] with their scores; a plain set's integer
/// members are formatted (the only case that allocates).
enum SourceIter<'a> {
    Empty,
    ZSet(Range<'a>),
    Set(set::Iter<'a>),
}

impl<'a> Iterator for SourceIter<'a> {
    type Item = (Cow<'a, [u8]>, f64);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            SourceIter::Empty => None,
            SourceIter::ZSet(r) => r.next().map(|(m, s)| (Cow::Borrowed(m), s)),
            SourceIter::Set(it) => it.next().map(|m| {
                let bytes = match m {
                    set::Member::Bytes(b) => Cow::Borrowed(b),
                    set::Member::Int(_) => Cow::Owned(m.to_vec()),
                };
                (bytes, MEMBER_SCORE)
            }),
        }
    }
}

/// Looks up every input key, checking all types before reading any (a
/// key of another type is `WRONGTYPE`).
fn load<'k>(keys: &'k mut Keys<'_>, names: &[&[u8]]) -> Result<Vec<Source<'k>>, CmdError> {
    for name in names {
        if let Some(v) = keys.value(name)? {
            if !matches!(v, Value::ZSet(_) | Value::Set(_)) {
                return Err(CmdError::WrongType);
            }
        }
    }
    let keys: &'k Keys<'_> = keys;
    names
        .iter()
        .map(|name| {
            Ok(
                match keys.part(name)?.get(name, keys.now_ms).map(|e| &e.value) {
                    Some(Value::ZSet(z)) => Source::ZSet(z),
                    Some(Value::Set(s)) => Source::Set(s),
                    _ => Source::Missing,
                },
            )
        })
        .collect()
}

/// The options after the input keys.
struct Options {
    weights: Vec<f64>,
    aggregate: Aggregate,
    withscores: bool,
    /// ZINTERCARD's LIMIT (0: none).
    limit: usize,
}

/// Which command is running, for the option rules and error lines.
struct Command {
    name: &'static str,
    op: Op,
    store: bool,
    cardinality_only: bool,
}

fn parse_options(cmd: &Command, rest: &[&[u8]], setnum: usize) -> Result<Options, CmdError> {
    let mut o = Options {
        weights: vec![1.0; setnum],
        aggregate: Aggregate::Sum,
        withscores: false,
        limit: 0,
    };
    let scored = cmd.op != Op::Diff && !cmd.cardinality_only;
    let mut j = 0;
    while j < rest.len() {
        let remaining = rest.len() - j;
        let arg = rest[j];
        if scored && remaining > setnum && args::is(arg, "weights") {
            for (w, text) in o.weights.iter_mut().zip(&rest[j + 1..]) {
                *w = args::float(text)
                    .map_err(|_| CmdError::line("ERR weight value is not a float"))?;
            }
            j += 1 + setnum;
        } else if scored && remaining >= 2 && args::is(arg, "aggregate") {
            let which = rest[j + 1];
            o.aggregate = if args::is(which, "sum") {
                Aggregate::Sum
            } else if args::is(which, "min") {
                Aggregate::Min
            } else if args::is(which, "max") {
                Aggregate::Max
            } else {
                return Err(CmdError::Syntax);
            };
            j += 2;
        } else if !cmd.store && !cmd.cardinality_only && args::is(arg, "withscores") {
            o.withscores = true;
            j += 1;
        } else if cmd.cardinality_only && remaining >= 2 && args::is(arg, "limit") {
            let n = args::int(rest[j + 1])
                .ok()
                .filter(|&n| n >= 0)
                .ok_or_else(|| CmdError::line("ERR LIMIT can't be negative"))?;
            o.limit = usize::try_from(n).unwrap_or(usize::MAX);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(o)
}

/// Members with their aggregated scores, in no particular order.
type Members<'a> = Vec<(Cow<'a, [u8]>, f64)>;

/// The intersection, iterating the smallest input (inputs sorted by size);
/// with `count_only`, only counts up to `limit` (0: no limit).
fn intersection<'a>(
    inputs: &[(Source<'a>, f64)],
    aggregate: Aggregate,
    count_only: bool,
    limit: usize,
) -> (Members<'a>, usize) {
    let mut out = Vec::new();
    let mut count = 0;
    let Some(((first, w0), rest)) = inputs.split_first() else {
        return (out, 0);
    };
    'members: for (member, s) in first.iter() {
        let mut score = w0 * s;
        if score.is_nan() {
            score = 0.0;
        }
        for (src, w) in rest {
            match src.score(&member) {
                Some(v) => aggregate.apply(&mut score, v * w),
                None => continue 'members,
            }
        }
        count += 1;
        if count_only {
            if limit > 0 && count >= limit {
                break;
            }
        } else {
            out.push((member, score));
        }
    }
    (out, count)
}

fn union<'a>(inputs: &[(Source<'a>, f64)], aggregate: Aggregate) -> Members<'a> {
    let largest = inputs.iter().map(|(s, _)| s.len()).max().unwrap_or(0);
    let mut acc: HashMap<Cow<'a, [u8]>, f64, ahash::RandomState> =
        HashMap::with_capacity_and_hasher(largest, ahash::RandomState::new());
    for (src, w) in inputs {
        for (member, s) in src.iter() {
            let mut score = w * s;
            if score.is_nan() {
                score = 0.0;
            }
            match acc.entry(member) {
                Entry::Occupied(mut e) => aggregate.apply(e.get_mut(), score),
                Entry::Vacant(e) => {
                    e.insert(score);
                }
            }
        }
    }
    acc.into_iter().collect()
}

fn difference<'a>(inputs: &[(Source<'a>, f64)]) -> Members<'a> {
    let Some(((first, _), rest)) = inputs.split_first() else {
        return Vec::new();
    };
    first
        .iter()
        .filter(|(m, _)| rest.iter().all(|(src, _)| src.score(m).is_none()))
        .collect()
}

/// Sorted-set order: score, then member bytes (`-0` equals `0`).
fn sort(members: &mut Members<'_>) {
    members.sort_unstable_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
}

/// The whole command: numkeys, inputs, options, then the operation, and a
/// reply, a stored result or a count.
fn run(ctx: &mut Ctx, a: &[&[u8]], cmd: Command) -> CmdResult {
    let numkeys_idx = if cmd.store { 2 } else { 1 };
    let setnum = args::int(a[numkeys_idx])?;
    if setnum < 1 {
        return Err(CmdError::err(format!(
            "at least 1 input key is needed for '{}' command",
            cmd.name
        )));
    }
    let first = numkeys_idx + 1;
    let setnum = usize::try_from(setnum).unwrap_or(usize::MAX);
    if setnum > a.len() - first {
        return Err(CmdError::Syntax);
    }
    let limits = limits(ctx);
    let names = &a[first..first + setnum];
    let sources = load(&mut ctx.keys, names)?;
    let opts = parse_options(&cmd, &a[first + setnum..], setnum)?;
    let mut inputs: Vec<(Source<'_>, f64)> = sources.into_iter().zip(opts.weights).collect();
    if cmd.op != Op::Diff {
        // Smallest first (stable, as Redis's sort in practice).
        inputs.sort_by_key(|(s, _)| s.len());
    }
    let mut result = match cmd.op {
        Op::Inter => {
            let (members, count) =
                intersection(&inputs, opts.aggregate, cmd.cardinality_only, opts.limit);
            if cmd.cardinality_only {
                ctx.out.int(count as i64);
                return Ok(());
            }
            members
        }
        Op::Union => union(&inputs, opts.aggregate),
        Op::Diff => difference(&inputs),
    };
    sort(&mut result);
    if !cmd.store {
        let reply = ScoredReply::begin(ctx.out, result.len(), opts.withscores);
        for (m, s) in &result {
            reply.entry(ctx.out, m, *s);
        }
        return Ok(());
    }
    let longest = result.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    let mut z = ZSet::with_encoding_for(result.len(), longest, limits);
    for (m, s) in &result {
        z.insert(m, *s, limits);
    }
    drop(result);
    store(ctx, a[1], z, cmd.name)
}

/// `ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]
/// [WITHSCORES]`
pub(super) fn zunion(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    run(
        ctx,
        a,
        Command {
            name: "zunion",
            op: Op::Union,
            store: false,
            cardinality_only: false,
        },
    )
}

/// `ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]
/// [WITHSCORES]`
pub(super) fn zinter(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    run(
        ctx,
        a,
        Command {
            name: "zinter",
            op: Op::Inter,
            store: false,
            cardinality_only: false,
        },
    )
}

/// `ZDIFF numkeys key [key ...] [WITHSCORES]`
pub(super) fn zdiff(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    run(
        ctx,
        a,
        Command {
            name: "zdiff",
            op: Op::Diff,
            store: false,
            cardinality_only: false,
        },
    )
}

/// `ZINTERCARD numkeys key [key ...] [LIMIT limit]`
pub(super) fn zintercard(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    run(
        ctx,
        a,
        Command {
            name: "zintercard",
            op: Op::Inter,
            store: false,
            cardinality_only: true,
        },
    )
}

/// `ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS w ...]
/// [AGGREGATE SUM|MIN|MAX]`
pub(super) fn zunionstore(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    run(
        ctx,
        a,
        Command {
            name: "zunionstore",
            op: Op::Union,
            store: true,
            cardinality_only: false,
        },
    )
}

/// `ZINTERSTORE destination numkeys key [key ...] [WEIGHTS w ...]
/// [AGGREGATE SUM|MIN|MAX]`
pub(super) fn zinterstore(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    run(
        ctx,
        a,
        Command {
            name: "zinterstore",
            op: Op::Inter,
            store: true,
            cardinality_only: false,
        },
    )
}

/// `ZDIFFSTORE destination numkeys key [key ...]`
pub(super) fn zdiffstore(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    run(
        ctx,
        a,
        Command {
            name: "zdiffstore",
            op: Op::Diff,
            store: true,
            cardinality_only: false,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregates_as_redis() {
        let mut t = f64::INFINITY;
        Aggregate::Sum.apply(&mut t, f64::NEG_INFINITY);
        assert_eq!(t, 0.0);
        let mut t = 1.0;
        Aggregate::Min.apply(&mut t, f64::NAN);
        assert_eq!(t, 1.0);
        Aggregate::Max.apply(&mut t, 3.0);
        assert_eq!(t, 3.0);
        Aggregate::Min.apply(&mut t, -2.0);
        assert_eq!(t, -2.0);
    }

    #[test]
    fn results_sort_by_score_then_member() {
        let mut m: Members<'_> = vec![
            (Cow::Borrowed(&b"b"[..]), 0.0),
            (Cow::Borrowed(&b"a"[..]), -0.0),
            (Cow::Borrowed(&b"c"[..]), -1.0),
        ];
        sort(&mut m);
        let order: Vec<&[u8]> = m.iter().map(|(k, _)| k.as_ref()).collect();
        assert_eq!(order, vec![&b"c"[..], b"a", b"b"]);
    }
}
