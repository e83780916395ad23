//! Copy-before-write of one big sorted set, member by member, for a
//! point-in-time snapshot (BGSAVE, SAVE, the AOF rewrite, DEBUG RELOAD).
//!
//! A snapshot does not write a big set out under its shard lock in one go:
//! it walks the set in steps of a few thousand members, highest first, and
//! lets go of the lock between steps. The set carries a [`CowLog`] while
//! the walk runs; every change to a member ([`CowLog::before_change`],
//! called by the set's own mutators before they change anything) looks at
//! the member once, the first time it is touched since the snapshot point:
//! - a member the walk has not reached yet (ordered below the walk's
//!   cursor) has its old (member, score) saved in the log;
//! - a member the walk already wrote needs nothing saved;
//! - a member that did not exist (added after the snapshot point) needs
//!   nothing saved;
//!
//! and in every case the member goes to the `done` set, which the walk
//! skips. So each member of the set as of the snapshot point is written
//! exactly once, by the walk or from the saved list, whatever happens
//! later: score changes that move a member across the cursor either way,
//! removals, re-additions, range removals and pops (each removed member is
//! looked at first). The walk resumes by a search for the cursor's
//! (score, member), not by a node position, so nodes freed, reused or
//! moved between steps cannot mislead it.
//!
//! When the set leaves the keyspace or changes shape (DEL, RENAME, a
//! conversion, dropped), [`CowLog::finish`] moves what the walk has not
//! reached into the saved list first, and the walk ends there.
//!
//! What the log holds (saved pairs and touched members) is the memory the
//! snapshot costs, counted in the snapshot's shared counter
//! ([`CowCounter`]): INFO's `current_cow_size`.

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;

pub use crate::engine::cow::{captures_alive, CowCounter, LogAlive};

use super::skiplist::{SkipList, NIL};

/// Rough cost of one saved pair or touched member besides its bytes (the
/// box, the table slot, the score).
const ENTRY_OVERHEAD: usize = 32;

/// The walk's state and the copies made before writes, for one big set.
#[derive(Debug)]
pub struct CowLog {
    /// The last (score, member) the walk visited; the walk goes highest
    /// first, so every member ordered at or above it has been visited.
    /// `None`: nothing visited yet.
    cursor: Option<(f64, Box<[u8]>)>,
    /// Members touched since the snapshot point: their point-in-time state
    /// is settled (written by the walk, saved here, or absent), the walk
    /// skips them.
    done: HashSet<Box<[u8]>, ahash::RandomState>,
    /// Point-in-time (member, score) pairs saved before a change, or moved
    /// here by [`CowLog::finish`].
    saved: Vec<(Box<[u8]>, f64)>,
    /// The walk is over: nothing is left in the set for it.
    finished: bool,
    /// Bytes counted in `counter` for this log.
    held: usize,
    counter: Arc<CowCounter>,
    _alive: LogAlive,
}

/// A log shared by the set (which feeds it) and the snapshot (which reads
/// it when the walk is over).
pub type SharedCow = Arc<Mutex<CowLog>>;

/// Whether (s, m) is ordered before (cs, cm) (score, then member bytes).
fn before(s: f64, m: &[u8], cs: f64, cm: &[u8]) -> bool {
    s < cs || (s == cs && m < cm)
}

impl CowLog {
    /// A log for a walk that has visited nothing.
    pub fn new(counter: Arc<CowCounter>) -> SharedCow {
        Arc::new(Mutex::new(CowLog {
            _alive: LogAlive::new(),
            cursor: None,
            done: HashSet::default(),
            saved: Vec::new(),
            finished: false,
            held: 0,
            counter,
        }))
    }

    fn hold(&mut self, n: usize) {
        self.held += n;
        self.counter.add(n);
    }

    fn save(&mut self, member: &[u8], score: f64) {
        self.hold(member.len() + ENTRY_OVERHEAD);
        self.saved.push((member.into(), score));
    }

    /// Whether the walk has not visited (score, member) yet.
    fn ahead_of_walk(&self, score: f64, member: &[u8]) -> bool {
        match &self.cursor {
            None => true,
            Some((cs, cm)) => before(score, member, *cs, cm),
        }
    }

    /// Called before `member` changes: `old` is its score now, `None` when
    /// it is about to be added.
    pub(super) fn before_change(&mut self, member: &[u8], old: Option<f64>) {
        if self.finished || self.done.contains(member) {
            return;
        }
        self.hold(member.len() + ENTRY_OVERHEAD);
        self.done.insert(member.into());
        if let Some(s) = old {
            if self.ahead_of_walk(s, member) {
                self.save(member, s);
            }
        }
    }

    /// One step of the walk over `sl`: visits up to `budget` members below
    /// the cursor, highest first, and calls `emit` on each not touched
    /// since the snapshot point. True when the walk is over.
    pub(super) fn step(
        &mut self,
        sl: &SkipList,
        budget: usize,
        emit: &mut dyn FnMut(&[u8], f64),
    ) -> bool {
        if self.finished {
            return true;
        }
        let mut x = match &self.cursor {
            None => sl.last(),
            Some((s, m)) => sl.seek_before(*s, m),
        };
        let mut visited = 0;
        let mut last = NIL;
        while x != NIL && visited < budget {
            let (m, s) = sl.entry(x);
            if self.done.is_empty() || !self.done.contains(m) {
                emit(m, s);
            }
            last = x;
            visited += 1;
            x = sl.prev(x);
        }
        if last != NIL {
            let (m, s) = sl.entry(last);
            self.cursor = Some((s, m.into()));
        }
        if x == NIL {
            self.finished = true;
        }
        self.finished
    }

    /// Ends the walk now: every member of `sl` it has not visited and that
    /// is untouched is saved (the set is about to leave the keyspace or
    /// change shape).
    pub(super) fn finish(&mut self, sl: &SkipList) {
        if self.finished {
            return;
        }
        let mut x = match &self.cursor {
            None => sl.last(),
            Some((s, m)) => sl.seek_before(*s, m),
        };
        while x != NIL {
            let (m, s) = sl.entry(x);
            if !self.done.contains(m) {
                self.save(m, s);
            }
            x = sl.prev(x);
        }
        self.finished = true;
    }

    /// Whether the walk is over.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The saved pairs, once the walk is over; the log holds nothing after.
    pub fn take_saved(&mut self) -> Vec<(Box<[u8]>, f64)> {
        let saved = std::mem::take(&mut self.saved);
        self.done = HashSet::default();
        self.counter.sub(self.held);
        self.held = 0;
        saved
    }
}

impl Drop for CowLog {
    fn drop(&mut self) {
        self.counter.sub(self.held);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::super::{RangeByScore, ZSet, ZSetLimits};
    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        /// A walk step of this many members.
        Step(usize),
        Incr(usize, i8),
        Set(usize, i8),
        Remove(usize),
        RemoveRank(usize, usize),
        RemoveScore(i8, i8),
        PopMin(usize),
        PopMax(usize),
        /// The set leaves the keyspace (DEL, RENAME): the capture ends.
        End,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1usize..40).prop_map(Op::Step),
            4 => (0usize..400, -3i8..4).prop_map(|(m, d)| Op::Incr(m, d)),
            3 => (0usize..400, -3i8..4).prop_map(|(m, s)| Op::Set(m, s)),
            2 => (0usize..400).prop_map(Op::Remove),
            1 => (0usize..300, 0usize..20).prop_map(|(a, n)| Op::RemoveRank(a, n)),
            1 => (-3i8..4, 0i8..2).prop_map(|(a, n)| Op::RemoveScore(a, n)),
            1 => (0usize..8).prop_map(Op::PopMin),
            1 => (0usize..8).prop_map(Op::PopMax),
            1 => Just(Op::End),
        ]
    }

    fn member(i: usize) -> Vec<u8> {
        format!("m{i}").into_bytes()
    }

    fn contents(z: &ZSet) -> BTreeMap<Vec<u8>, u64> {
        z.iter().map(|(m, s)| (m.to_vec(), s.to_bits())).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Random writes interleaved with walk steps: what the walk emits
        /// plus what the log saved is exactly the set as it was when the
        /// capture began, each member once, and the held memory goes back
        /// to zero.
        #[test]
        fn walk_plus_saved_is_the_set_at_the_start(
            scores in proptest::collection::vec(-3i8..4, 1..250),
            ops in proptest::collection::vec(op(), 0..120),
        ) {
            let limits = ZSetLimits::default();
            let mut z = ZSet::new();
            z.convert_to_skiplist();
            for (i, s) in scores.iter().enumerate() {
                z.insert(&member(i), *s as f64, limits);
            }
            let at_start = contents(&z);
            let counter = Arc::new(CowCounter::default());
            let log = z.begin_snapshot(counter.clone()).expect("a skiplist");
            let mut emitted: Vec<(Vec<u8>, u64)> = Vec::new();
            let mut over = false;
            for op in ops {
                match op {
                    Op::Step(n) => {
                        if !over {
                            over = z.snapshot_step(n, &mut |m, s| emitted.push((m.to_vec(), s.to_bits())));
                        }
                    }
                    Op::Incr(m, d) => {
                        let _ = z.incr(&member(m), d as f64, limits);
                    }
                    Op::Set(m, s) => {
                        z.insert(&member(m), s as f64, limits);
                    }
                    Op::Remove(m) => {
                        z.remove(&member(m));
                    }
                    Op::RemoveRank(a, n) => {
                        z.remove_range_by_rank(a, a + n);
                    }
                    Op::RemoveScore(a, n) => {
                        let range = RangeByScore {
                            min: a as f64,
                            max: (a + n) as f64,
                            min_exclusive: false,
                            max_exclusive: n == 0,
                        };
                        z.remove_range_by_score(&range);
                    }
                    Op::PopMin(n) => {
                        z.pop_min(n, |_, _| {});
                    }
                    Op::PopMax(n) => {
                        z.pop_max(n, |_, _| {});
                    }
                    Op::End => {
                        z.end_snapshot();
                        over = true;
                    }
                }
                z.check();
            }
            while !over {
                over = z.snapshot_step(7, &mut |m, s| emitted.push((m.to_vec(), s.to_bits())));
            }
            prop_assert!(!z.is_captured_by(&log));
            let saved = {
                let mut l = log.lock();
                prop_assert!(l.is_finished());
                l.take_saved()
            };
            emitted.extend(saved.iter().map(|(m, s)| (m.to_vec(), s.to_bits())));
            let n = emitted.len();
            let got: BTreeMap<Vec<u8>, u64> = emitted.into_iter().collect();
            prop_assert_eq!(n, got.len(), "a member written twice");
            prop_assert_eq!(got, at_start);
            prop_assert_eq!(counter.now(), 0);
        }
    }

    /// A set dropped in the middle of its walk leaves the rest in the log.
    #[test]
    fn dropped_set_saves_the_rest() {
        let limits = ZSetLimits::default();
        let mut z = ZSet::new();
        z.convert_to_skiplist();
        for i in 0..100 {
            z.insert(&member(i), i as f64, limits);
        }
        let log = z.begin_snapshot(Arc::new(CowCounter::default())).unwrap();
        let mut n = 0;
        assert!(!z.snapshot_step(30, &mut |_, _| n += 1));
        z.incr(&member(5), 1000.0, limits).unwrap();
        drop(z);
        let mut l = log.lock();
        assert!(l.is_finished());
        assert_eq!(n + l.take_saved().len(), 100);
    }
}
