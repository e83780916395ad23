//! Property tests: random boards (every ORDER × POLICY × TIEBREAK × RANKING,
//! with and without CAPACITY) take random submits, incrs (overflow
//! included) and removes, checked after each step against a plain model (a
//! Vec sorted by the comparator, ranks counted naively): length, every
//! member's entry, score and rank, random range windows, around(),
//! count_between(), among(), and the tree's own invariants.

use std::cmp::Ordering;

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone)]
enum Op {
    Submit(usize, i64, i64, u64, Option<Vec<u8>>),
    Incr(usize, i64, u64, Option<Vec<u8>>),
    Remove(usize),
    /// Removes members `lo..hi` (a board that shrinks is rebuilt).
    RemoveMany(usize, usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct MEntry {
    member: Vec<u8>,
    score: i64,
    subscore: i64,
    time: u64,
    meta: Option<Vec<u8>>,
}

/// The board as a sorted Vec.
struct Model {
    opts: Options,
    entries: Vec<MEntry>,
}

impl Model {
    fn cmp(&self, a: &MEntry, b: &MEntry) -> Ordering {
        let pair = |e: &MEntry| (e.score, e.subscore);
        let by_pair = match self.opts.order {
            Order::Desc => pair(b).cmp(&pair(a)),
            Order::Asc => pair(a).cmp(&pair(b)),
        };
        let by_time = match self.opts.tiebreak {
            Tiebreak::Earliest => a.time.cmp(&b.time),
            Tiebreak::Latest => b.time.cmp(&a.time),
        };
        by_pair.then(by_time).then_with(|| a.member.cmp(&b.member))
    }

    fn sort(&mut self) {
        let mut v = std::mem::take(&mut self.entries);
        v.sort_by(|a, b| self.cmp(a, b));
        self.entries = v;
    }

    fn find(&self, m: &[u8]) -> Option<usize> {
        self.entries.iter().position(|e| e.member == m)
    }

    /// Rank of the entry at place `i` (0-based) among `v` (sorted).
    fn rank_in(&self, v: &[&MEntry], i: usize) -> u64 {
        let pair = |e: &MEntry| (e.score, e.subscore);
        let p = pair(v[i]);
        match self.opts.ranking {
            Ranking::Ordinal => i as u64 + 1,
            Ranking::Competition => 1 + v.iter().filter(|e| self.better(pair(e), p)).count() as u64,
            Ranking::Dense => {
                let mut better: Vec<(i64, i64)> = v
                    .iter()
                    .map(|e| pair(e))
                    .filter(|&q| self.better(q, p))
                    .collect();
                better.dedup();
                1 + better.len() as u64
            }
        }
    }

    fn rank(&self, i: usize) -> u64 {
        let v: Vec<&MEntry> = self.entries.iter().collect();
        self.rank_in(&v, i)
    }

    fn better(&self, a: (i64, i64), b: (i64, i64)) -> bool {
        match self.opts.order {
            Order::Desc => a > b,
            Order::Asc => a < b,
        }
    }

    fn outcome(&self, m: &[u8], changed: bool) -> SubmitOutcome {
        let i = self.find(m);
        SubmitOutcome {
            score: i.map_or(0, |i| self.entries[i].score),
            rank: i.map(|i| self.rank(i)),
            changed,
            evicted: None,
        }
    }

    fn write(
        &mut self,
        m: &[u8],
        score: i64,
        subscore: Option<i64>,
        at: u64,
        meta: Option<&[u8]>,
        incr: bool,
    ) -> Result<SubmitOutcome, LbError> {
        if meta.is_some_and(|x| x.len() > self.opts.max_meta_len) {
            return Err(LbError::MetaTooLong);
        }
        let Some(i) = self.find(m) else {
            return Ok(self.add(m, score, subscore.unwrap_or(0), at, meta));
        };
        let old = self.entries[i].clone();
        let new = if incr {
            (
                old.score.checked_add(score).ok_or(LbError::Overflow)?,
                subscore.unwrap_or(old.subscore),
            )
        } else {
            match self.opts.policy {
                Policy::Best => {
                    let new = (score, subscore.unwrap_or(0));
                    if !self.better(new, (old.score, old.subscore)) {
                        return Ok(self.outcome(m, false));
                    }
                    new
                }
                Policy::Set => (score, subscore.unwrap_or(0)),
                Policy::Incr => (
                    old.score.checked_add(score).ok_or(LbError::Overflow)?,
                    subscore.unwrap_or(0),
                ),
            }
        };
        let mut changed = false;
        let e = &mut self.entries[i];
        if new != (old.score, old.subscore) {
            (e.score, e.subscore, e.time) = (new.0, new.1, at);
            changed = true;
        }
        if let Some(x) = meta {
            let x = (!x.is_empty()).then(|| x.to_vec());
            changed |= e.meta != x;
            e.meta = x;
        }
        self.sort();
        Ok(self.outcome(m, changed))
    }

    fn add(
        &mut self,
        m: &[u8],
        score: i64,
        subscore: i64,
        at: u64,
        meta: Option<&[u8]>,
    ) -> SubmitOutcome {
        let e = MEntry {
            member: m.to_vec(),
            score,
            subscore,
            time: at,
            meta: meta.filter(|x| !x.is_empty()).map(<[u8]>::to_vec),
        };
        let cap = self.opts.capacity as usize;
        if cap > 0 && self.entries.len() >= cap {
            if let Some(last) = self.entries.last() {
                if self.cmp(last, &e) == Ordering::Less {
                    return SubmitOutcome {
                        score,
                        rank: None,
                        changed: false,
                        evicted: None,
                    };
                }
            }
        }
        self.entries.push(e);
        self.sort();
        let mut evicted = None;
        while cap > 0 && self.entries.len() > cap {
            evicted = self.entries.pop().map(|e| e.member);
        }
        SubmitOutcome {
            evicted,
            ..self.outcome(m, true)
        }
    }
}

fn member(i: usize) -> Vec<u8> {
    if i % 7 == 3 {
        // Longer than an entry holds inline.
        format!("long-member-name-{i:04}").into_bytes()
    } else {
        format!("m{i}").into_bytes()
    }
}

fn options() -> impl Strategy<Value = Options> {
    (
        prop_oneof![Just(Order::Desc), Just(Order::Asc)],
        prop_oneof![Just(Policy::Best), Just(Policy::Set), Just(Policy::Incr)],
        prop_oneof![Just(Tiebreak::Earliest), Just(Tiebreak::Latest)],
        prop_oneof![
            Just(Ranking::Ordinal),
            Just(Ranking::Competition),
            Just(Ranking::Dense)
        ],
        prop_oneof![3 => Just(0u64), 1 => 1u64..12],
    )
        .prop_map(|(order, policy, tiebreak, ranking, capacity)| Options {
            order,
            policy,
            tiebreak,
            ranking,
            capacity,
            max_meta_len: 3,
        })
}

fn score() -> impl Strategy<Value = i64> {
    prop_oneof![
        // Many ties, and mostly distinct scores.
        8 => -3i64..4,
        4 => -1000i64..1000,
        1 => Just(i64::MAX),
        1 => Just(i64::MIN),
        1 => Just(i64::MAX - 1),
    ]
}

fn meta() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        3 => Just(None),
        2 => proptest::collection::vec(b'a'..b'c', 0..5).prop_map(Some),
    ]
}

fn ops(members: usize, len: usize) -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(
        prop_oneof![
            6 => (0..members, score(), -1i64..2, 0u64..4, meta())
                .prop_map(|(m, s, ss, t, x)| Op::Submit(m, s, ss, t, x)),
            2 => (0..members, score(), 0u64..4, meta()).prop_map(|(m, d, t, x)| Op::Incr(m, d, t, x)),
            2 => (0..members).prop_map(Op::Remove),
            1 => (0..members, 0..members).prop_map(|(a, b)| Op::RemoveMany(a.min(b), a.max(b))),
        ],
        0..len,
    )
}

/// Reads compared after a step: a window, an around, a score band, a subset.
#[derive(Debug, Clone)]
struct Probe {
    from: u64,
    to: u64,
    around: (usize, u64),
    band: (i64, i64),
    among: Vec<usize>,
}

fn probe(members: usize) -> impl Strategy<Value = Probe> {
    (
        0u64..40,
        0u64..40,
        (0..members, 0u64..8),
        (score(), score()),
        proptest::collection::vec(0..members + 3, 0..8),
    )
        .prop_map(|(from, to, around, band, among)| Probe {
            from,
            to,
            around,
            band,
            among,
        })
}

fn apply(b: &mut Leaderboard, m: &mut Model, op: &Op) -> Result<(), TestCaseError> {
    match op {
        Op::Submit(i, s, ss, t, x) => {
            let mem = member(*i);
            let got = b.submit(&mem, *s, *ss, *t, x.as_deref());
            let want = m.write(&mem, *s, Some(*ss), *t, x.as_deref(), false);
            prop_assert_eq!(got, want, "{:?}", op);
        }
        Op::Incr(i, d, t, x) => {
            let mem = member(*i);
            let got = b.incr(&mem, *d, *t, x.as_deref());
            let want = m.write(&mem, *d, None, *t, x.as_deref(), true);
            prop_assert_eq!(got, want, "{:?}", op);
        }
        Op::Remove(i) => {
            let mem = member(*i);
            let want = m.find(&mem).map(|k| m.entries.remove(k)).is_some();
            prop_assert_eq!(b.remove(&mem), want);
        }
        Op::RemoveMany(lo, hi) => {
            for i in *lo..*hi {
                apply(b, m, &Op::Remove(i))?;
            }
        }
    }
    Ok(())
}

fn view(e: &MEntry) -> EntryRef<'_> {
    EntryRef {
        member: &e.member,
        score: e.score,
        subscore: e.subscore,
        time: e.time,
        meta: e.meta.as_deref(),
    }
}

fn compare(b: &Leaderboard, m: &Model, members: usize, p: &Probe) -> Result<(), TestCaseError> {
    b.check();
    prop_assert_eq!(b.len(), m.entries.len());
    let all: Vec<(u64, EntryRef)> = b.iter().collect();
    let want: Vec<(u64, EntryRef)> = (0..m.entries.len())
        .map(|i| (m.rank(i), view(&m.entries[i])))
        .collect();
    prop_assert_eq!(&all, &want);
    for i in 0..members {
        let mem = member(i);
        let k = m.find(&mem);
        prop_assert_eq!(b.get(&mem), k.map(|k| view(&m.entries[k])));
        prop_assert_eq!(b.score(&mem), k.map(|k| m.entries[k].score));
        prop_assert_eq!(b.rank(&mem), k.map(|k| m.rank(k)));
    }
    // A window.
    let got: Vec<(u64, EntryRef)> = b.range(p.from, p.to).collect();
    let (lo, hi) = (p.from.max(1), p.to.min(want.len() as u64));
    let expect: &[(u64, EntryRef)] = if lo <= hi {
        &want[lo as usize - 1..hi as usize]
    } else {
        &[]
    };
    prop_assert_eq!(&got[..], expect);
    // Around.
    let (who, count) = p.around;
    let got: Vec<(u64, EntryRef)> = b.around(&member(who), count).collect();
    let expect: Vec<(u64, EntryRef)> = match m.find(&member(who)) {
        Some(k) if count > 0 => {
            let n = want.len();
            let c = count as usize;
            let start = k.saturating_sub(c / 2).min(n.saturating_sub(c));
            want[start..(start + c).min(n)].to_vec()
        }
        _ => Vec::new(),
    };
    prop_assert_eq!(got, expect);
    // A score band.
    let (min, max) = p.band;
    let n = m
        .entries
        .iter()
        .filter(|e| min <= e.score && e.score <= max)
        .count() as u64;
    prop_assert_eq!(b.count_between(min, max), n);
    // A subset (absent members and repeats included).
    let asked: Vec<Vec<u8>> = p.among.iter().map(|&i| member(i)).collect();
    let got: Vec<(u64, u64, EntryRef)> = b
        .among(asked.iter().map(Vec::as_slice), true)
        .into_iter()
        .map(|a| (a.rank, a.global_rank.unwrap_or(0), a.entry))
        .collect();
    let mut sub: Vec<(usize, &MEntry)> = m
        .entries
        .iter()
        .enumerate()
        .filter(|(_, e)| asked.contains(&e.member))
        .collect();
    sub.sort_by(|a, b| m.cmp(a.1, b.1));
    let refs: Vec<&MEntry> = sub.iter().map(|s| s.1).collect();
    let expect: Vec<(u64, u64, EntryRef)> = sub
        .iter()
        .enumerate()
        .map(|(j, &(k, e))| (m.rank_in(&refs, j), m.rank(k), view(e)))
        .collect();
    prop_assert_eq!(got, expect);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn matches_the_model(
        opts in options(),
        steps in proptest::collection::vec((ops(24, 4), probe(24)), 0..40),
    ) {
        let mut b = Leaderboard::new(opts);
        let mut m = Model { opts, entries: Vec::new() };
        for (ops, p) in &steps {
            for op in ops {
                apply(&mut b, &mut m, op)?;
            }
            compare(&b, &m, 24, p)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Many members: deep trees (test builds use 4-slot nodes), splits,
    /// merges and refills.
    #[test]
    fn matches_the_model_on_big_boards(
        opts in options(),
        steps in proptest::collection::vec((ops(300, 60), probe(300)), 0..12),
    ) {
        let opts = Options { capacity: opts.capacity * 20, ..opts };
        let mut b = Leaderboard::new(opts);
        let mut m = Model { opts, entries: Vec::new() };
        for (ops, p) in &steps {
            for op in ops {
                apply(&mut b, &mut m, op)?;
            }
            compare(&b, &m, 300, p)?;
        }
    }
}
