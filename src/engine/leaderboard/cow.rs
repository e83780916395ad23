//! Copy-before-write of one big leaderboard, entry by entry, for a
//! point-in-time snapshot (BGSAVE, SAVE, the AOF rewrite, DEBUG RELOAD):
//! the same scheme as a big sorted set's (`engine::zset::cow`), over the
//! board's own order.
//!
//! The snapshot walks the board's current period in steps of a few
//! thousand entries, best first, and lets go of the shard lock between
//! steps. While it runs the board carries a [`BoardCowLog`]; every change
//! to an entry (a submit or incr that changes it, a restore, a removal, an
//! eviction by CAPACITY, a new member) tells the log first, once per member
//! since the snapshot point:
//! - an entry the walk has not reached (ordered after the walk's cursor)
//!   has its whole point-in-time state saved (member, score, subscore,
//!   time, metadata);
//! - an entry the walk already wrote, or a member that was not on the
//!   board, needs nothing saved;
//!
//! and the member goes to the `done` set, which the walk skips. So each
//! entry of the board as of the snapshot point is written exactly once.
//! The walk resumes by a search for the cursor's key (score, subscore,
//! time, member), never by a leaf position, so leaves split, merged, or a
//! whole board rebuilt by compaction between steps cannot mislead it.
//!
//! What the walk covers is the entries only: a board's options, season,
//! closed periods and dedup window are written when the snapshot captures
//! its shard (they are small, or on disk and written as references). When
//! the board leaves the keyspace or its period closes (LB.RESET, a season
//! boundary: its entries move into a closed period), [`BoardCowLog::finish`]
//! saves what the walk has not reached, and the walk ends there.

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;

use super::tree::{ID_MASK, NIL};
use super::{EntryRef, Leaderboard};
use crate::engine::zset::cow::{CowCounter, LogAlive};

/// Rough cost of one saved entry or touched member besides its bytes.
const ENTRY_OVERHEAD: usize = 48;

/// An entry saved before a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedEntry {
    pub member: Box<[u8]>,
    pub score: i64,
    pub subscore: i64,
    pub time: u64,
    pub meta: Option<Box<[u8]>>,
}

impl SavedEntry {
    fn of(e: EntryRef<'_>) -> SavedEntry {
        SavedEntry {
            member: e.member.into(),
            score: e.score,
            subscore: e.subscore,
            time: e.time,
            meta: e.meta.map(Into::into),
        }
    }

    /// The entry, borrowed.
    pub fn as_ref(&self) -> EntryRef<'_> {
        EntryRef {
            member: &self.member,
            score: self.score,
            subscore: self.subscore,
            time: self.time,
            meta: self.meta.as_deref(),
        }
    }

    fn bytes(&self) -> usize {
        self.member.len() + self.meta.as_ref().map_or(0, |m| m.len()) + ENTRY_OVERHEAD
    }
}

/// The walk's state and the copies made before writes, for one big board.
#[derive(Debug)]
pub struct BoardCowLog {
    /// The last entry the walk visited (score, subscore, time, member):
    /// every entry ordered at or before it has been visited.
    cursor: Option<(i64, i64, u64, Box<[u8]>)>,
    /// Members touched since the snapshot point; the walk skips them.
    done: HashSet<Box<[u8]>, ahash::RandomState>,
    /// Point-in-time entries saved before a change or by `finish`.
    saved: Vec<SavedEntry>,
    finished: bool,
    held: usize,
    counter: Arc<CowCounter>,
    _alive: LogAlive,
}

/// A log shared by the board (which feeds it) and the snapshot.
pub type SharedBoardCow = Arc<Mutex<BoardCowLog>>;

impl BoardCowLog {
    /// A log for a walk that has visited nothing.
    pub fn new(counter: Arc<CowCounter>) -> SharedBoardCow {
        Arc::new(Mutex::new(BoardCowLog {
            cursor: None,
            done: HashSet::default(),
            saved: Vec::new(),
            finished: false,
            held: 0,
            counter,
            _alive: LogAlive::new(),
        }))
    }

    fn hold(&mut self, n: usize) {
        self.held += n;
        self.counter.add(n);
    }

    fn save(&mut self, e: EntryRef<'_>) {
        let s = SavedEntry::of(e);
        self.hold(s.bytes());
        self.saved.push(s);
    }

    /// Whether `e` of board `b` is ordered after the walk's cursor.
    fn ahead_of_walk(&self, b: &Leaderboard, e: &EntryRef<'_>) -> bool {
        match &self.cursor {
            None => true,
            Some((s, ss, t, m)) => {
                b.store.key_of(e.score, e.subscore, e.time, e.member)
                    > b.store.key_of(*s, *ss, *t, m)
            }
        }
    }

    /// Called before `member` of board `b` changes: `old` is its entry
    /// now, `None` when it is about to be added.
    pub(super) fn before_change(&mut self, b: &Leaderboard, member: &[u8], old: Option<u32>) {
        if self.finished || self.done.contains(member) {
            return;
        }
        self.hold(member.len() + ENTRY_OVERHEAD);
        self.done.insert(member.into());
        if let Some(id) = old {
            let e = b.entry_ref(id);
            if self.ahead_of_walk(b, &e) {
                self.save(e);
            }
        }
    }

    /// Where the walk goes on: (leaf, index) of the first entry after the
    /// cursor, or None at the end.
    fn resume(&self, b: &Leaderboard) -> Option<(u32, usize)> {
        let pos = match &self.cursor {
            None => 0,
            Some((s, ss, t, m)) => {
                let k = b.store.key_of(*s, *ss, *t, m);
                b.tree
                    .partition(&b.store, |ks, e| b.store.not_after(ks, e, &k))
                    .0
            }
        };
        b.tree.at(pos).map(|f| (f.leaf, f.idx))
    }

    /// Visits up to `budget` entries from the cursor on, in order, calling
    /// `f` on each untouched one; moves the cursor; true at the end.
    fn walk(
        &mut self,
        b: &Leaderboard,
        budget: usize,
        f: &mut dyn FnMut(&mut Self, EntryRef<'_>),
    ) -> bool {
        let Some((mut leaf, mut idx)) = self.resume(b) else {
            return true;
        };
        let mut last = None;
        let mut visited = 0;
        let over = loop {
            if visited == budget {
                break false;
            }
            if leaf == NIL {
                break true;
            }
            let Some(slot) = b.tree.slot(leaf, idx) else {
                leaf = b.tree.next_leaf(leaf);
                idx = 0;
                continue;
            };
            idx += 1;
            visited += 1;
            let id = slot & ID_MASK;
            let e = b.entry_ref(id);
            if self.done.is_empty() || !self.done.contains(e.member) {
                f(self, e);
            }
            last = Some(id);
        };
        if let Some(id) = last {
            let e = b.entry_ref(id);
            self.cursor = Some((e.score, e.subscore, e.time, e.member.into()));
        }
        over
    }

    /// One step of the walk over `b`: emits up to `budget` point-in-time
    /// entries not written yet, in the board's order. True when it is over.
    pub(super) fn step(
        &mut self,
        b: &Leaderboard,
        budget: usize,
        emit: &mut dyn FnMut(EntryRef<'_>),
    ) -> bool {
        if !self.finished && self.walk(b, budget, &mut |_, e| emit(e)) {
            self.finished = true;
        }
        self.finished
    }

    /// Ends the walk now: every untouched entry it has not visited is
    /// saved (the board leaves the keyspace or its period closes).
    pub(super) fn finish(&mut self, b: &Leaderboard) {
        if !self.finished {
            self.walk(b, usize::MAX, &mut |log, e| log.save(e));
            self.finished = true;
        }
    }

    /// Whether the walk is over.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The saved entries, once the walk is over; the log holds nothing
    /// after.
    pub fn take_saved(&mut self) -> Vec<SavedEntry> {
        let saved = std::mem::take(&mut self.saved);
        self.done = HashSet::default();
        self.counter.sub(self.held);
        self.held = 0;
        saved
    }
}

impl Drop for BoardCowLog {
    fn drop(&mut self) {
        self.counter.sub(self.held);
    }
}

/// The board's slot for a running capture. Cloning a board (COPY, a
/// closed period) never clones its capture.
#[derive(Debug, Default)]
pub(super) struct CowSlot(pub Option<SharedBoardCow>);

impl Clone for CowSlot {
    fn clone(&self) -> Self {
        CowSlot(None)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::super::{Options, Order, Policy, Tiebreak};
    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        Step(usize),
        Submit(usize, i8, i8, Option<u8>),
        Incr(usize, i8),
        Remove(usize),
        /// Removes many (the board shrinks and is rebuilt).
        RemoveMany(usize, usize),
        /// The period closes (LB.RESET).
        Reset,
        /// The board leaves the keyspace.
        End,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1usize..40).prop_map(Op::Step),
            4 => (0usize..300, -3i8..4, -1i8..2, proptest::option::of(0u8..3))
                .prop_map(|(m, s, ss, meta)| Op::Submit(m, s, ss, meta)),
            3 => (0usize..300, -3i8..4).prop_map(|(m, d)| Op::Incr(m, d)),
            2 => (0usize..300).prop_map(Op::Remove),
            1 => (0usize..300, 0usize..150).prop_map(|(a, n)| Op::RemoveMany(a, n)),
            1 => Just(Op::Reset),
            1 => Just(Op::End),
        ]
    }

    fn member(i: usize) -> Vec<u8> {
        // Some members long enough to live in the byte heap.
        if i.is_multiple_of(7) {
            format!("a-rather-long-member-name-{i}").into_bytes()
        } else {
            format!("m{i}").into_bytes()
        }
    }

    fn contents(b: &Leaderboard) -> BTreeMap<Vec<u8>, SavedEntry> {
        b.iter()
            .map(|(_, e)| (e.member.to_vec(), SavedEntry::of(e)))
            .collect()
    }

    fn policy() -> impl Strategy<Value = Policy> {
        prop_oneof![Just(Policy::Best), Just(Policy::Set), Just(Policy::Incr)]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Random writes interleaved with walk steps: what the walk emits
        /// plus what the log saved is exactly the board as it was when the
        /// capture began, each entry once, and the memory held goes back
        /// to zero.
        #[test]
        fn walk_plus_saved_is_the_board_at_the_start(
            desc in any::<bool>(),
            latest in any::<bool>(),
            policy in policy(),
            capacity in prop_oneof![Just(0u64), 50u64..200],
            scores in proptest::collection::vec((-3i8..4, -1i8..2), 1..250),
            ops in proptest::collection::vec(op(), 0..120),
        ) {
            let mut b = Leaderboard::new(Options {
                order: if desc { Order::Desc } else { Order::Asc },
                policy,
                tiebreak: if latest { Tiebreak::Latest } else { Tiebreak::Earliest },
                capacity,
                ..Options::default()
            });
            let mut t = 1000u64;
            for (i, (s, ss)) in scores.iter().enumerate() {
                let meta = i.is_multiple_of(3).then(|| vec![b'x'; i % 5]);
                b.submit(&member(i), *s as i64, *ss as i64, t + (i as u64 % 4), meta.as_deref()).unwrap();
            }
            t += 10;
            let at_start = contents(&b);
            let counter = Arc::new(CowCounter::default());
            let log = b.begin_snapshot(counter.clone());
            let mut emitted: Vec<SavedEntry> = Vec::new();
            let mut over = false;
            for op in ops {
                t += 1;
                match op {
                    Op::Step(n) => {
                        if !over {
                            over = b.snapshot_step(n, &mut |e| emitted.push(SavedEntry::of(e)));
                        }
                    }
                    Op::Submit(m, s, ss, meta) => {
                        let meta = meta.map(|k| vec![b'y'; k as usize]);
                        let _ = b.submit(&member(m), s as i64, ss as i64, t, meta.as_deref());
                    }
                    Op::Incr(m, d) => {
                        let _ = b.incr(&member(m), d as i64, t, None);
                    }
                    Op::Remove(m) => {
                        b.remove(&member(m));
                    }
                    Op::RemoveMany(a, n) => {
                        for i in a..a + n {
                            b.remove(&member(i));
                        }
                    }
                    Op::Reset => {
                        b.reset_at(t);
                    }
                    Op::End => {
                        b.end_snapshot();
                        over = true;
                    }
                }
                b.check();
            }
            while !over {
                over = b.snapshot_step(7, &mut |e| emitted.push(SavedEntry::of(e)));
            }
            prop_assert!(!b.is_captured_by(&log));
            let saved = {
                let mut l = log.lock();
                prop_assert!(l.is_finished());
                l.take_saved()
            };
            emitted.extend(saved);
            let n = emitted.len();
            let got: BTreeMap<Vec<u8>, SavedEntry> =
                emitted.into_iter().map(|e| (e.member.to_vec(), e)).collect();
            prop_assert_eq!(n, got.len(), "an entry written twice");
            prop_assert_eq!(got, at_start);
            prop_assert_eq!(counter.now(), 0);
        }
    }

    /// A board dropped in the middle of its walk leaves the rest in the
    /// log.
    #[test]
    fn dropped_board_saves_the_rest() {
        let mut b = Leaderboard::new(Options::default());
        for i in 0..100 {
            b.submit(&member(i), i as i64, 0, 1, None).unwrap();
        }
        let log = b.begin_snapshot(Arc::new(CowCounter::default()));
        let mut n = 0;
        assert!(!b.snapshot_step(30, &mut |_| n += 1));
        b.incr(&member(5), 1000, 2, None).unwrap();
        drop(b);
        let mut l = log.lock();
        assert!(l.is_finished());
        assert_eq!(n + l.take_saved().len(), 100);
    }

    /// A clone of a captured board (COPY) does not feed the log.
    #[test]
    fn a_clone_is_not_captured() {
        let mut b = Leaderboard::new(Options::default());
        for i in 0..10 {
            b.submit(&member(i), i as i64, 0, 1, None).unwrap();
        }
        let log = b.begin_snapshot(Arc::new(CowCounter::default()));
        let mut c = b.clone();
        assert!(!c.is_captured_by(&log));
        c.remove(&member(3));
        assert!(log.lock().saved.is_empty());
    }
}
