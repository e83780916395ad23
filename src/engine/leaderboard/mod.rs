//! Leaderboards (issue 16): the engine behind the native `leaderboard`
//! type. No RESP, no commands, no clock here: the caller passes the time.
//!
//! A [`Leaderboard`] holds entries — a member (bytes, each once), a score
//! and a subscore (`i64`, exact over their whole range), the time the entry
//! reached its current (score, subscore) (`u64` ms), and optional metadata
//! (bytes) — in the board's order:
//! 1. score, per [`Order`] (Desc: higher first);
//! 2. subscore, in the same direction;
//! 3. time, per [`Tiebreak`] (Earliest: who got there first ranks higher);
//! 4. member bytes, ascending.
//!
//! Ranks are 1-based places computed per [`Ranking`]; entries with equal
//! (score, subscore) share a COMPETITION rank (1 + entries strictly better)
//! and a DENSE rank (1 + distinct (score, subscore) values strictly better);
//! the order is the same in all three styles.
//!
//! # API for the commands layer
//! - create: [`Leaderboard::new`] with [`Options`]
//! - write: [`Leaderboard::submit`] (per [`Policy`]), [`Leaderboard::incr`],
//!   [`Leaderboard::remove`], [`Leaderboard::restore`] (an entry as saved)
//! - read: [`Leaderboard::get`], [`Leaderboard::score`],
//!   [`Leaderboard::rank`], [`Leaderboard::len`] / [`Leaderboard::count`],
//!   [`Leaderboard::count_between`], [`Leaderboard::memory_usage`]
//! - ranges ([`Range`] iterators of `(rank, EntryRef)`, no allocation per
//!   entry): [`Leaderboard::range`], [`Leaderboard::around`],
//!   [`Leaderboard::iter`] (every entry in order, for the AOF rewrite)
//! - subsets: [`Leaderboard::among`] (LB.AMONG / LB.FRIENDS).
//! - the dedup window of `ID event-id`: [`Leaderboard::ids`], an
//!   [`IdWindow`] the commands fill (its size is theirs to pass).
//!
//! # Submits, decided here
//! - `Best`: a new member is stored. An existing one takes the submitted
//!   (score, subscore) only when it is strictly better per ORDER (compared
//!   as a pair: score, then subscore); an equal or worse submit changes
//!   nothing, not even the metadata (the entry keeps the time it first
//!   reached that result, which is what EARLIEST rewards).
//! - `Set`: the entry takes the submitted (score, subscore).
//! - `Incr`: the score grows by the submitted one and the subscore becomes
//!   the submitted one; overflow is an error that changes nothing.
//! - The time becomes `at_ms` only when the (score, subscore) changes (or
//!   the entry is new). Metadata given with a submit that is applied
//!   replaces the entry's; `None` keeps it.
//! - CAPACITY n: a new member that would rank after the n-th entry of a
//!   full board is answered (`rank: None`) but not stored; one that ranks
//!   above evicts the last entry ([`SubmitOutcome::evicted`]).
//!
//! # Layout and costs
//! Entries are 40-byte records in an arena (`store`); a hash index
//! (the sorted sets' `MemberIndex`) maps a member to its entry id; a
//! counted B+tree of ids (`tree`) keeps the order, with per-subtree
//! counts of entries and of (score, subscore) groups, so every rank style,
//! place lookup and score count is O(log n) and a range costs O(log n)
//! plus its length. Metadata sits in a side map, paid for only by entries
//! that have some.
//!
//! # Memory
//! Measured by `cargo run --release --example leaderboard_memory` (jemalloc
//! `stats.allocated`, matched by [`Leaderboard::memory_usage`]), DESC
//! boards of `player:<7 digits>` members (14 bytes), random scores, no
//! metadata:
//! - 1,000,000 entries: 55.4 B/entry — a 40-byte entry (members up to 15
//!   bytes inline), 8.4 B of member index (2^21 slots of 4 bytes), ~6 B
//!   of leaves (64 ids of 4 bytes, about 70% full after random inserts),
//!   well under 1 B of inner nodes; 10,000,000 entries: 53.6 B/entry.
//! - 10,000 boards of 100 entries: 67 B/entry (a board's fixed part and
//!   its first allocations are spread over fewer entries).
//! - Metadata costs its bytes (rounded to a size class) plus about 25
//!   bytes of side-map slot, only on entries that have some.
//!
//! - Removals leave freed entries, leaves and index slots for reuse; a
//!   board that shrinks to a quarter of its entry arena is rebuilt in
//!   O(n) (about 65 ms for 250,000 entries on a loaded 2-core machine).
//!
//! Times on that machine (same example, 1,000,000 entries, noisy): a
//! submit 1.5 to 2.5 µs with its rank, a COMPETITION rank 1 µs, one
//! `among` of 5,000 members 3 to 4 ms, the top 100 about 10 µs.
//!
//! No `unsafe` here. Closed periods on disk: [`disk`].

pub mod cow;
pub mod disk;
mod ids;
pub mod schedule;
mod season;
mod store;
mod tree;

pub use ids::IdWindow;
pub use schedule::{next_boundary, Cron, Schedule, Zone};
pub use season::{
    Archive, ArchiveData, ArchiveMode, Due, PeriodView, Season, SeasonOptions, Source,
};

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod season_tests;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::engine::zset::alloc_size;
use crate::engine::zset::index::MemberIndex;

use cow::{BoardCowLog, CowSlot, SharedBoardCow};
use store::Store;
use tree::{Placed, Tree, GROUP_END, ID_MASK, NIL};

/// Smallest entry arena [`Leaderboard::compact`] rebuilds (small in tests,
/// so that the model tests rebuild often).
const COMPACT_MIN: usize = if cfg!(test) { 16 } else { 1024 };

/// Which scores rank first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// Higher scores first.
    #[default]
    Desc,
    /// Lower scores first.
    Asc,
}

/// What a submit does to an existing member's score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Keep the better of the old and new (score, subscore), per ORDER.
    #[default]
    Best,
    /// Replace.
    Set,
    /// Add to the score.
    Incr,
}

/// Among equal (score, subscore), who ranks higher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tiebreak {
    /// Who reached it first.
    #[default]
    Earliest,
    /// Who reached it last.
    Latest,
}

/// How equal (score, subscore) values are ranked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ranking {
    /// 1, 2, 3, 4: the place.
    #[default]
    Ordinal,
    /// 1, 2, 2, 4: 1 + entries strictly better.
    Competition,
    /// 1, 2, 2, 3: 1 + distinct values strictly better.
    Dense,
}

/// Option words as LB.CREATE takes them and LB.INFO and the AOF rewrite
/// write them (upper case; parsed case-insensitively).
macro_rules! option_words {
    ($t:ty { $($v:ident => $w:literal),* $(,)? }) => {
        impl $t {
            /// The option word (`DESC`, `BEST`, ...).
            pub fn name(self) -> &'static str {
                match self { $(<$t>::$v => $w),* }
            }

            /// The value named by `word` (ASCII case-insensitive).
            pub fn from_name(word: &[u8]) -> Option<Self> {
                $(if word.eq_ignore_ascii_case($w.as_bytes()) {
                    return Some(<$t>::$v);
                })*
                None
            }
        }
    };
}

option_words!(Order { Desc => "DESC", Asc => "ASC" });
option_words!(Policy { Best => "BEST", Set => "SET", Incr => "INCR" });
option_words!(Tiebreak { Earliest => "EARLIEST", Latest => "LATEST" });
option_words!(Ranking { Ordinal => "ORDINAL", Competition => "COMPETITION", Dense => "DENSE" });

/// A board's options, fixed when it is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub order: Order,
    pub policy: Policy,
    pub tiebreak: Tiebreak,
    pub ranking: Ranking,
    /// Keep only the best `capacity` entries; 0: unbounded.
    pub capacity: u64,
    /// Longest metadata accepted, in bytes.
    pub max_meta_len: usize,
}

impl Default for Options {
    /// DESC, BEST, EARLIEST, ORDINAL, unbounded, metadata up to 1 KiB.
    fn default() -> Self {
        Options {
            order: Order::Desc,
            policy: Policy::Best,
            tiebreak: Tiebreak::Earliest,
            ranking: Ranking::Ordinal,
            capacity: 0,
            max_meta_len: 1024,
        }
    }
}

/// Why a write was refused; nothing changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbError {
    /// The new score would not fit an `i64`.
    Overflow,
    /// The metadata is longer than [`Options::max_meta_len`].
    MetaTooLong,
    /// The board holds as many entries as it can address (2^31 - 1).
    Full,
}

impl fmt::Display for LbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LbError::Overflow => "increment or decrement would overflow",
            LbError::MetaTooLong => "metadata is too long",
            LbError::Full => "leaderboard is full",
        })
    }
}

impl std::error::Error for LbError {}

/// What a submit or incr did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmitOutcome {
    /// The member's score now (the submitted one when it was not stored).
    pub score: i64,
    /// Its rank per the board's RANKING; None when it was not stored (a
    /// full CAPACITY board whose last entry ranks above it).
    pub rank: Option<u64>,
    /// Anything stored changed (new entry, score, subscore, metadata).
    pub changed: bool,
    /// The member the submit pushed out of a full CAPACITY board.
    pub evicted: Option<Vec<u8>>,
}

/// One entry, borrowed from the board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef<'a> {
    pub member: &'a [u8],
    pub score: i64,
    pub subscore: i64,
    /// When the entry reached its current (score, subscore), in ms.
    pub time: u64,
    pub meta: Option<&'a [u8]>,
}

/// One member of an [`Leaderboard::among`] answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmongEntry<'a> {
    /// Its rank among the members asked about, per RANKING.
    pub rank: u64,
    /// Its rank on the whole board, per RANKING, when asked for (an
    /// O(log n) walk per entry, which a plain friends board does not pay).
    pub global_rank: Option<u64>,
    pub entry: EntryRef<'a>,
}

/// A leaderboard.
#[derive(Clone)]
pub struct Leaderboard {
    opts: Options,
    store: Store,
    tree: Tree,
    index: MemberIndex,
    hasher: ahash::RandomState,
    meta: HashMap<u32, Box<[u8]>, ahash::RandomState>,
    /// Bytes allocated for the metadata values.
    meta_bytes: usize,
    /// Event ids of recent writes (`ID event-id`), kept by the commands.
    pub ids: IdWindow,
    /// Schedule and closed periods (issue 17); None: a board that has
    /// never been reset nor given a schedule.
    season: Option<Box<Season>>,
    /// While a snapshot walks this board in steps: its copy-before-write
    /// log (see [`cow`]); every change to an entry tells it first.
    cow: CowSlot,
}

/// Loads a saved board fast ([`Leaderboard::builder`]). The board it
/// finishes equals the one [`Leaderboard::restore`] of every entry in
/// turn gives: a member seen twice, or a board reaching its CAPACITY,
/// turns it into exactly that (the entries so far are placed, the next
/// ones restored one by one).
#[derive(Debug)]
pub struct Builder {
    board: Leaderboard,
    /// The entries stored so far and not yet in the tree, in file order.
    ids: Vec<u32>,
    /// `ids` is in the board's order.
    sorted: bool,
    /// The tree holds every entry; the next ones are restored.
    slow: bool,
}

impl Builder {
    /// Adds one entry (as [`Leaderboard::restore`]).
    pub fn push(&mut self, e: EntryRef<'_>) -> Result<(), LbError> {
        if self.slow {
            return self.board.restore(e).map(|_| ());
        }
        let b = &mut self.board;
        b.check_meta(e.meta)?;
        let cap = b.opts.capacity;
        if b.find(e.member).is_some() || (cap > 0 && self.ids.len() as u64 >= cap) {
            self.place();
            return self.board.restore(e).map(|_| ());
        }
        let id = b
            .store_entry(e.member, e.score, e.subscore, e.time, e.meta)
            .ok_or(LbError::Full)?;
        if let Some(&last) = self.ids.last() {
            self.sorted &= b.store.key(last) < b.store.key(id);
        }
        self.ids.push(id);
        Ok(())
    }

    /// Builds the tree of the entries stored so far (the board had none
    /// in its tree) and goes on one entry at a time.
    fn place(&mut self) {
        let b = &mut self.board;
        let mut ids = std::mem::take(&mut self.ids);
        self.slow = true;
        if ids.is_empty() {
            return;
        }
        if !self.sorted {
            let store = &b.store;
            ids.sort_unstable_by(|&x, &y| store.key(x).cmp(&store.key(y)));
        }
        b.tree = Tree::from_sorted(&b.store, &ids);
    }

    /// The board, with its entries in place.
    pub fn finish(mut self) -> Leaderboard {
        if !self.slow {
            self.place();
        }
        self.board
    }
}

impl Drop for Leaderboard {
    fn drop(&mut self) {
        self.end_snapshot();
    }
}

impl fmt::Debug for Leaderboard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leaderboard")
            .field("opts", &self.opts)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl Leaderboard {
    /// An empty board.
    pub fn new(opts: Options) -> Leaderboard {
        Leaderboard {
            opts,
            store: Store::new(opts.order, opts.tiebreak),
            tree: Tree::new(),
            index: MemberIndex::with_capacity(0),
            hasher: ahash::RandomState::new(),
            meta: HashMap::default(),
            meta_bytes: 0,
            ids: IdWindow::default(),
            season: None,
            cow: CowSlot(None),
        }
    }

    /// The board's options.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.tree.len()
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of entries (LB.COUNT).
    pub fn count(&self) -> u64 {
        self.len() as u64
    }

    /// Estimated bytes allocated, rounded to the allocator's size classes.
    pub fn memory_usage(&self) -> usize {
        let meta_slot = std::mem::size_of::<(u32, Box<[u8]>)>() + 1;
        alloc_size(std::mem::size_of::<Leaderboard>())
            + self.store.memory_usage()
            + self.tree.memory_usage()
            + alloc_size(self.index.allocation_size())
            + if self.meta.capacity() == 0 {
                0
            } else {
                alloc_size(self.meta.capacity() * meta_slot)
            }
            + self.meta_bytes
            + self.ids.memory_usage()
            + self.season_memory()
    }

    // ----- lookups --------------------------------------------------------

    fn find(&self, member: &[u8]) -> Option<u32> {
        let h = self.hasher.hash_one(member);
        self.index.find(h, |x| self.store.member(x) == member)
    }

    fn entry_ref(&self, id: u32) -> EntryRef<'_> {
        let e = self.store.get(id);
        EntryRef {
            member: self.store.member(id),
            score: e.score,
            subscore: e.subscore,
            time: e.time,
            meta: if self.meta.is_empty() {
                None
            } else {
                self.meta.get(&id).map(|m| &m[..])
            },
        }
    }

    /// The member's entry.
    pub fn get(&self, member: &[u8]) -> Option<EntryRef<'_>> {
        self.find(member).map(|id| self.entry_ref(id))
    }

    /// The member's score.
    pub fn score(&self, member: &[u8]) -> Option<i64> {
        self.find(member).map(|id| self.store.get(id).score)
    }

    /// The member's rank per the board's RANKING.
    pub fn rank(&self, member: &[u8]) -> Option<u64> {
        self.find(member).and_then(|id| self.rank_of(id))
    }

    /// Entry `id`'s rank per RANKING.
    fn rank_of(&self, id: u32) -> Option<u64> {
        match self.opts.ranking {
            Ranking::Ordinal => self.tree.find(&self.store, id).map(|f| f.pos + 1),
            Ranking::Dense => self.tree.find(&self.store, id).map(|f| f.groups + 1),
            Ranking::Competition => {
                let f = self.tree.find(&self.store, id)?;
                // The group's start from the leaf's flags; a group that
                // began in an earlier leaf costs a search by value.
                Some(match self.tree.group_start(&f) {
                    Some(start) => start + 1,
                    None => self.competition_rank(id),
                })
            }
        }
    }

    /// The rank of entry `id`, just placed by an insert.
    fn rank_placed(&self, id: u32, placed: Placed) -> Option<u64> {
        match self.opts.ranking {
            Ranking::Ordinal => Some(placed.pos + 1),
            Ranking::Dense => Some(placed.groups + 1),
            Ranking::Competition if placed.group_start => Some(placed.pos + 1),
            Ranking::Competition => self.rank_of(id),
        }
    }

    /// 1 + entries strictly better than entry `id` by (score, subscore).
    fn competition_rank(&self, id: u32) -> u64 {
        let e = self.store.get(id);
        let k = (
            self.store.score_key(e.score),
            self.store.score_key(e.subscore),
        );
        let (pos, _) = self
            .tree
            .partition(&self.store, |ks, x| self.store.before_group(ks, x, k));
        pos + 1
    }

    /// Number of entries whose score is in `[min, max]`.
    pub fn count_between(&self, min: i64, max: i64) -> u64 {
        if min > max {
            return 0;
        }
        let (lo, hi) = (self.store.score_key(min), self.store.score_key(max));
        let (lo, hi) = (lo.min(hi), lo.max(hi));
        let (below, _) = self.tree.partition(&self.store, |ks, _| ks < lo);
        let (upto, _) = self.tree.partition(&self.store, |ks, _| ks <= hi);
        upto - below
    }

    // ----- ranges ---------------------------------------------------------

    /// The entries at places `from..=to` (1-based; clamped to the board),
    /// with their ranks.
    pub fn range(&self, from: u64, to: u64) -> Range<'_> {
        let from = from.max(1);
        let to = to.min(self.count());
        if from > to {
            return Range::empty(self);
        }
        let Some(f) = self.tree.at(from - 1) else {
            return Range::empty(self);
        };
        let rank = match self.opts.ranking {
            Ranking::Ordinal => from,
            Ranking::Dense => f.groups + 1,
            Ranking::Competition => match self.tree.group_start(&f) {
                Some(start) => start + 1,
                None => self
                    .tree
                    .slot(f.leaf, f.idx)
                    .map_or(from, |s| self.competition_rank(s & ID_MASK)),
            },
        };
        Range {
            board: self,
            leaf: f.leaf,
            idx: f.idx,
            place: from,
            left: to - from + 1,
            rank,
            prev_end: false,
        }
    }

    /// Every entry in order.
    pub fn iter(&self) -> Range<'_> {
        self.range(1, self.count())
    }

    /// A window of `count` entries around the member (`count / 2` above
    /// it), shifted at the ends of the board so that it still holds
    /// `count` entries when the board has them; empty when it is absent.
    pub fn around(&self, member: &[u8], count: u64) -> Range<'_> {
        let Some(f) = self
            .find(member)
            .and_then(|id| self.tree.find(&self.store, id))
        else {
            return Range::empty(self);
        };
        if count == 0 {
            return Range::empty(self);
        }
        let n = self.count();
        let start = f.pos.saturating_sub(count / 2).min(n.saturating_sub(count));
        self.range(start + 1, start.saturating_add(count))
    }

    /// The given members that are on the board, ranked among themselves
    /// per RANKING, in the board's order, with their ranks on the whole
    /// board when `global`. A member asked twice is answered once.
    pub fn among<'m>(
        &self,
        members: impl IntoIterator<Item = &'m [u8]>,
        global: bool,
    ) -> Vec<AmongEntry<'_>> {
        let mut ids: Vec<u32> = members.into_iter().filter_map(|m| self.find(m)).collect();
        ids.sort_unstable_by(|&a, &b| self.store.key(a).cmp(&self.store.key(b)));
        ids.dedup();
        let mut out: Vec<AmongEntry<'_>> = Vec::with_capacity(ids.len());
        for (i, &id) in ids.iter().enumerate() {
            let place = i as u64 + 1;
            let rank = match (i.checked_sub(1).map(|p| ids[p]), out.last()) {
                (Some(prev), Some(last)) if self.opts.ranking != Ranking::Ordinal => {
                    if self.store.same_group(prev, id) {
                        last.rank
                    } else if self.opts.ranking == Ranking::Dense {
                        last.rank + 1
                    } else {
                        place
                    }
                }
                _ => place,
            };
            out.push(AmongEntry {
                rank,
                global_rank: if global { self.rank_of(id) } else { None },
                entry: self.entry_ref(id),
            });
        }
        out
    }

    // ----- writes ---------------------------------------------------------

    fn check_meta(&self, meta: Option<&[u8]>) -> Result<(), LbError> {
        match meta {
            Some(m) if m.len() > self.opts.max_meta_len => Err(LbError::MetaTooLong),
            _ => Ok(()),
        }
    }

    /// (score, subscore) `a` is strictly better than `b` per ORDER.
    fn better(&self, a: (i64, i64), b: (i64, i64)) -> bool {
        match self.opts.order {
            Order::Desc => a > b,
            Order::Asc => a < b,
        }
    }

    /// Submits a result for the member, applying the board's POLICY (see
    /// the module docs).
    pub fn submit(
        &mut self,
        member: &[u8],
        score: i64,
        subscore: i64,
        at_ms: u64,
        meta: Option<&[u8]>,
    ) -> Result<SubmitOutcome, LbError> {
        self.check_meta(meta)?;
        let Some(id) = self.find(member) else {
            return self.add(member, score, subscore, at_ms, meta);
        };
        let old = *self.store.get(id);
        let new = match self.opts.policy {
            Policy::Best => {
                if !self.better((score, subscore), (old.score, old.subscore)) {
                    return Ok(self.unchanged(id));
                }
                (score, subscore)
            }
            Policy::Set => (score, subscore),
            Policy::Incr => (
                old.score.checked_add(score).ok_or(LbError::Overflow)?,
                subscore,
            ),
        };
        Ok(self.update(id, new, at_ms, meta))
    }

    /// Adds `delta` to the member's score whatever the POLICY (a new member
    /// starts from 0, subscore 0); the subscore is kept.
    pub fn incr(
        &mut self,
        member: &[u8],
        delta: i64,
        at_ms: u64,
        meta: Option<&[u8]>,
    ) -> Result<SubmitOutcome, LbError> {
        self.check_meta(meta)?;
        let Some(id) = self.find(member) else {
            return self.add(member, delta, 0, at_ms, meta);
        };
        let old = *self.store.get(id);
        let score = old.score.checked_add(delta).ok_or(LbError::Overflow)?;
        Ok(self.update(id, (score, old.subscore), at_ms, meta))
    }

    /// Stores the entry exactly as given (time included), whatever the
    /// POLICY, replacing the member's entry: for loading a saved board
    /// (AOF rewrite, RESTORE). CAPACITY still applies as for a submit.
    pub fn restore(&mut self, entry: EntryRef<'_>) -> Result<SubmitOutcome, LbError> {
        self.check_meta(entry.meta)?;
        let Some(id) = self.find(entry.member) else {
            self.before_change(entry.member, None);
            return self.add(
                entry.member,
                entry.score,
                entry.subscore,
                entry.time,
                entry.meta,
            );
        };
        self.before_change(entry.member, Some(id));
        self.tree.remove(&self.store, id);
        self.store.set(id, entry.score, entry.subscore, entry.time);
        let placed = self.tree.insert(&self.store, id);
        self.set_meta(id, entry.meta.unwrap_or_default());
        Ok(SubmitOutcome {
            score: entry.score,
            rank: self.rank_placed(id, placed),
            changed: true,
            evicted: None,
        })
    }

    /// A builder for a saved board (RDB record, period file): entries are
    /// stored as they come and the tree is built once at the end, from
    /// sorted ids, instead of one insert per entry.
    pub fn builder(opts: Options, expected: usize) -> Builder {
        let mut board = Leaderboard::new(opts);
        // `expected` comes from the file: it sizes the index, up to 16M
        // entries, and is not relied on.
        let n = expected.min(1 << 24);
        board.index = MemberIndex::with_capacity(n);
        Builder {
            board,
            ids: Vec::with_capacity(n),
            sorted: true,
            slow: false,
        }
    }

    /// Removes the member; false when absent.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.find(member) {
            Some(id) => {
                self.delete(id);
                true
            }
            None => false,
        }
    }

    fn unchanged(&self, id: u32) -> SubmitOutcome {
        SubmitOutcome {
            score: self.store.get(id).score,
            rank: self.rank_of(id),
            changed: false,
            evicted: None,
        }
    }

    /// Gives entry `id` (on the board) a new (score, subscore) and metadata.
    fn update(
        &mut self,
        id: u32,
        new: (i64, i64),
        at_ms: u64,
        meta: Option<&[u8]>,
    ) -> SubmitOutcome {
        let old = *self.store.get(id);
        if self.cow.0.is_some() {
            let changes = new != (old.score, old.subscore)
                || meta.is_some_and(|m| self.meta.get(&id).map_or(&[][..], |o| &o[..]) != m);
            if changes {
                self.before_change_id(id);
            }
        }
        let mut placed = None;
        if new != (old.score, old.subscore) {
            self.tree.remove(&self.store, id);
            self.store.set(id, new.0, new.1, at_ms);
            placed = Some(self.tree.insert(&self.store, id));
        }
        let mut changed = placed.is_some();
        if let Some(m) = meta {
            changed |= self.set_meta(id, m);
        }
        SubmitOutcome {
            score: new.0,
            rank: match placed {
                Some(p) => self.rank_placed(id, p),
                None => self.rank_of(id),
            },
            changed,
            evicted: None,
        }
    }

    /// Sets entry `id`'s metadata (empty: none); true when it changed.
    fn set_meta(&mut self, id: u32, m: &[u8]) -> bool {
        if self.meta.get(&id).is_some_and(|old| &old[..] == m) {
            return false;
        }
        let had = self.drop_meta(id);
        if !m.is_empty() {
            self.meta_bytes += alloc_size(m.len());
            self.meta.insert(id, m.into());
        }
        had || !m.is_empty()
    }

    /// Removes entry `id`'s metadata; true when it had some.
    fn drop_meta(&mut self, id: u32) -> bool {
        match self.meta.remove(&id) {
            Some(old) => {
                self.meta_bytes -= alloc_size(old.len());
                true
            }
            None => false,
        }
    }

    /// Stores a new member, minding CAPACITY.
    fn add(
        &mut self,
        member: &[u8],
        score: i64,
        subscore: i64,
        at_ms: u64,
        meta: Option<&[u8]>,
    ) -> Result<SubmitOutcome, LbError> {
        let cap = self.opts.capacity;
        let full = cap > 0 && self.count() >= cap;
        if full {
            let key = self.store.key_of(score, subscore, at_ms, member);
            let last_ranks_above = self.tree.last().is_some_and(|l| self.store.key(l) < key);
            if last_ranks_above {
                return Ok(SubmitOutcome {
                    score,
                    rank: None,
                    changed: false,
                    evicted: None,
                });
            }
        }
        self.before_change(member, None);
        let id = self
            .store_entry(member, score, subscore, at_ms, meta)
            .ok_or(LbError::Full)?;
        let placed = self.tree.insert(&self.store, id);
        // Evicting the last entry changes no rank above it.
        let rank = self.rank_placed(id, placed);
        let mut evicted = None;
        while cap > 0 && self.count() > cap {
            let Some(last) = self.tree.last() else { break };
            evicted = Some(self.store.member(last).to_vec());
            self.delete(last);
        }
        Ok(SubmitOutcome {
            score,
            rank,
            changed: true,
            evicted,
        })
    }

    /// Removes entry `id` from the tree, the index and the store.
    fn delete(&mut self, id: u32) {
        self.before_change_id(id);
        self.tree.remove(&self.store, id);
        let h = self.hasher.hash_one(self.store.member(id));
        self.index.remove(h, id);
        self.drop_meta(id);
        self.store.free(id);
        if self.store.slots() >= COMPACT_MIN && self.len() * 4 < self.store.slots() {
            self.compact();
        } else if self.store.heap_mostly_garbage() {
            let live: Vec<u32> = self.iter_ids().collect();
            self.store.compact_heap(live.into_iter());
        }
    }

    /// Rebuilds the board from its entries, in order, when it has shrunk
    /// to a quarter of its entry arena: the freed entries, leaves and index
    /// slots go, the nodes come back full. O(n), paid for by the removals
    /// before it.
    fn compact(&mut self) {
        let mut fresh = Leaderboard::new(self.opts);
        fresh.index = MemberIndex::with_capacity(self.len());
        let mut ids = Vec::with_capacity(self.len());
        for old in self.iter_ids() {
            let e = *self.store.get(old);
            let member = self.store.member(old);
            // Cannot fail (fewer entries than now); if it did, the board
            // stays as it is.
            let meta = self.meta.get(&old).map(|m| &m[..]);
            let Some(id) = fresh.store_entry(member, e.score, e.subscore, e.time, meta) else {
                return;
            };
            ids.push(id);
        }
        fresh.tree = Tree::from_sorted(&fresh.store, &ids);
        fresh.ids = std::mem::take(&mut self.ids);
        fresh.season = self.season.take();
        // The walk finds its place again by key, not by id.
        fresh.cow = std::mem::take(&mut self.cow);
        *self = fresh;
    }

    // ----- point-in-time capture (see [`cow`]) ----------------------------

    /// Tells a running capture that `member` is about to change (`id`: its
    /// entry now, `None` when it is being added).
    #[inline]
    fn before_change(&self, member: &[u8], id: Option<u32>) {
        if let Some(c) = &self.cow.0 {
            c.lock().before_change(self, member, id);
        }
    }

    /// Tells a running capture that entry `id` is about to change.
    #[inline]
    fn before_change_id(&self, id: u32) {
        if let Some(c) = &self.cow.0 {
            c.lock()
                .before_change(self, self.store.member(id), Some(id));
        }
    }

    /// Starts a point-in-time capture of this board's entries, walked in
    /// steps ([`Leaderboard::snapshot_step`]): from now on every change to
    /// an entry saves what the walk still needs (see [`cow`]).
    pub fn begin_snapshot(
        &mut self,
        counter: Arc<crate::engine::zset::cow::CowCounter>,
    ) -> SharedBoardCow {
        self.end_snapshot();
        let log = BoardCowLog::new(counter);
        self.cow = CowSlot(Some(log.clone()));
        log
    }

    /// Whether this board is the one `log` captures.
    pub fn is_captured_by(&self, log: &SharedBoardCow) -> bool {
        self.cow.0.as_ref().is_some_and(|c| Arc::ptr_eq(c, log))
    }

    /// One step of the capture: emits up to `budget` point-in-time entries
    /// not written yet, in order. True when the walk is over (the board no
    /// longer carries the log; its saved entries are in the log).
    pub fn snapshot_step(&mut self, budget: usize, emit: &mut dyn FnMut(EntryRef<'_>)) -> bool {
        let done = match &self.cow.0 {
            Some(c) => c.lock().step(self, budget, emit),
            None => true,
        };
        if done {
            self.cow = CowSlot(None);
        }
        done
    }

    /// Ends a capture now (the board leaves the keyspace or its period
    /// closes): what the walk has not written yet goes to the log.
    pub fn end_snapshot(&mut self) {
        if let Some(c) = self.cow.0.take() {
            c.lock().finish(self);
        }
    }

    /// Drops a capture without finishing it (the snapshot gave up).
    pub fn abandon_snapshot(&mut self) {
        self.cow = CowSlot(None);
    }

    /// Adds entry `id`, whose member is `member`, to the index.
    /// Stores a new entry (its record, its member in the index and its
    /// metadata), not yet placed in the tree. None when the store is full.
    fn store_entry(
        &mut self,
        member: &[u8],
        score: i64,
        subscore: i64,
        time: u64,
        meta: Option<&[u8]>,
    ) -> Option<u32> {
        let id = self.store.alloc(member, score, subscore, time)?;
        self.index_insert(member, id);
        if let Some(m) = meta {
            self.set_meta(id, m);
        }
        Some(id)
    }

    fn index_insert(&mut self, member: &[u8], id: u32) {
        let h = self.hasher.hash_one(member);
        let (store, hasher) = (&self.store, &self.hasher);
        self.index
            .insert_unique(h, id, |y| hasher.hash_one(store.member(y)));
    }

    /// Every entry id, in order.
    fn iter_ids(&self) -> impl Iterator<Item = u32> + '_ {
        let mut leaf = self.tree.at(0).map_or(NIL, |f| f.leaf);
        let mut idx = 0;
        std::iter::from_fn(move || loop {
            if leaf == NIL {
                return None;
            }
            if let Some(s) = self.tree.slot(leaf, idx) {
                idx += 1;
                return Some(s & ID_MASK);
            }
            leaf = self.tree.next_leaf(leaf);
            idx = 0;
        })
    }

    /// Checks the structure's invariants (tests only).
    #[cfg(test)]
    fn check(&self) {
        self.tree.check(&self.store);
        for id in self.iter_ids() {
            assert_eq!(self.find(self.store.member(id)), Some(id), "index");
        }
    }
}

/// Entries of a board in order with their ranks, from
/// [`Leaderboard::range`], [`Leaderboard::around`], [`Leaderboard::iter`].
#[derive(Debug, Clone)]
pub struct Range<'a> {
    board: &'a Leaderboard,
    leaf: u32,
    idx: usize,
    /// Place of the next entry.
    place: u64,
    left: u64,
    /// Rank of the next entry, when the one before it does not end its
    /// group (the first entry's is computed by the range).
    rank: u64,
    /// The entry before the next one ended its group.
    prev_end: bool,
}

impl<'a> Range<'a> {
    fn empty(board: &'a Leaderboard) -> Range<'a> {
        Range {
            board,
            leaf: NIL,
            idx: 0,
            place: 0,
            left: 0,
            rank: 0,
            prev_end: false,
        }
    }
}

impl<'a> Iterator for Range<'a> {
    type Item = (u64, EntryRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let tree = &self.board.tree;
        let slot = loop {
            if self.leaf == NIL {
                self.left = 0;
                return None;
            }
            if let Some(s) = tree.slot(self.leaf, self.idx) {
                break s;
            }
            self.leaf = tree.next_leaf(self.leaf);
            self.idx = 0;
        };
        if self.prev_end {
            self.rank = match self.board.opts.ranking {
                Ranking::Dense => self.rank + 1,
                _ => self.place,
            };
        } else if self.board.opts.ranking == Ranking::Ordinal {
            self.rank = self.place;
        }
        self.prev_end = slot & GROUP_END != 0;
        self.idx += 1;
        self.place += 1;
        self.left -= 1;
        Some((self.rank, self.board.entry_ref(slot & ID_MASK)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.left).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

/// The length is known before the walk (a reply's array header).
impl ExactSizeIterator for Range<'_> {}
