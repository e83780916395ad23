//! Property tests: random sequences of every sorted-set operation run against
//! a plain model (a BTreeSet in (score, member) order plus a HashMap), with
//! ranks, ranges, scores, counts and the encoding compared after each step,
//! across both encodings and the conversion between them.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap, HashSet};

use proptest::prelude::*;

use super::*;

/// An f64 ordered as Redis compares scores (no NaN; -0 == 0).
#[derive(Debug, Clone, Copy)]
struct Score(f64);

impl PartialEq for Score {
    fn eq(&self, o: &Self) -> bool {
        self.0 == o.0
    }
}
impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Score {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.partial_cmp(&o.0).unwrap_or(Ordering::Equal)
    }
}

const SCORES: &[f64] = &[
    f64::NEG_INFINITY,
    -1e9,
    -2.5,
    -1.0,
    -0.0,
    0.0,
    0.5,
    1.0,
    2.0,
    3.0,
    300.0,
    1e15,
    f64::INFINITY,
];

#[derive(Debug, Clone, Copy)]
enum Lb {
    Min,
    Max,
    Inc(usize),
    Exc(usize),
}

#[derive(Debug, Clone, Copy)]
struct SRange(usize, usize, bool, bool);

#[derive(Debug, Clone, Copy)]
struct LRange(Lb, Lb);

#[derive(Debug, Clone)]
enum Op {
    Add(usize, usize, usize),
    Fill(usize, usize),
    Incr(usize, usize),
    Remove(usize),
    RemRank(usize, usize),
    RemScore(SRange),
    RemLex(LRange),
    PopMin(usize),
    PopMax(usize),
    Rank(usize),
    ByRank(usize, bool),
    RangeRank(usize, usize, bool),
    RangeScore(SRange, bool, usize, Option<usize>),
    RangeLex(LRange, bool, usize, Option<usize>),
    Scan(usize),
    Duplicate,
    Shrink,
}

/// Valid ZADD flag combinations (Redis rejects the others while parsing).
const FLAGS: &[(bool, bool, bool, bool)] = &[
    (false, false, false, false),
    (true, false, false, false),
    (false, true, false, false),
    (false, false, true, false),
    (false, false, false, true),
    (false, true, true, false),
    (false, true, false, true),
];

fn flags_of(i: usize) -> ZAddFlags {
    let (nx, xx, gt, lt) = FLAGS[i % FLAGS.len()];
    ZAddFlags {
        nx,
        xx,
        gt,
        lt,
        incr: i >= FLAGS.len(),
    }
}

fn lb() -> impl Strategy<Value = Lb> {
    prop_oneof![
        1 => Just(Lb::Min),
        1 => Just(Lb::Max),
        4 => any::<usize>().prop_map(Lb::Inc),
        4 => any::<usize>().prop_map(Lb::Exc),
    ]
}

fn srange() -> impl Strategy<Value = SRange> {
    (
        0..SCORES.len(),
        0..SCORES.len(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(a, b, x, y)| SRange(a, b, x, y))
}

fn lrange() -> impl Strategy<Value = LRange> {
    (lb(), lb()).prop_map(|(a, b)| LRange(a, b))
}

fn op(members: usize, add_weight: u32) -> impl Strategy<Value = Op> {
    let m = 0..members;
    let small = 0..members + 3;
    let limit = prop_oneof![Just(None), (0..12usize).prop_map(Some)];
    prop_oneof![
        add_weight => (m.clone(), 0..SCORES.len(), 0..FLAGS.len() * 2).prop_map(|(a, b, c)| Op::Add(a, b, c)),
        2 => (m.clone(), 1..40usize).prop_map(|(a, b)| Op::Fill(a, b)),
        4 => (m.clone(), 0..SCORES.len()).prop_map(|(a, b)| Op::Incr(a, b)),
        5 => m.clone().prop_map(Op::Remove),
        1 => (small.clone(), small.clone()).prop_map(|(a, b)| Op::RemRank(a, b)),
        1 => srange().prop_map(Op::RemScore),
        1 => lrange().prop_map(Op::RemLex),
        1 => (0..4usize).prop_map(Op::PopMin),
        1 => (0..4usize).prop_map(Op::PopMax),
        3 => m.clone().prop_map(Op::Rank),
        2 => (small.clone(), any::<bool>()).prop_map(|(a, b)| Op::ByRank(a, b)),
        3 => (small.clone(), small, any::<bool>()).prop_map(|(a, b, c)| Op::RangeRank(a, b, c)),
        3 => (srange(), any::<bool>(), 0..6usize, limit.clone())
            .prop_map(|(r, rev, o, l)| Op::RangeScore(r, rev, o, l)),
        3 => (lrange(), any::<bool>(), 0..6usize, limit)
            .prop_map(|(r, rev, o, l)| Op::RangeLex(r, rev, o, l)),
        1 => (1..20usize).prop_map(Op::Scan),
        1 => Just(Op::Duplicate),
        1 => Just(Op::Shrink),
    ]
}

/// The member pool: unique byte strings of lengths around the limits, some
/// binary, some inline in a skiplist node and some not.
/// Only the last member is longer than `max_value`, so that sets also grow
/// past the entry limit while still listpacks.
fn pool(n: usize, max_value: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            if i < 8 {
                // Short binary members, including 0x00 and 0xff bytes.
                let b = (i as u8).wrapping_mul(37);
                if i % 2 == 0 {
                    vec![b]
                } else {
                    vec![b, 0xff - b]
                }
            } else {
                let len = match i % 13 {
                    _ if i + 1 == n => max_value + 1,
                    0 => max_value.min(20),
                    1 | 7 => max_value,
                    2 => max_value.saturating_sub(1).max(4),
                    3 => 11,
                    4 => 10,
                    _ => 3 + i % 5,
                };
                let mut m = format!("{i:03}").into_bytes();
                m.resize(len.max(3), b'a' + (i % 26) as u8);
                m
            }
        })
        .collect()
}

/// The plain model.
struct Model {
    order: BTreeSet<(Score, Vec<u8>)>,
    scores: HashMap<Vec<u8>, f64>,
    skiplist: bool,
    limits: ZSetLimits,
}

impl Model {
    fn sorted(&self) -> Vec<(Vec<u8>, f64)> {
        self.order.iter().map(|(s, m)| (m.clone(), s.0)).collect()
    }

    fn zadd(&mut self, m: &[u8], score: f64, f: ZAddFlags) -> Result<ZAddOutcome, NanScore> {
        match self.scores.get(m).copied() {
            Some(cur) => {
                if f.nx {
                    return Ok(ZAddOutcome::Skipped);
                }
                let new = if f.incr { cur + score } else { score };
                if new.is_nan() {
                    return Err(NanScore);
                }
                if (f.lt && new >= cur) || (f.gt && new <= cur) {
                    return Ok(ZAddOutcome::Skipped);
                }
                if new == cur {
                    return Ok(ZAddOutcome::Unchanged { score: new });
                }
                self.order.remove(&(Score(cur), m.to_vec()));
                self.order.insert((Score(new), m.to_vec()));
                self.scores.insert(m.to_vec(), new);
                Ok(ZAddOutcome::Updated {
                    old: cur,
                    score: new,
                })
            }
            None if f.xx => Ok(ZAddOutcome::Skipped),
            None => {
                if self.scores.len() + 1 > self.limits.max_entries
                    || m.len() > self.limits.max_value
                {
                    self.skiplist = true;
                }
                self.order.insert((Score(score), m.to_vec()));
                self.scores.insert(m.to_vec(), score);
                Ok(ZAddOutcome::Added { score })
            }
        }
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        match self.scores.remove(m) {
            Some(s) => {
                self.order.remove(&(Score(s), m.to_vec()));
                true
            }
            None => false,
        }
    }

    fn remove_all(&mut self, gone: &[(Vec<u8>, f64)]) {
        for (m, _) in gone {
            self.remove(m);
        }
    }

    /// Members strictly increasing in set order: lex walks are then
    /// well defined in the skiplist too.
    fn lex_monotonic(&self) -> bool {
        let v: Vec<&Vec<u8>> = self.order.iter().map(|(_, m)| m).collect();
        v.windows(2).all(|w| w[0] < w[1])
    }
}

fn score_range(r: SRange) -> RangeByScore {
    RangeByScore {
        min: SCORES[r.0],
        max: SCORES[r.1],
        min_exclusive: r.2,
        max_exclusive: r.3,
    }
}

fn lex_bound(b: Lb, members: &[Vec<u8>]) -> LexBound {
    match b {
        Lb::Min => LexBound::Min,
        Lb::Max => LexBound::Max,
        Lb::Inc(i) => LexBound::Inclusive(members[i % members.len()].clone()),
        Lb::Exc(i) => LexBound::Exclusive(members[i % members.len()].clone()),
    }
}

fn lex_range(r: LRange, members: &[Vec<u8>]) -> RangeByLex {
    RangeByLex {
        min: lex_bound(r.0, members),
        max: lex_bound(r.1, members),
    }
}

/// Redis's walk over a sorted sequence: the first (last when reversed)
/// element in range after the listpack's precheck, then `offset` further,
/// then while inside the far bound.
fn walk<B: Bounds>(
    v: &[(Vec<u8>, f64)],
    r: &B,
    rev: bool,
    offset: usize,
    limit: Option<usize>,
) -> Vec<(Vec<u8>, f64)> {
    let (Some(first), Some(last)) = (v.first(), v.last()) else {
        return vec![];
    };
    if r.is_empty() || !r.gte_min(last.1, &last.0) || !r.lte_max(first.1, &first.0) {
        return vec![];
    }
    let ordered: Vec<&(Vec<u8>, f64)> = if rev {
        v.iter().rev().collect()
    } else {
        v.iter().collect()
    };
    let near = |e: &(Vec<u8>, f64)| {
        if rev {
            r.lte_max(e.1, &e.0)
        } else {
            r.gte_min(e.1, &e.0)
        }
    };
    let far = |e: &(Vec<u8>, f64)| {
        if rev {
            r.gte_min(e.1, &e.0)
        } else {
            r.lte_max(e.1, &e.0)
        }
    };
    let Some(start) = ordered.iter().position(|e| near(e)) else {
        return vec![];
    };
    if !far(ordered[start]) {
        return vec![];
    }
    let mut out = vec![];
    for e in ordered.iter().skip(start + offset) {
        if out.len() == limit.unwrap_or(usize::MAX) || !far(e) {
            break;
        }
        out.push((*e).clone());
    }
    out
}

fn owned(r: Range<'_>) -> Vec<(Vec<u8>, f64)> {
    r.map(|(m, s)| (m.to_vec(), s)).collect()
}

fn same(a: &[(Vec<u8>, f64)], b: &[(Vec<u8>, f64)]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.0 == y.0 && x.1 == y.1)
}

fn run(
    ops: &[Op],
    limits: ZSetLimits,
    pool_size: usize,
    lex_mode: bool,
) -> Result<(), TestCaseError> {
    let members = pool(pool_size, limits.max_value);
    let mut z = ZSet::new();
    let mut model = Model {
        order: BTreeSet::new(),
        scores: HashMap::new(),
        skiplist: false,
        limits,
    };
    let score_at = |i: usize| if lex_mode { 0.0 } else { SCORES[i] };
    for (step, op) in ops.iter().enumerate() {
        let sorted = model.sorted();
        match op {
            Op::Add(m, s, f) => {
                let (m, s, f) = (&members[*m], score_at(*s), flags_of(*f));
                let got = z.zadd(m, s, f, limits);
                let want = model.zadd(m, s, f);
                prop_assert_eq!(got, want, "step {} {:?}", step, op);
            }
            Op::Fill(from, k) => {
                for j in *from..*from + *k {
                    let (m, s) = (&members[j % members.len()], score_at(j % SCORES.len()));
                    let got = z.zadd(m, s, ZAddFlags::default(), limits);
                    prop_assert_eq!(got, model.zadd(m, s, ZAddFlags::default()));
                }
            }
            Op::Incr(m, d) => {
                let (m, d) = (&members[*m], score_at(*d));
                let got = z.incr(m, d, limits);
                let want = model
                    .zadd(m, d, flags_of(FLAGS.len()))
                    .map(|o| o.score().unwrap_or(f64::NAN));
                prop_assert_eq!(got, want, "step {} {:?}", step, op);
            }
            Op::Remove(m) => {
                prop_assert_eq!(z.remove(&members[*m]), model.remove(&members[*m]));
            }
            Op::RemRank(a, b) => {
                let want: Vec<_> = if a <= b && *a < sorted.len() {
                    sorted[*a..=(*b).min(sorted.len() - 1)].to_vec()
                } else {
                    vec![]
                };
                prop_assert_eq!(z.remove_range_by_rank(*a, *b), want.len());
                model.remove_all(&want);
            }
            Op::RemScore(r) => {
                let r = score_range(*r);
                let want: Vec<_> = sorted.iter().filter(|e| r.contains(e.1)).cloned().collect();
                prop_assert_eq!(z.remove_range_by_score(&r), want.len());
                model.remove_all(&want);
            }
            Op::RemLex(r) => {
                let r = lex_range(*r, &members);
                if z.is_listpack() || model.lex_monotonic() {
                    let want = walk(&sorted, &r, false, 0, None);
                    prop_assert_eq!(z.remove_range_by_lex(&r), want.len(), "step {}", step);
                    model.remove_all(&want);
                }
            }
            Op::PopMin(n) | Op::PopMax(n) => {
                let max = matches!(op, Op::PopMax(_));
                let mut got = vec![];
                let f = |m: &[u8], s: f64| got.push((m.to_vec(), s));
                let k = if max {
                    z.pop_max(*n, f)
                } else {
                    z.pop_min(*n, f)
                };
                let want: Vec<_> = if max {
                    sorted.iter().rev().take(*n).cloned().collect()
                } else {
                    sorted.iter().take(*n).cloned().collect()
                };
                prop_assert_eq!(k, want.len());
                prop_assert!(
                    same(&got, &want),
                    "step {} {:?}: {:?} vs {:?}",
                    step,
                    op,
                    got,
                    want
                );
                model.remove_all(&want);
            }
            Op::Rank(m) => {
                let m = &members[*m];
                let pos = sorted.iter().position(|e| &e.0 == m);
                for rev in [false, true] {
                    let want = pos.map(|p| {
                        let r = if rev { sorted.len() - 1 - p } else { p };
                        (r, sorted[p].1)
                    });
                    prop_assert_eq!(z.rank(m, rev), want);
                }
                // All members at once (some absent): as one at a time.
                let all: Vec<&[u8]> = members.iter().map(|m| m.as_slice()).collect();
                for rev in [false, true] {
                    let mut got = Vec::new();
                    z.ranks(&all, rev, &mut got);
                    let want: Vec<_> = all.iter().map(|m| z.rank(m, rev)).collect();
                    prop_assert_eq!(got, want);
                }
                let mut got = Vec::new();
                z.scores(&all, &mut got);
                let want: Vec<_> = all.iter().map(|m| z.score(m)).collect();
                prop_assert_eq!(got, want);
                // A read-only hint (its walks must stay in bounds).
                let calls: Vec<(&[u8], f64)> = all.iter().map(|&m| (m, 2.0)).collect();
                z.prepare_scores(&calls, false);
                z.prepare_scores(&calls, true);
                prop_assert_eq!(z.score(m), model.scores.get(m).copied());
            }
            Op::ByRank(r, rev) => {
                let want = if *r < sorted.len() {
                    let i = if *rev { sorted.len() - 1 - r } else { *r };
                    Some((sorted[i].0.as_slice(), sorted[i].1))
                } else {
                    None
                };
                prop_assert_eq!(z.get_by_rank(*r, *rev), want);
            }
            Op::RangeRank(a, b, rev) => {
                let ordered: Vec<_> = if *rev {
                    sorted.iter().rev().cloned().collect()
                } else {
                    sorted.clone()
                };
                let want = if a <= b && *a < ordered.len() {
                    ordered[*a..=(*b).min(ordered.len() - 1)].to_vec()
                } else {
                    vec![]
                };
                let r = z.range_by_rank(*a, *b, *rev);
                prop_assert_eq!(r.size_hint().0, want.len());
                prop_assert!(same(&owned(r), &want), "step {} {:?}", step, op);
            }
            Op::RangeScore(r, rev, off, lim) => {
                let r = score_range(*r);
                let want = walk(&sorted, &r, *rev, *off, *lim);
                let got = owned(z.range_by_score(&r, *rev, *off, *lim));
                prop_assert!(
                    same(&got, &want),
                    "step {} {:?}: {:?} vs {:?}",
                    step,
                    op,
                    got,
                    want
                );
                let in_range = sorted.iter().filter(|e| r.contains(e.1)).count();
                prop_assert_eq!(z.count_by_score(&r), in_range);
                prop_assert_eq!(
                    z.range_by_score(&r, *rev, *off, *lim).clone().count(),
                    want.len()
                );
            }
            Op::RangeLex(r, rev, off, lim) => {
                let r = lex_range(*r, &members);
                let got = owned(z.range_by_lex(&r, *rev, *off, *lim));
                let count = z.count_by_lex(&r);
                if z.is_listpack() || model.lex_monotonic() {
                    let want = walk(&sorted, &r, *rev, *off, *lim);
                    prop_assert!(
                        same(&got, &want),
                        "step {} {:?}: {:?} vs {:?}",
                        step,
                        op,
                        got,
                        want
                    );
                    prop_assert_eq!(count, walk(&sorted, &r, false, 0, None).len());
                }
            }
            Op::Scan(count) => {
                let mut seen = HashSet::new();
                let mut cursor = 0;
                let mut rounds = 0;
                loop {
                    cursor = z.scan(cursor, *count, |m, s| {
                        assert_eq!(model.scores.get(m).copied(), Some(s));
                        assert!(seen.insert(m.to_vec()), "visited twice");
                    });
                    rounds += 1;
                    if cursor == 0 || rounds > 10_000 {
                        break;
                    }
                }
                prop_assert_eq!(cursor, 0);
                prop_assert_eq!(seen.len(), model.scores.len());
            }
            Op::Duplicate => z = z.duplicate(),
            Op::Shrink => {
                let max_len = model.scores.keys().map(|m| m.len()).max().unwrap_or(0);
                z.convert_to_listpack_if_needed(max_len, limits);
                if limits.fits_listpack(model.scores.len(), max_len) {
                    model.skiplist = false;
                }
            }
        }
        // After every step: same members in the same order, same encoding,
        // consistent structure.
        prop_assert_eq!(z.len(), model.scores.len());
        let all = owned(z.iter());
        prop_assert!(same(&all, &model.sorted()), "step {} {:?}", step, op);
        let rev = owned(z.range_by_rank(0, usize::MAX, true));
        prop_assert!(rev.iter().rev().map(|e| &e.0).eq(all.iter().map(|e| &e.0)));
        let enc = if model.skiplist {
            "skiplist"
        } else {
            "listpack"
        };
        prop_assert_eq!(z.encoding(), enc, "step {} {:?}", step, op);
        z.check();
    }
    Ok(())
}

fn small_limits() -> ZSetLimits {
    ZSetLimits {
        max_entries: 8,
        max_value: 12,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn small_limits_scores(ops in prop::collection::vec(op(24, 24), 1..200)) {
        run(&ops, small_limits(), 24, false)?;
    }

    #[test]
    fn small_limits_lex(ops in prop::collection::vec(op(24, 24), 1..200)) {
        run(&ops, small_limits(), 24, true)?;
    }

    /// Listpacks of up to 24 members: they gain back lengths past 16 and
    /// lose them at 8 (see `listpack::NARROW_MAX`), so reverse walks run in
    /// both layouts and across each change.
    #[test]
    fn mid_limits_cross_back_lengths(
        ops in prop::collection::vec(op(32, 24), 1..300),
        lex in any::<bool>(),
    ) {
        let limits = ZSetLimits { max_entries: 24, max_value: 12 };
        run(&ops, limits, 32, lex)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn default_limits(ops in prop::collection::vec(op(170, 24), 300..700), lex in any::<bool>()) {
        run(&ops, ZSetLimits::default(), 170, lex)?;
    }
}

/// Fills a set with `n` `m:<id>` members with integer scores, and one with
/// `m:<12-digit id>` members (the leaderboard bench's form), and prints their
/// bytes per member (printed, not asserted).
fn measure(n: usize) {
    let limits = ZSetLimits::default();
    for wide in [false, true] {
        let mut z = ZSet::new();
        for i in 0..n {
            let m = if wide {
                format!("m:{i:012}")
            } else {
                format!("m:{i}")
            };
            z.insert(m.as_bytes(), (i * 7 % 10_007) as f64, limits);
        }
        let per = z.memory_usage() as f64 / n as f64;
        let form = if wide { "m:<12 digits>" } else { "m:<id>" };
        println!("{n} {form} members ({}): {per:.1} B/member", z.encoding());
    }
}

#[test]
fn bytes_per_member() {
    measure(100);
    measure(100_000);
    let mut small = ZSet::new();
    for i in 0..100 {
        small.insert(
            format!("m:{}", 10_000 + i * 37).as_bytes(),
            (i * 131) as f64,
            ZSetLimits::default(),
        );
    }
    assert_eq!(small.encoding(), "listpack");
}

/// The 1M-member board: `cargo test --lib bytes_per_member_1m --
/// --ignored --nocapture`.
#[test]
#[ignore]
fn bytes_per_member_1m() {
    measure(1_000_000);
}
