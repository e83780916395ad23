//! What every point-in-time capture of a big value shares: the memory
//! counter ([`CowCounter`], INFO's `current_cow_size`), the count of
//! captures alive, and the copy-before-write log of a value stored in an
//! append-only arena ([`ArenaLog`]: big hashes and sets).
//!
//! A snapshot never writes a big value out under its shard lock in one go.
//! Each kind of value has the cheapest way to stay readable as of the
//! snapshot point while writes go on:
//! - sorted sets and leaderboards (`zset::cow`, `leaderboard::cow`): a walk
//!   in the set's order with a cursor, and a log that saves a member the
//!   walk has not reached before it changes;
//! - hashes and sets (here, [`ArenaLog`]): their entries live back to back
//!   in one arena, so while a capture runs the table writes every new or
//!   changed entry at the arena's end and compacts nothing; the entries
//!   as of the snapshot point stay where they were, and the walk reads the
//!   arena's first `end` bytes in steps. An entry that was live at the
//!   snapshot point and is removed or replaced before the walk reaches it
//!   is only *noted* (its offset), never copied: its bytes are still there;
//! - lists and streams (`list`, `stream`): their nodes / blocks are shared
//!   (`Arc`) and copied by the value before a write changes a shared one,
//!   so a capture is a copy of the node pointers, read outside the lock.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// Bytes a snapshot holds because of writes made while it runs, shared by
/// every structure it captured.
#[derive(Debug, Default)]
pub struct CowCounter {
    now: AtomicU64,
    peak: AtomicU64,
}

impl CowCounter {
    /// Adds `n` bytes held.
    pub fn add(&self, n: usize) {
        let now = self.now.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    /// Removes `n` bytes no longer held.
    pub fn sub(&self, n: usize) {
        let _ = self
            .now
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_sub(n as u64))
            });
    }

    /// Bytes held now.
    pub fn now(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }

    /// The most bytes held at once.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
}

/// Logs alive in the process: when 0, no value anywhere carries one, and
/// code that would have to end captures (SWAPDB) need not look.
static LOGS_ALIVE: AtomicUsize = AtomicUsize::new(0);

/// Whether some snapshot capture may be running on some set.
pub fn captures_alive() -> bool {
    LOGS_ALIVE.load(Ordering::Relaxed) != 0
}

/// One more log alive while held (for logs of other structures, such as
/// a leaderboard's).
#[derive(Debug)]
pub struct LogAlive(());

impl LogAlive {
    /// Counts one log alive until dropped.
    #[allow(clippy::new_without_default)]
    pub fn new() -> LogAlive {
        LOGS_ALIVE.fetch_add(1, Ordering::Relaxed);
        LogAlive(())
    }
}

impl Drop for LogAlive {
    fn drop(&mut self) {
        LOGS_ALIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a table keeping its entries back to back in an arena answers for
/// an [`ArenaLog`] walk.
pub trait ArenaEntries {
    /// The arena.
    fn arena(&self) -> &[u8];
    /// Bytes the entry at `off` takes (0: no entry parses there).
    fn entry_size(&self, off: usize) -> usize;
    /// Whether the table points at the entry at `off` now.
    fn is_live(&self, off: usize) -> bool;
}

/// A table keeping its entries in an arena that carries the capture
/// walking it (a `hashtable` hash or set): [`ArenaCapture::step_of`] and
/// [`ArenaCapture::finish_of`] take the link out, walk the table and put
/// it back, which the table could not do while lending itself.
pub trait CapturedArena: ArenaEntries {
    /// The table's link to its capture.
    fn capture_mut(&mut self) -> &mut ArenaCapture;
}

/// Rough cost of one noted offset (its table slot).
const NOTE_COST: usize = 16;

/// The walk over an arena's first `end` bytes (its length at the snapshot
/// point) and the entries live then that were removed or replaced since.
#[derive(Debug)]
pub struct ArenaLog {
    end: usize,
    /// The next offset the walk reads; every entry before it is written.
    cursor: usize,
    /// Offsets at or after the cursor of entries live at the snapshot
    /// point and removed or replaced since (their bytes are still there).
    killed: HashSet<usize, ahash::RandomState>,
    /// Raw entries saved when the walk was ended early (the table left).
    saved: Vec<u8>,
    finished: bool,
    /// Bytes counted in `counter` for this log.
    held: usize,
    counter: Arc<CowCounter>,
    _alive: LogAlive,
}

/// A log shared by the table (which feeds it) and the snapshot.
pub type SharedArenaLog = Arc<Mutex<ArenaLog>>;

impl ArenaLog {
    /// A log for a walk over an arena of `end` bytes that has read nothing.
    pub fn new(end: usize, counter: Arc<CowCounter>) -> SharedArenaLog {
        Arc::new(Mutex::new(ArenaLog {
            end,
            cursor: 0,
            killed: HashSet::default(),
            saved: Vec::new(),
            finished: end == 0,
            held: 0,
            counter,
            _alive: LogAlive::new(),
        }))
    }

    fn hold(&mut self, n: usize) {
        self.held += n;
        self.counter.add(n);
    }

    fn release(&mut self, n: usize) {
        let n = n.min(self.held);
        self.held -= n;
        self.counter.sub(n);
    }

    /// Whether the walk is over.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Called before the entry at `off`, live now, stops being live (its
    /// key removed, or its value written elsewhere). `size`: its bytes,
    /// which the table keeps (and counts as held) until the walk is over.
    pub fn before_kill(&mut self, off: usize, size: usize) {
        if self.finished {
            return;
        }
        if off >= self.cursor && off < self.end && self.killed.insert(off) {
            self.hold(NOTE_COST);
        }
        // Kept in the arena (no compaction) until the walk is over.
        self.hold(size);
    }

    /// Bytes appended while the capture runs that an in-place write
    /// would not have needed.
    pub fn note_growth(&mut self, size: usize) {
        if !self.finished {
            self.hold(size);
        }
    }

    /// One step: reads up to `budget` entries from the cursor and calls
    /// `emit` on each raw entry that was live at the snapshot point. True
    /// when the walk is over.
    pub fn step(
        &mut self,
        t: &dyn ArenaEntries,
        budget: usize,
        emit: &mut dyn FnMut(&[u8]),
    ) -> bool {
        let arena = t.arena();
        let mut read = 0;
        while !self.finished && read < budget {
            let off = self.cursor;
            let size = t.entry_size(off);
            let raw = (size > 0).then(|| arena.get(off..off + size)).flatten();
            let (Some(raw), true) = (raw, off < self.end) else {
                self.finished = true;
                break;
            };
            let killed = !self.killed.is_empty() && self.killed.remove(&off);
            if killed {
                self.release(NOTE_COST);
            }
            if killed || t.is_live(off) {
                emit(raw);
            }
            self.cursor = off + size;
            read += 1;
            self.finished = self.cursor >= self.end;
        }
        self.finished
    }

    /// Ends the walk now (the table is about to go or change shape): the
    /// entries it has not read are saved.
    pub fn finish(&mut self, t: &dyn ArenaEntries) {
        let mut saved = std::mem::take(&mut self.saved);
        self.step(t, usize::MAX, &mut |raw| saved.extend_from_slice(raw));
        let n = saved.len();
        self.saved = saved;
        self.hold(n);
    }

    /// The raw entries saved by [`ArenaLog::finish`], once the walk is
    /// over; the log holds nothing after (the table may compact again).
    pub fn take_saved(&mut self) -> Vec<u8> {
        let saved = std::mem::take(&mut self.saved);
        self.killed = HashSet::default();
        self.release(self.held);
        saved
    }
}

impl Drop for ArenaLog {
    fn drop(&mut self) {
        self.counter.sub(self.held);
    }
}

/// A table's link to the capture walking it, if any. A copy of the table
/// (COPY, DEBUG RELOAD's clone) is not captured: cloning gives `None`.
#[derive(Debug, Default)]
pub struct ArenaCapture(Option<SharedArenaLog>);

impl Clone for ArenaCapture {
    fn clone(&self) -> Self {
        ArenaCapture(None)
    }
}

impl From<SharedArenaLog> for ArenaCapture {
    fn from(log: SharedArenaLog) -> Self {
        ArenaCapture(Some(log))
    }
}

impl ArenaCapture {
    /// Starts a capture of a table whose arena is `end` bytes long now.
    pub fn begin(&mut self, end: usize, counter: Arc<CowCounter>) -> SharedArenaLog {
        let log = ArenaLog::new(end, counter);
        self.0 = Some(log.clone());
        log
    }

    /// Whether the arena must keep every entry where it is (no write in
    /// place, no compaction): a walk is reading it.
    #[inline]
    pub fn pins_arena(&self) -> bool {
        self.0.is_some()
    }

    /// Whether `log` is this table's capture.
    pub fn is(&self, log: &SharedArenaLog) -> bool {
        self.0.as_ref().is_some_and(|c| Arc::ptr_eq(c, log))
    }

    /// See [`ArenaLog::before_kill`].
    #[inline]
    pub fn before_kill(&self, off: usize, size: usize) {
        if let Some(c) = &self.0 {
            c.lock().before_kill(off, size);
        }
    }

    /// See [`ArenaLog::note_growth`].
    #[inline]
    pub fn note_growth(&self, size: usize) {
        if let Some(c) = &self.0 {
            c.lock().note_growth(size);
        }
    }

    /// One step of the walk over `t`, the table holding this capture,
    /// calling `emit` on each raw entry of the snapshot point among the
    /// next `budget`; true (and `t` no longer captured) when it is over.
    pub fn step_of<T: CapturedArena>(
        t: &mut T,
        budget: usize,
        emit: &mut dyn FnMut(&[u8]),
    ) -> bool {
        let Some(log) = t.capture_mut().take() else {
            return true;
        };
        let over = log.lock().step(&*t, budget, emit);
        if !over {
            *t.capture_mut() = ArenaCapture::from(log);
        }
        over
    }

    /// Ends the capture of `t` now (it leaves the keyspace or goes),
    /// saving in the log what the walk has not read.
    pub fn finish_of<T: CapturedArena>(t: &mut T) {
        if let Some(log) = t.capture_mut().take() {
            log.lock().finish(&*t);
        }
    }

    /// Drops the capture without finishing it (the snapshot gave up).
    pub fn abandon(&mut self) {
        self.0 = None;
    }

    /// Takes the link out (to finish it against a table borrowed apart).
    pub fn take(&mut self) -> Option<SharedArenaLog> {
        self.0.take()
    }
}

#[cfg(test)]
mod tests {
    //! Each capture, under random writes between its steps: what it reads
    //! is exactly the value as of its start, each element once, and the
    //! memory it held goes back to zero.

    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::engine::hash::{HashLimits, HashValue};
    use crate::engine::list::{InsertWhere, ListLimits, ListValue};
    use crate::engine::set::SetValue;
    use crate::engine::stream::{Group, Stream, StreamId, Trim};

    #[derive(Debug, Clone)]
    enum Op {
        /// A walk step over this many entries.
        Step(usize),
        /// Set element `.0` to a value of length `.1` (same length: the
        /// write a table would do in place).
        Set(usize, usize),
        Remove(usize),
        /// The value leaves the keyspace (DEL, RENAME): the capture ends.
        End,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1usize..40).prop_map(Op::Step),
            5 => (0usize..300, 1usize..4).prop_map(|(i, l)| Op::Set(i, l)),
            3 => (0usize..300).prop_map(Op::Remove),
            1 => Just(Op::End),
        ]
    }

    fn name(i: usize) -> Vec<u8> {
        format!("f{i}").into_bytes()
    }

    fn hash_contents(h: &HashValue) -> BTreeMap<Vec<u8>, Vec<u8>> {
        h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect()
    }

    const TABLE: HashLimits = HashLimits {
        max_listpack_entries: 0,
        max_listpack_value: 64,
    };

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn hash_walk_plus_saved_is_the_hash_at_the_start(
            n in 1usize..250,
            ops in proptest::collection::vec(op(), 0..150),
        ) {
            let mut h = HashValue::new();
            for i in 0..n {
                h.set(&name(i), format!("v{}", i % 7).as_bytes(), TABLE);
            }
            let at_start = hash_contents(&h);
            let counter = Arc::new(CowCounter::default());
            let log = h.begin_snapshot(counter.clone()).expect("a hashtable");
            let mut got: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            let mut over = false;
            for op in ops {
                match op {
                    Op::Step(k) if !over => {
                        over = h.snapshot_step(k, &mut |f, v| got.push((f.to_vec(), v.to_vec())));
                    }
                    Op::Step(_) => {}
                    Op::Set(i, l) => {
                        h.set(&name(i), &vec![b'a' + (i % 26) as u8; l], TABLE);
                    }
                    Op::Remove(i) => {
                        h.remove(&name(i));
                    }
                    Op::End => {
                        h.end_snapshot();
                        over = true;
                    }
                }
            }
            while !over {
                over = h.snapshot_step(7, &mut |f, v| got.push((f.to_vec(), v.to_vec())));
            }
            prop_assert!(!h.is_captured_by(&log));
            let saved = log.lock().take_saved();
            crate::engine::hash::for_each_saved_pair(&saved, &mut |f, v| got.push((f.to_vec(), v.to_vec())));
            let count = got.len();
            let got: BTreeMap<_, _> = got.into_iter().collect();
            prop_assert_eq!(count, got.len(), "a field written twice");
            prop_assert_eq!(got, at_start);
            drop(log);
            prop_assert_eq!(counter.now(), 0);
        }

        #[test]
        fn set_walk_plus_saved_is_the_set_at_the_start(
            n in 1usize..250,
            ops in proptest::collection::vec(op(), 0..150),
        ) {
            let mut s = SetValue::new();
            for i in 0..n {
                s.insert(&name(i), 0);
            }
            let at_start: BTreeMap<Vec<u8>, ()> = s.iter().map(|m| (m.to_vec(), ())).collect();
            let counter = Arc::new(CowCounter::default());
            let log = s.begin_snapshot(counter.clone()).expect("a hashtable");
            let mut got: Vec<Vec<u8>> = Vec::new();
            let mut over = false;
            for op in ops {
                match op {
                    Op::Step(k) if !over => {
                        over = s.snapshot_step(k, &mut |m| got.push(m.to_vec()));
                    }
                    Op::Step(_) => {}
                    Op::Set(i, _) => {
                        s.insert(&name(i), 0);
                    }
                    Op::Remove(i) => {
                        s.remove(&name(i));
                    }
                    Op::End => {
                        s.end_snapshot();
                        over = true;
                    }
                }
            }
            while !over {
                over = s.snapshot_step(7, &mut |m| got.push(m.to_vec()));
            }
            let saved = log.lock().take_saved();
            crate::engine::set::for_each_saved_member(&saved, &mut |m| got.push(m.to_vec()));
            let count = got.len();
            let got: BTreeMap<Vec<u8>, ()> = got.into_iter().map(|m| (m, ())).collect();
            prop_assert_eq!(count, got.len(), "a member written twice");
            prop_assert_eq!(got, at_start);
            drop(log);
            prop_assert_eq!(counter.now(), 0);
        }

        /// A list's capture is a copy sharing its nodes: every write after
        /// it copies a shared node first, so the copy keeps the list as it
        /// was.
        #[test]
        fn list_share_keeps_the_list_at_the_start(
            n in 1usize..600,
            ops in proptest::collection::vec((0u8..7, 0usize..700, 0usize..4), 0..120),
        ) {
            let lim = ListLimits { max_listpack_size: 8 };
            let mut l = ListValue::new();
            for i in 0..n {
                l.push_back([name(i).as_slice()], lim);
            }
            let at_start: Vec<Vec<u8>> = l.iter().map(|e| e.to_vec()).collect();
            let copy = l.share();
            for (kind, i, k) in ops {
                let v = name(i);
                match kind {
                    0 => l.push_front([v.as_slice()], lim),
                    1 => l.push_back([v.as_slice()], lim),
                    2 => { l.pop_front(k); }
                    3 => { l.pop_back(k); }
                    4 => { let _ = l.set(i as i64, b"x", lim); }
                    5 => { l.insert(InsertWhere::After, &name(i / 2), b"y", lim); }
                    _ => { l.remove(k as i64, &name(i), lim); l.trim(k as i64, -1 - k as i64); }
                }
            }
            let got: Vec<Vec<u8>> = copy.iter().map(|e| e.to_vec()).collect();
            prop_assert_eq!(got, at_start);
        }

        /// A stream's capture shares its blocks the same way, and its
        /// groups' pending entries lists by chunks: deliveries, claims,
        /// acknowledgements and consumers deleted after it leave the
        /// copy's groups as they were.
        #[test]
        fn stream_share_keeps_the_stream_at_the_start(
            n in 1u64..600,
            pending in 0u64..600,
            ops in proptest::collection::vec((0u8..7, 0u64..700), 0..160),
        ) {
            let mut st = Stream::new();
            let mut next = 1u64;
            for _ in 0..n {
                st.append(StreamId::new(next, 0), &[b"f", b"v"]);
                next += 1;
            }
            let consumer = |i: u64| format!("c{}", i % 5).into_bytes();
            for name in [&b"g1"[..], b"g2"] {
                let mut g = Group::new(StreamId::MIN, None);
                for i in 0..pending.min(n) {
                    g.assign(StreamId::new(i + 1, 0), &consumer(i), i, 1);
                }
                st.groups.insert(name.to_vec(), g);
            }
            type Groups = Vec<(Vec<u8>, Vec<(StreamId, Vec<u8>, u64, u64)>, Vec<(Vec<u8>, u64, Vec<StreamId>)>)>;
            let groups = |st: &Stream| -> Groups {
                st.groups
                    .iter()
                    .map(|(name, g)| {
                        let pel = g
                            .pel
                            .iter()
                            .map(|(id, p)| (*id, p.consumer.to_vec(), p.delivery_time, p.delivery_count))
                            .collect();
                        let consumers = g
                            .consumers
                            .iter()
                            .map(|(c, x)| (c.to_vec(), x.seen_time, x.pel.iter().copied().collect()))
                            .collect();
                        (name.clone(), pel, consumers)
                    })
                    .collect()
            };
            let groups_at_start = groups(&st);
            let contents = |st: &Stream| {
                let mut out: Vec<(StreamId, Vec<Vec<u8>>)> = Vec::new();
                st.for_each_in(StreamId::MIN, StreamId::MAX, false, |id, f| {
                    out.push((id, f.iter().map(|x| x.to_vec()).collect()));
                    true
                });
                out
            };
            let at_start = contents(&st);
            let copy = st.share();
            for (kind, i) in ops {
                let id = StreamId::new(i, 0);
                let g = st.groups.get_mut(&b"g1"[..]);
                match (kind, g) {
                    (0, _) => { st.append(StreamId::new(next, 0), &[b"g", b"w"]); next += 1; }
                    (1, _) => { st.delete(id); }
                    (2, _) => { st.trim(Trim::MaxLen(i), false, 0); }
                    // XREADGROUP / XCLAIM: (re)delivered to a consumer.
                    (3, Some(g)) => g.assign(id, &consumer(i / 3), 1000 + i, 2),
                    (4, Some(g)) => { g.ack(id); }
                    // XCLAIM's retry count bumped in place.
                    (5, Some(g)) => {
                        if let Some(p) = g.pel.get_mut(&id) {
                            p.delivery_count += 1;
                        }
                    }
                    (_, Some(g)) => { g.delete_consumer(&consumer(i)); }
                    (_, None) => {}
                }
            }
            prop_assert_eq!(contents(&copy), at_start);
            prop_assert_eq!(copy.len(), n);
            prop_assert_eq!(groups(&copy), groups_at_start);
        }
    }
}
