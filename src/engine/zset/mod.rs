//! Sorted sets: the engine behind every Z* command. No RESP, no clients here.
//!
//! A [`ZSet`] keeps members (byte strings, each once) ordered by score, then
//! by member bytes (memcmp), exactly as Redis. Scores are `f64`, never NaN
//! inside a set (infinities allowed).
//!
//! # Encodings
//! - `listpack` ([`listpack`]): one contiguous byte buffer, linear walks.
//!   Used while the set has at most `zset-max-listpack-entries` members of at
//!   most `zset-max-listpack-value` bytes (passed in as [`ZSetLimits`]).
//! - `skiplist` ([`skiplist`]): a skiplist with spans (O(log n) rank,
//!   element-at-rank, range counts) plus a hash index for O(1) scores.
//!
//! A listpack becomes a skiplist in one place (`ZSet::convert_to_skiplist`),
//! when adding a member would pass either limit. As in Redis 7.0 a set never
//! goes back on its own when it shrinks; only sets built by a command (the
//! *STORE commands) pick their encoding by their final size, which the
//! commands layer asks for with [`ZSet::convert_to_listpack_if_needed`]
//! (Redis's `zsetConvertToListpackIfNeeded`), or by creating the destination
//! with [`ZSet::with_encoding_for`] (Redis's `zsetTypeCreate`) and inserting.
//! A new key created by ZADD / ZINCRBY is [`ZSet::new`] plus inserts, which
//! gives Redis 7.0.15's choice (skiplist from the start only when the first
//! member is too long or the entry limit is 0).
//!
//! Negative zero: the skiplist keeps `-0` as given (ZSCORE answers `-0`), the
//! listpack stores it as the integer 0 (ZSCORE answers `0`), as Redis does.
//! The score returned by [`ZSet::zadd`] / [`ZSet::incr`] is the computed one
//! (ZINCRBY replies `-0` even when the listpack then stores 0).
//!
//! # API for the commands layer
//! - create: [`ZSet::new`], [`ZSet::with_encoding_for`]
//! - write: [`ZSet::zadd`] (NX/XX/GT/LT/INCR; CH = added + updated),
//!   [`ZSet::insert`], [`ZSet::incr`] (ZINCRBY), [`ZSet::remove`],
//!   [`ZSet::remove_range_by_rank`] / `_by_score` / `_by_lex`,
//!   [`ZSet::pop_min`] / [`ZSet::pop_max`]
//! - read: [`ZSet::len`], [`ZSet::score`], [`ZSet::rank`] (ZRANK/ZREVRANK),
//!   [`ZSet::get_by_rank`], [`ZSet::random_member`], [`ZSet::count_by_score`],
//!   [`ZSet::count_by_lex`], [`ZSet::scan`]
//! - ranges ([`Range`] iterators of `(&[u8], f64)`, no allocation per
//!   element): [`ZSet::iter`], [`ZSet::range_by_rank`],
//!   [`ZSet::range_by_score`], [`ZSet::range_by_lex`]. A `Range` is `Clone`:
//!   `range.clone().count()` gives the reply length before writing it.
//! - range arguments: [`RangeByScore`], [`RangeByLex`] ([`range`]).
//! - bulk changes: [`ZSet::defer_order`] / [`ZSet::restore_order`] (the AOF
//!   loader: while deferred, a skiplist set takes ZADD / ZINCRBY / ZREM at
//!   the cost of a hash lookup and is sorted once at the end).
//!
//! # Memory
//! Measured with jemalloc's `stats.allocated` (and matched by
//! [`ZSet::memory_usage`]; `model_tests::bytes_per_member_1m` prints it):
//! - 1,000,000 `m:<id>` or `m:<12 digits>` members with integer scores:
//!   47.8 B/member in the skiplist encoding: 32 B node (members up to 14
//!   bytes inline), ~7 B of upper links (20 bytes each, a third of a link
//!   per node), 8.4 B of member index (2^21 slots of 4 bytes).
//!   Through the server (`benches/zset_leaderboard.sh`, growth of INFO
//!   used_memory): 47.8 B/member; redis-server 109.8.
//! - Nodes sit in 1 MiB chunks, so a big set has at most one partly used
//!   chunk of nodes, and growing it copies nothing.
//! - 10,000 boards of 100 `m:<6 digits>` members: 15.2 B/member in the
//!   listpack encoding (12-13 bytes per entry plus size-class rounding);
//!   with `m:<12 digits>` members 22.1 through the server (redis-server
//!   26.4).
//! - A [`ZSet`] is 24 bytes and lives unboxed in its key's value, so a
//!   listpack set costs one allocation of exactly its bytes: 5 `playerN`
//!   members with scores 10 to 50 take 45 bytes (48 allocated: a set of
//!   up to 8 members leaves out the back lengths, see [`listpack`]), where
//!   Redis's listpack and object take 80 (issue 20).

pub(crate) mod arena;
pub mod cow;
pub(crate) mod index;
pub mod listpack;
pub mod range;
pub mod skiplist;

#[cfg(test)]
mod model_tests;

use std::fmt;
use std::sync::Arc;

use smallvec::SmallVec;

use cow::{CowCounter, CowLog, SharedCow};
use listpack::{Listpack, NONE};
use range::Bounds;
pub use range::{LexBound, RangeByLex, RangeByScore, RangeError, ScoreBound};
use skiplist::{SkipList, NIL};

/// The encoding limits, from CONFIG `zset-max-listpack-entries` and
/// `zset-max-listpack-value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZSetLimits {
    /// Most members a listpack holds.
    pub max_entries: usize,
    /// Longest member (bytes) a listpack holds.
    pub max_value: usize,
}

impl ZSetLimits {
    /// Limits from the configuration's values.
    pub fn new(max_entries: u64, max_value: u64) -> ZSetLimits {
        ZSetLimits {
            max_entries: usize::try_from(max_entries).unwrap_or(usize::MAX),
            max_value: usize::try_from(max_value).unwrap_or(usize::MAX),
        }
    }

    /// A set of `len` members, the longest `max_member_len` bytes, fits a
    /// listpack.
    pub fn fits_listpack(&self, len: usize, max_member_len: usize) -> bool {
        len <= self.max_entries && max_member_len <= self.max_value
    }
}

impl Default for ZSetLimits {
    /// Redis's defaults: 128 entries, 64 bytes.
    fn default() -> Self {
        ZSetLimits {
            max_entries: 128,
            max_value: 64,
        }
    }
}

/// What [`ZSet::insert`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum InsertOutcome {
    /// The member is new.
    Added,
    /// The member had another score.
    Updated {
        /// The score it had.
        old: f64,
    },
    /// The member had this score already.
    Unchanged,
}

/// ZADD's options (CH only changes the reply, so it is not here).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ZAddFlags {
    /// Only add new members.
    pub nx: bool,
    /// Only update existing members.
    pub xx: bool,
    /// Only update when the new score is greater.
    pub gt: bool,
    /// Only update when the new score is less.
    pub lt: bool,
    /// Add the score to the current one (ZADD INCR, ZINCRBY).
    pub incr: bool,
}

/// What [`ZSet::zadd`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ZAddOutcome {
    /// The member was added with `score`.
    Added {
        /// Its score.
        score: f64,
    },
    /// The member's score changed from `old` to `score`.
    Updated {
        /// The previous score.
        old: f64,
        /// The new score.
        score: f64,
    },
    /// The member already had `score`.
    Unchanged {
        /// Its score.
        score: f64,
    },
    /// NX, XX, GT or LT left the set as it was (ZADD INCR replies nil).
    Skipped,
}

impl ZAddOutcome {
    /// The member's score after the call (None when skipped).
    pub fn score(&self) -> Option<f64> {
        match *self {
            ZAddOutcome::Added { score }
            | ZAddOutcome::Updated { score, .. }
            | ZAddOutcome::Unchanged { score } => Some(score),
            ZAddOutcome::Skipped => None,
        }
    }

    /// The member is new (counts for ZADD's reply).
    pub fn is_added(&self) -> bool {
        matches!(self, ZAddOutcome::Added { .. })
    }

    /// The member is new or its score changed (counts for ZADD CH).
    pub fn is_changed(&self) -> bool {
        matches!(
            self,
            ZAddOutcome::Added { .. } | ZAddOutcome::Updated { .. }
        )
    }
}

/// A score computation gave NaN (`inf` + `-inf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NanScore;

impl NanScore {
    /// The message after `ERR ` that Redis sends.
    pub fn message(self) -> &'static str {
        "resulting score is not a number (NaN)"
    }
}

impl fmt::Display for NanScore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ERR {}", self.message())
    }
}

impl std::error::Error for NanScore {}

/// Redis keeps a listpack below 1 GiB (`LISTPACK_MAX_SAFETY_SIZE`).
const LISTPACK_MAX_BYTES: usize = 1 << 30;

/// Bytes jemalloc hands out for a request of `n` bytes (its size classes:
/// 8, 16, then four classes per doubling).
pub(crate) fn alloc_size(n: usize) -> usize {
    match n {
        0 => 0,
        1..=8 => 8,
        9..=16 => 16,
        _ => {
            let k = usize::BITS - 1 - (n - 1).leading_zeros();
            let step = (1usize << k.saturating_sub(2)).max(16);
            n.div_ceil(step) * step
        }
    }
}

/// A sorted set. 24 bytes: a key's value holds it without a box, so a small
/// set (listpack) is one allocation, its byte buffer.
#[derive(Debug)]
pub struct ZSet {
    repr: Repr,
}

impl Drop for ZSet {
    fn drop(&mut self) {
        self.end_snapshot();
    }
}

#[derive(Debug)]
enum Repr {
    Listpack(Listpack),
    Skiplist(Box<Big>),
}

/// The skiplist encoding and what only it needs. A listpack is written
/// whole by a snapshot, so only a skiplist carries a capture's log.
#[derive(Debug)]
struct Big {
    list: SkipList,
    /// While a snapshot walks this set in steps: its copy-before-write log
    /// (see [`cow`]); every mutator tells it first.
    cow: Option<SharedCow>,
}

impl Big {
    fn new(list: SkipList) -> Box<Big> {
        Box::new(Big { list, cow: None })
    }
}

// The skiplist's methods read through the box as before.
impl std::ops::Deref for Big {
    type Target = SkipList;
    fn deref(&self) -> &SkipList {
        &self.list
    }
}

impl std::ops::DerefMut for Big {
    fn deref_mut(&mut self) -> &mut SkipList {
        &mut self.list
    }
}

/// Where a member is, for an update right after a lookup.
#[derive(Clone, Copy)]
enum Slot {
    Listpack(usize),
    Skiplist(u32),
}

impl Default for ZSet {
    fn default() -> Self {
        ZSet::new()
    }
}

impl ZSet {
    /// An empty set (listpack).
    pub fn new() -> ZSet {
        ZSet {
            repr: Repr::Listpack(Listpack::new()),
        }
    }

    /// An empty set in the encoding a set of `len_hint` members, the longest
    /// `max_member_len` bytes, would have (Redis's `zsetTypeCreate`).
    pub fn with_encoding_for(len_hint: usize, max_member_len: usize, limits: ZSetLimits) -> ZSet {
        if limits.fits_listpack(len_hint, max_member_len) {
            ZSet::new()
        } else {
            // The hint sizes the arenas; cap it so a wild hint cannot
            // allocate much ahead of real members.
            ZSet {
                repr: Repr::Skiplist(Big::new(SkipList::with_capacity(len_hint.min(1 << 20)))),
            }
        }
    }

    /// The name OBJECT ENCODING answers: `listpack` or `skiplist`.
    pub fn encoding(&self) -> &'static str {
        match self.repr {
            Repr::Listpack(_) => "listpack",
            Repr::Skiplist(_) => "skiplist",
        }
    }

    /// True in the listpack encoding.
    pub fn is_listpack(&self) -> bool {
        matches!(self.repr, Repr::Listpack(_))
    }

    /// Number of members (ZCARD).
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Listpack(lp) => lp.len(),
            Repr::Skiplist(sl) => sl.len(),
        }
    }

    /// True when the set has no members (the key must then be deleted).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A deep copy (COPY), in the same encoding.
    pub fn duplicate(&self) -> ZSet {
        ZSet {
            repr: match &self.repr {
                Repr::Listpack(lp) => Repr::Listpack(lp.clone()),
                Repr::Skiplist(sl) => Repr::Skiplist(Big::new(sl.list.clone())),
            },
        }
    }

    /// Estimated bytes allocated for the set (MEMORY USAGE), including this
    /// struct (inline in the key's value) and rounded up to the allocator's
    /// size classes.
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<ZSet>()
            + match &self.repr {
                Repr::Listpack(lp) => alloc_size(lp.bytes()),
                // The skiplist's own count includes its box.
                Repr::Skiplist(sl) => sl.memory_usage(),
            }
    }

    /// Checks the encoding's invariants (tests only).
    #[cfg(test)]
    pub(crate) fn check(&self) {
        match &self.repr {
            Repr::Listpack(lp) => lp.check(),
            Repr::Skiplist(sl) => sl.check(),
        }
    }

    /// Stops keeping a skiplist-encoded set's order, so that ZADD, ZINCRBY
    /// and ZREM cost a hash lookup each (the AOF loader, on big boards).
    /// Until [`ZSet::restore_order`] only `len`, `score`, `contains`,
    /// `zadd`, `insert`, `incr`, `remove`, `encoding` and `memory_usage` may
    /// be called. Returns false (and changes nothing) for a listpack.
    pub fn defer_order(&mut self) -> bool {
        self.end_snapshot();
        match &mut self.repr {
            Repr::Listpack(_) => false,
            Repr::Skiplist(sl) => {
                sl.defer_order();
                true
            }
        }
    }

    /// Whether the order is deferred ([`ZSet::defer_order`]).
    pub fn order_deferred(&self) -> bool {
        matches!(&self.repr, Repr::Skiplist(sl) if sl.order_deferred())
    }

    /// Sorts the members again after [`ZSet::defer_order`] (O(n log n));
    /// nothing to do when the order was kept.
    pub fn restore_order(&mut self) {
        if let Repr::Skiplist(sl) = &mut self.repr {
            sl.restore_order();
        }
    }

    /// Length of the longest member.
    pub fn max_member_len(&self) -> usize {
        self.iter().map(|(m, _)| m.len()).max().unwrap_or(0)
    }

    /// Listpack to skiplist: the one place where a set changes encoding as
    /// it grows (and where SORT converts the set it sorts, as Redis does).
    pub fn convert_to_skiplist(&mut self) {
        if let Repr::Listpack(lp) = &self.repr {
            self.repr = Repr::Skiplist(Big::new(SkipList::from_listpack(lp)));
        }
    }

    /// Turns a skiplist back into a listpack when it has at most
    /// `max_entries` members and `max_member_len` (the caller's running
    /// maximum, as Redis tracks it) is within `max_value`. Redis calls this
    /// only for sets a command has just built (ZUNIONSTORE & co).
    pub fn convert_to_listpack_if_needed(&mut self, max_member_len: usize, limits: ZSetLimits) {
        if let Repr::Skiplist(sl) = &self.repr {
            if limits.fits_listpack(sl.len(), max_member_len)
                && self.iter().map(|(m, _)| m.len()).sum::<usize>() <= LISTPACK_MAX_BYTES
            {
                self.end_snapshot();
                let Repr::Skiplist(sl) = &self.repr else {
                    return;
                };
                let mut lp = Listpack::new();
                let mut x = sl.first();
                while x != NIL {
                    let (m, s) = sl.entry(x);
                    lp.push_back(m, s);
                    x = sl.next(x);
                }
                self.repr = Repr::Listpack(lp);
            }
        }
    }

    fn locate(&self, member: &[u8]) -> Option<(Slot, f64)> {
        match &self.repr {
            Repr::Listpack(lp) => lp
                .find(member)
                .map(|(off, _, score)| (Slot::Listpack(off), score)),
            Repr::Skiplist(sl) => sl.find(member).map(|x| (Slot::Skiplist(x), sl.entry(x).1)),
        }
    }

    /// The score of `member` (ZSCORE, ZMSCORE).
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.locate(member).map(|(_, s)| s)
    }

    /// [`ZSet::score`] of every member of `members`, pushed to `out` in
    /// order; on a big set the lookups' cache misses overlap (see
    /// [`SkipList::find_many`]).
    pub fn scores(&self, members: &[&[u8]], out: &mut Vec<Option<f64>>) {
        let Repr::Skiplist(sl) = &self.repr else {
            out.extend(members.iter().map(|m| self.score(m)));
            return;
        };
        let mut found: SmallVec<[Option<u32>; 16]> = SmallVec::new();
        sl.find_many(members, &mut found);
        out.extend(found.into_iter().map(|x| x.map(|x| sl.entry(x).1)));
    }

    /// Reads ahead what the score changes of `calls` (members and their new
    /// scores, or increments with `incr`) will read, so that applying them
    /// next is cheaper; changes nothing (see [`SkipList::prepare_scores`]).
    pub fn prepare_scores(&self, calls: &[(&[u8], f64)], incr: bool) {
        if let Repr::Skiplist(sl) = &self.repr {
            if !sl.order_deferred() {
                sl.prepare_scores(calls, incr);
            }
        }
    }

    /// True when `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> bool {
        self.locate(member).is_some()
    }

    fn set_score_at(&mut self, slot: Slot, member: &[u8], score: f64) {
        match (&mut self.repr, slot) {
            (Repr::Listpack(lp), Slot::Listpack(off)) => {
                lp.remove_at(off);
                lp.insert(member, score);
            }
            (Repr::Skiplist(sl), Slot::Skiplist(x)) => sl.update_score(x, score),
            _ => {}
        }
    }

    fn add_new(&mut self, member: &[u8], score: f64, limits: ZSetLimits) {
        if let Repr::Listpack(lp) = &self.repr {
            if lp.len() >= limits.max_entries
                || member.len() > limits.max_value
                || lp.bytes() + member.len() > LISTPACK_MAX_BYTES
            {
                self.convert_to_skiplist();
            }
        }
        match &mut self.repr {
            Repr::Listpack(lp) => lp.insert(member, score),
            Repr::Skiplist(sl) => sl.insert_new(member, score),
        }
    }

    /// ZADD for one member, with Redis's `zsetAdd` rules: NaN input is an
    /// error; NX skips existing members, XX skips new ones; INCR adds to the
    /// current score (NaN result is an error); GT / LT skip updates that do
    /// not raise / lower the score (new members are still added).
    pub fn zadd(
        &mut self,
        member: &[u8],
        score: f64,
        flags: ZAddFlags,
        limits: ZSetLimits,
    ) -> Result<ZAddOutcome, NanScore> {
        if score.is_nan() {
            return Err(NanScore);
        }
        match self.locate(member) {
            Some((slot, cur)) => {
                if flags.nx {
                    return Ok(ZAddOutcome::Skipped);
                }
                let new = if flags.incr {
                    let s = cur + score;
                    if s.is_nan() {
                        return Err(NanScore);
                    }
                    s
                } else {
                    score
                };
                if (flags.lt && new >= cur) || (flags.gt && new <= cur) {
                    return Ok(ZAddOutcome::Skipped);
                }
                if new != cur {
                    self.before_change(member, Some(cur));
                    self.set_score_at(slot, member, new);
                    Ok(ZAddOutcome::Updated {
                        old: cur,
                        score: new,
                    })
                } else {
                    Ok(ZAddOutcome::Unchanged { score: new })
                }
            }
            None if flags.xx => Ok(ZAddOutcome::Skipped),
            None => {
                self.before_change(member, None);
                self.add_new(member, score, limits);
                Ok(ZAddOutcome::Added { score })
            }
        }
    }

    /// Sets `member`'s score (plain ZADD). `score` must not be NaN (a NaN is
    /// ignored and reported as `Unchanged`).
    pub fn insert(&mut self, member: &[u8], score: f64, limits: ZSetLimits) -> InsertOutcome {
        match self.zadd(member, score, ZAddFlags::default(), limits) {
            Ok(ZAddOutcome::Added { .. }) => InsertOutcome::Added,
            Ok(ZAddOutcome::Updated { old, .. }) => InsertOutcome::Updated { old },
            _ => InsertOutcome::Unchanged,
        }
    }

    /// Adds `delta` to `member`'s score (0 when new): ZINCRBY. Returns the
    /// new score.
    pub fn incr(&mut self, member: &[u8], delta: f64, limits: ZSetLimits) -> Result<f64, NanScore> {
        let flags = ZAddFlags {
            incr: true,
            ..ZAddFlags::default()
        };
        self.zadd(member, delta, flags, limits)?
            .score()
            .ok_or(NanScore)
    }

    /// Removes `member`; true when it was there (ZREM).
    pub fn remove(&mut self, member: &[u8]) -> bool {
        if self.cow().is_some() {
            match self.score(member) {
                Some(s) => self.before_change(member, Some(s)),
                None => return false,
            }
        }
        match &mut self.repr {
            Repr::Listpack(lp) => match lp.find(member) {
                Some((off, _, _)) => {
                    lp.remove_at(off);
                    true
                }
                None => false,
            },
            Repr::Skiplist(sl) => sl.remove(member),
        }
    }

    /// 0-based rank of `member` and its score; `reverse` counts from the
    /// highest (ZRANK / ZREVRANK).
    pub fn rank(&self, member: &[u8], reverse: bool) -> Option<(usize, f64)> {
        let (rank, score) = match &self.repr {
            Repr::Listpack(lp) => lp.find(member).map(|(_, i, s)| (i, s))?,
            Repr::Skiplist(sl) => {
                let x = sl.find(member)?;
                (sl.rank_of(x) - 1, sl.entry(x).1)
            }
        };
        Some(if reverse {
            (self.len() - 1 - rank, score)
        } else {
            (rank, score)
        })
    }

    /// [`ZSet::rank`] of every member of `members`, pushed to `out` in
    /// order; on a big set the rank walks run together (see
    /// [`SkipList::rank_many`]), for a pipeline of ZRANKs on one board.
    pub fn ranks(&self, members: &[&[u8]], reverse: bool, out: &mut Vec<Option<(usize, f64)>>) {
        let Repr::Skiplist(sl) = &self.repr else {
            out.extend(members.iter().map(|m| self.rank(m, reverse)));
            return;
        };
        let mut found: SmallVec<[Option<u32>; 16]> = SmallVec::new();
        sl.find_many(members, &mut found);
        let nodes: SmallVec<[u32; 16]> = found.iter().flatten().copied().collect();
        let mut ranks: SmallVec<[usize; 16]> = SmallVec::new();
        sl.rank_many(&nodes, &mut ranks);
        // `ranks` follows the members found, in order.
        let mut ranks = ranks.into_iter();
        // An emptied skiplist set (the model tests keep one) finds nothing.
        let last = self.len().saturating_sub(1);
        for x in found {
            out.push(x.and_then(|x| {
                let r = ranks.next()? - 1;
                Some((if reverse { last - r } else { r }, sl.entry(x).1))
            }));
        }
    }

    /// The member at 0-based `rank` (from the highest when `reverse`).
    pub fn get_by_rank(&self, rank: usize, reverse: bool) -> Option<(&[u8], f64)> {
        let len = self.len();
        if rank >= len {
            return None;
        }
        let index = if reverse { len - 1 - rank } else { rank };
        match &self.repr {
            Repr::Listpack(lp) => lp.entry(lp.offset_of(index)).map(|e| (e.member, e.score)),
            Repr::Skiplist(sl) => {
                let x = sl.node_at(index + 1);
                (x != NIL).then(|| sl.entry(x))
            }
        }
    }

    /// A uniformly chosen member (ZRANDMEMBER).
    pub fn random_member<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> Option<(&[u8], f64)> {
        match self.len() {
            0 => None,
            n => self.get_by_rank(rng.random_range(0..n), false),
        }
    }

    fn range_at<'a>(
        &'a self,
        index: usize,
        reverse: bool,
        remaining: usize,
        stop: Stop<'a>,
    ) -> Range<'a> {
        let pos = match &self.repr {
            Repr::Listpack(lp) => Pos::Listpack(lp, lp.offset_of(index)),
            Repr::Skiplist(sl) => Pos::Skiplist(sl, sl.node_at(index + 1)),
        };
        Range {
            pos,
            reverse,
            remaining,
            stop,
        }
    }

    fn empty_range(&self) -> Range<'_> {
        Range {
            pos: Pos::End,
            reverse: false,
            remaining: 0,
            stop: Stop::Never,
        }
    }

    /// Every member in order, lowest first.
    pub fn iter(&self) -> Range<'_> {
        self.range_at(0, false, self.len(), Stop::Never)
    }

    /// Members at 0-based ranks `start..=end` (already normalized by the
    /// caller; `end` is clamped to the last rank), lowest first, or from the
    /// highest when `reverse` (ZREVRANGE: rank 0 is the highest).
    pub fn range_by_rank(&self, start: usize, end: usize, reverse: bool) -> Range<'_> {
        let len = self.len();
        if start > end || start >= len {
            return self.empty_range();
        }
        let end = end.min(len - 1);
        let index = if reverse { len - 1 - start } else { start };
        self.range_at(index, reverse, end - start + 1, Stop::Never)
    }

    /// Where a score or lex range starts: Redis's first (or, reversed, last)
    /// element in range, then `offset` elements further without checking.
    fn range_start<B: Bounds>(&self, range: &B, reverse: bool, offset: usize) -> Pos<'_> {
        match &self.repr {
            Repr::Listpack(lp) => {
                let found = if reverse {
                    lp.last_in_range(range)
                } else {
                    lp.first_in_range(range)
                };
                let Some((mut off, _)) = found else {
                    return Pos::End;
                };
                for _ in 0..offset {
                    off = if reverse { lp.prev(off) } else { lp.next(off) };
                    if off == NONE {
                        return Pos::End;
                    }
                }
                Pos::Listpack(lp, off)
            }
            Repr::Skiplist(sl) => {
                let found = if reverse {
                    sl.last_in_range(range)
                } else {
                    sl.first_in_range(range)
                };
                let Some((x, rank)) = found else {
                    return Pos::End;
                };
                let x = match (offset, reverse) {
                    (0, _) => x,
                    (o, false) => sl.node_at(rank.saturating_add(o)),
                    (o, true) if o < rank => sl.node_at(rank - o),
                    _ => NIL,
                };
                Pos::Skiplist(sl, x)
            }
        }
    }

    /// Members with scores in `range`, lowest first (highest first when
    /// `reverse`), skipping `offset` and yielding at most `limit` (None: no
    /// limit). A negative LIMIT offset in Redis gives an empty reply and a
    /// negative count no limit: the caller maps those.
    pub fn range_by_score(
        &self,
        range: &RangeByScore,
        reverse: bool,
        offset: usize,
        limit: Option<usize>,
    ) -> Range<'_> {
        Range {
            pos: self.range_start(range, reverse, offset),
            reverse,
            remaining: limit.unwrap_or(usize::MAX),
            stop: Stop::Score(*range),
        }
    }

    /// Members in the lexicographic `range` (meaningful when all scores are
    /// equal; otherwise Redis's walk is followed), with `offset` and `limit`
    /// as in [`ZSet::range_by_score`].
    pub fn range_by_lex<'a>(
        &'a self,
        range: &'a RangeByLex,
        reverse: bool,
        offset: usize,
        limit: Option<usize>,
    ) -> Range<'a> {
        Range {
            pos: self.range_start(range, reverse, offset),
            reverse,
            remaining: limit.unwrap_or(usize::MAX),
            stop: Stop::Lex(range),
        }
    }

    fn count_in<B: Bounds>(&self, range: &B) -> usize {
        match &self.repr {
            Repr::Listpack(lp) => lp.count_in_range(range),
            Repr::Skiplist(sl) => sl.count_in_range(range),
        }
    }

    /// Number of members with scores in `range` (ZCOUNT).
    pub fn count_by_score(&self, range: &RangeByScore) -> usize {
        self.count_in(range)
    }

    /// Number of members in the lexicographic `range` (ZLEXCOUNT).
    pub fn count_by_lex(&self, range: &RangeByLex) -> usize {
        self.count_in(range)
    }

    /// Removes the members at 0-based ranks `start..=end` (normalized by the
    /// caller); returns how many (ZREMRANGEBYRANK).
    pub fn remove_range_by_rank(&mut self, start: usize, end: usize) -> usize {
        let len = self.len();
        if start > end || start >= len {
            return 0;
        }
        let end = end.min(len - 1);
        if let Some(cow) = self.cow() {
            let mut log = cow.lock();
            for (m, s) in self.range_by_rank(start, end, false) {
                log.before_change(m, Some(s));
            }
        }
        match &mut self.repr {
            Repr::Listpack(lp) => lp.remove_range_by_rank(start, end),
            Repr::Skiplist(sl) => sl.remove_range_by_rank(start, end),
        }
    }

    fn remove_in<B: Bounds>(&mut self, range: &B) -> usize {
        if let Repr::Skiplist(big) = &self.repr {
            let Big { list: sl, cow } = &**big;
            if let Some(cow) = cow {
                let mut log = cow.lock();
                let mut x = sl.first_in_range(range).map_or(NIL, |(x, _)| x);
                while x != NIL {
                    let (m, s) = sl.entry(x);
                    if !range.lte_max(s, m) {
                        break;
                    }
                    log.before_change(m, Some(s));
                    x = sl.next(x);
                }
            }
        }
        match &mut self.repr {
            Repr::Listpack(lp) => lp.remove_range(range),
            Repr::Skiplist(sl) => sl.remove_range(range),
        }
    }

    /// Removes the members with scores in `range`; returns how many
    /// (ZREMRANGEBYSCORE).
    pub fn remove_range_by_score(&mut self, range: &RangeByScore) -> usize {
        self.remove_in(range)
    }

    /// Removes the members in the lexicographic `range`; returns how many
    /// (ZREMRANGEBYLEX).
    pub fn remove_range_by_lex(&mut self, range: &RangeByLex) -> usize {
        self.remove_in(range)
    }

    /// Removes up to `count` lowest members, calling `f` on each (lowest
    /// first) before it goes; returns how many (ZPOPMIN, ZMPOP MIN).
    pub fn pop_min(&mut self, count: usize, mut f: impl FnMut(&[u8], f64)) -> usize {
        match &mut self.repr {
            Repr::Listpack(lp) => lp.pop_min(count, f),
            Repr::Skiplist(big) => {
                let Big { list, cow } = &mut **big;
                list.pop_min(count, |m, s| {
                    if let Some(c) = cow {
                        c.lock().before_change(m, Some(s));
                    }
                    f(m, s)
                })
            }
        }
    }

    /// Removes up to `count` highest members, calling `f` on each (highest
    /// first) before it goes; returns how many (ZPOPMAX, ZMPOP MAX).
    pub fn pop_max(&mut self, count: usize, mut f: impl FnMut(&[u8], f64)) -> usize {
        match &mut self.repr {
            Repr::Listpack(lp) => lp.pop_max(count, f),
            Repr::Skiplist(big) => {
                let Big { list, cow } = &mut **big;
                list.pop_max(count, |m, s| {
                    if let Some(c) = cow {
                        c.lock().before_change(m, Some(s));
                    }
                    f(m, s)
                })
            }
        }
    }

    /// Tells a running snapshot's log that `member` is about to change
    /// (`old`: its score now, `None` when it is being added).
    #[inline]
    fn before_change(&self, member: &[u8], old: Option<f64>) {
        if let Some(c) = self.cow() {
            c.lock().before_change(member, old);
        }
    }

    /// The running capture's log, if any (only a skiplist carries one).
    #[inline]
    fn cow(&self) -> Option<&SharedCow> {
        match &self.repr {
            Repr::Skiplist(big) => big.cow.as_ref(),
            Repr::Listpack(_) => None,
        }
    }

    /// Starts a point-in-time capture of this set walked in steps
    /// ([`ZSet::snapshot_step`]): from now on its mutators save what the
    /// walk still needs (see [`cow`]). `None` (and nothing started) for a
    /// listpack or a set whose order is deferred: write those out whole.
    pub fn begin_snapshot(&mut self, counter: Arc<CowCounter>) -> Option<SharedCow> {
        match &mut self.repr {
            Repr::Skiplist(big) if !big.order_deferred() => {
                let log = CowLog::new(counter);
                big.cow = Some(log.clone());
                Some(log)
            }
            _ => None,
        }
    }

    /// Whether this set is the one `log` captures.
    pub fn is_captured_by(&self, log: &SharedCow) -> bool {
        self.cow().is_some_and(|c| Arc::ptr_eq(c, log))
    }

    /// One step of the capture: emits up to `budget` point-in-time members
    /// not written yet, highest first. True when the walk is over (the
    /// set no longer carries the log; its saved pairs are in the log).
    pub fn snapshot_step(&mut self, budget: usize, emit: &mut dyn FnMut(&[u8], f64)) -> bool {
        // A listpack carries no log: a set that became one ended its
        // capture as it converted.
        let Repr::Skiplist(big) = &mut self.repr else {
            return true;
        };
        let done = match &big.cow {
            Some(c) => c.lock().step(&big.list, budget, emit),
            None => true,
        };
        if done {
            big.cow = None;
        }
        done
    }

    /// Ends a capture now (the set leaves the keyspace or changes shape):
    /// what the walk has not written yet goes to the log's saved pairs.
    pub fn end_snapshot(&mut self) {
        if let Repr::Skiplist(big) = &mut self.repr {
            if let Some(c) = big.cow.take() {
                c.lock().finish(&big.list);
            }
        }
    }

    /// Drops a capture without finishing it (the snapshot gave up): the
    /// set stops feeding the log.
    pub fn abandon_snapshot(&mut self) {
        if let Repr::Skiplist(big) = &mut self.repr {
            big.cow = None;
        }
    }

    /// One ZSCAN step: visits members from `cursor` on and returns the next
    /// cursor (0 when done). A listpack is visited whole in one step (as in
    /// Redis); a skiplist visits about `count` members per step. Members
    /// present during the whole scan are visited once, unless heavy removals
    /// compact the set meanwhile (then some may be visited twice or missed).
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], f64)) -> u64 {
        match &self.repr {
            Repr::Listpack(_) => {
                for (m, s) in self.iter() {
                    f(m, s);
                }
                0
            }
            Repr::Skiplist(sl) => sl.scan(cursor, count, f),
        }
    }
}

/// Position of a [`Range`].
#[derive(Clone, Copy)]
enum Pos<'a> {
    Listpack(&'a Listpack, usize),
    Skiplist(&'a SkipList, u32),
    End,
}

/// The bound a [`Range`] stops at (the maximum walking forward, the minimum
/// walking backward).
#[derive(Clone, Copy)]
enum Stop<'a> {
    Never,
    Score(RangeByScore),
    Lex(&'a RangeByLex),
}

/// Members of a set in order (or reverse order), as `(member, score)`.
#[derive(Clone)]
pub struct Range<'a> {
    pos: Pos<'a>,
    reverse: bool,
    remaining: usize,
    stop: Stop<'a>,
}

impl<'a> Iterator for Range<'a> {
    type Item = (&'a [u8], f64);

    #[inline]
    fn next(&mut self) -> Option<(&'a [u8], f64)> {
        if self.remaining == 0 {
            return None;
        }
        let (member, score) = match self.pos {
            Pos::Listpack(lp, off) => {
                let e = lp.entry(off)?;
                let next = if self.reverse { lp.prev(off) } else { e.end };
                self.pos = Pos::Listpack(lp, next);
                (e.member, e.score)
            }
            Pos::Skiplist(sl, x) => {
                if x == NIL {
                    return None;
                }
                let next = if self.reverse { sl.prev(x) } else { sl.next(x) };
                self.pos = Pos::Skiplist(sl, next);
                sl.entry(x)
            }
            Pos::End => return None,
        };
        let inside = match self.stop {
            Stop::Never => true,
            Stop::Score(r) if self.reverse => r.gte_min(score),
            Stop::Score(r) => r.lte_max(score),
            Stop::Lex(r) if self.reverse => r.gte_min(member),
            Stop::Lex(r) => r.lte_max(member),
        };
        if !inside {
            self.remaining = 0;
            return None;
        }
        self.remaining -= 1;
        Some((member, score))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match (self.pos, self.stop) {
            (Pos::End, _) => (0, Some(0)),
            (_, Stop::Never) => (self.remaining, Some(self.remaining)),
            _ => (0, Some(self.remaining)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> ZSetLimits {
        ZSetLimits {
            max_entries: 4,
            max_value: 8,
        }
    }

    fn collect(r: Range<'_>) -> Vec<(Vec<u8>, f64)> {
        r.map(|(m, s)| (m.to_vec(), s)).collect()
    }

    #[test]
    fn a_small_set_is_one_allocation() {
        // 24 bytes inline in the key's value; the listpack's bytes are the
        // only allocation (5 `playerN` members with scores 10..50: 45 bytes,
        // no back lengths, in a 48-byte class).
        assert_eq!(std::mem::size_of::<ZSet>(), 24);
        let l = ZSetLimits::default();
        let mut z = ZSet::new();
        for i in 1..=5 {
            z.insert(format!("player{i}").as_bytes(), (i * 10) as f64, l);
        }
        assert_eq!(z.memory_usage(), 24 + alloc_size(45));
        assert_eq!(alloc_size(45), 48);
    }

    #[test]
    fn alloc_size_follows_jemalloc_classes() {
        let cases = [
            (1, 8),
            (8, 8),
            (9, 16),
            (17, 32),
            (33, 48),
            (100, 112),
            (129, 160),
            (1300, 1536),
            (4097, 5120),
        ];
        for (n, want) in cases {
            assert_eq!(alloc_size(n), want, "{n}");
        }
    }

    #[test]
    fn converts_at_the_entry_limit() {
        let mut z = ZSet::new();
        for i in 0..4 {
            z.insert(format!("m{i}").as_bytes(), i as f64, small());
        }
        assert_eq!(z.encoding(), "listpack");
        // Updates never convert.
        z.insert(b"m0", 10.0, small());
        assert_eq!(z.encoding(), "listpack");
        z.insert(b"m4", 4.0, small());
        assert_eq!(z.encoding(), "skiplist");
        // Shrinking does not convert back.
        z.remove(b"m4");
        z.remove(b"m3");
        assert_eq!(z.encoding(), "skiplist");
        z.convert_to_listpack_if_needed(z.max_member_len(), small());
        assert_eq!(z.encoding(), "listpack");
        let got: Vec<_> = z.iter().map(|(m, _)| m.to_vec()).collect();
        assert_eq!(got, vec![b"m1".to_vec(), b"m2".to_vec(), b"m0".to_vec()]);
    }

    #[test]
    fn converts_on_a_long_member() {
        let mut z = ZSet::new();
        z.insert(b"12345678", 1.0, small());
        assert!(z.is_listpack());
        z.insert(b"123456789", 1.0, small());
        assert_eq!(z.encoding(), "skiplist");
        let zero = ZSetLimits {
            max_entries: 0,
            max_value: 64,
        };
        let mut z = ZSet::new();
        z.insert(b"a", 1.0, zero);
        assert_eq!(z.encoding(), "skiplist");
        assert_eq!(
            ZSet::with_encoding_for(5, 1, small()).encoding(),
            "skiplist"
        );
        assert_eq!(
            ZSet::with_encoding_for(4, 8, small()).encoding(),
            "listpack"
        );
    }

    #[test]
    fn zadd_flags_follow_redis() {
        let l = ZSetLimits::default();
        let mut z = ZSet::new();
        let f = |nx, xx, gt, lt, incr| ZAddFlags {
            nx,
            xx,
            gt,
            lt,
            incr,
        };
        assert_eq!(
            z.zadd(b"a", 1.0, f(false, true, false, false, false), l),
            Ok(ZAddOutcome::Skipped)
        );
        assert_eq!(
            z.zadd(b"a", 5.0, f(false, false, true, false, false), l),
            Ok(ZAddOutcome::Added { score: 5.0 })
        );
        assert_eq!(
            z.zadd(b"a", 4.0, f(false, false, true, false, false), l),
            Ok(ZAddOutcome::Skipped)
        );
        assert_eq!(
            z.zadd(b"a", 5.0, f(false, false, true, false, false), l),
            Ok(ZAddOutcome::Skipped)
        );
        assert_eq!(
            z.zadd(b"a", 6.0, f(false, false, true, false, false), l),
            Ok(ZAddOutcome::Updated {
                old: 5.0,
                score: 6.0
            })
        );
        assert_eq!(
            z.zadd(b"a", 7.0, f(false, false, false, true, false), l),
            Ok(ZAddOutcome::Skipped)
        );
        assert_eq!(
            z.zadd(b"a", 1.0, f(true, false, false, false, false), l),
            Ok(ZAddOutcome::Skipped)
        );
        assert_eq!(
            z.zadd(b"a", 6.0, ZAddFlags::default(), l),
            Ok(ZAddOutcome::Unchanged { score: 6.0 })
        );
        assert_eq!(
            z.zadd(b"a", -2.0, f(false, false, false, true, true), l),
            Ok(ZAddOutcome::Updated {
                old: 6.0,
                score: 4.0
            })
        );
        assert_eq!(
            z.zadd(b"a", 0.0, f(false, false, false, false, true), l),
            Ok(ZAddOutcome::Unchanged { score: 4.0 })
        );
        z.insert(b"i", f64::INFINITY, l);
        assert_eq!(z.incr(b"i", f64::NEG_INFINITY, l), Err(NanScore));
        assert_eq!(z.score(b"i"), Some(f64::INFINITY));
        assert_eq!(
            z.zadd(b"n", f64::NAN, ZAddFlags::default(), l),
            Err(NanScore)
        );
        assert_eq!(z.incr(b"new", 2.5, l), Ok(2.5));
        assert_eq!(
            NanScore.to_string(),
            "ERR resulting score is not a number (NaN)"
        );
    }

    #[test]
    fn negative_zero_as_redis() {
        let l = ZSetLimits::default();
        let mut lp = ZSet::new();
        assert_eq!(
            lp.incr(b"m", -0.0, l).map(|s| s.is_sign_negative()),
            Ok(true)
        );
        assert!(lp.score(b"m").unwrap().is_sign_positive());
        let mut sl = ZSet::with_encoding_for(1000, 1, l);
        assert_eq!(sl.encoding(), "skiplist");
        sl.insert(b"m", -0.0, l);
        assert!(sl.score(b"m").unwrap().is_sign_negative());
        // 0 == -0: no update, the old sign stays.
        assert_eq!(sl.insert(b"m", 0.0, l), InsertOutcome::Unchanged);
        assert!(sl.score(b"m").unwrap().is_sign_negative());
    }

    #[test]
    fn ranges_in_both_encodings() {
        for limits in [ZSetLimits::default(), small()] {
            let mut z = ZSet::new();
            for (m, s) in [("a", 1.0), ("b", 2.0), ("c", 2.0), ("d", 3.0), ("e", 5.0)] {
                z.insert(m.as_bytes(), s, limits);
            }
            let r = RangeByScore::parse(b"(1", b"3").unwrap();
            assert_eq!(z.count_by_score(&r), 3);
            let fwd = collect(z.range_by_score(&r, false, 0, None));
            assert_eq!(fwd.len(), 3);
            assert_eq!(fwd[0].0, b"b");
            let rev = collect(z.range_by_score(&r, true, 1, Some(1)));
            assert_eq!(rev, vec![(b"c".to_vec(), 2.0)]);
            assert_eq!(z.range_by_score(&r, false, 3, None).count(), 0);
            let top = collect(z.range_by_rank(0, 1, true));
            assert_eq!(top, vec![(b"e".to_vec(), 5.0), (b"d".to_vec(), 3.0)]);
            assert_eq!(z.range_by_rank(3, 100, false).count(), 2);
            assert_eq!(z.rank(b"c", false), Some((2, 2.0)));
            assert_eq!(z.rank(b"c", true), Some((2, 2.0)));
            assert_eq!(z.rank(b"e", true), Some((0, 5.0)));
            assert_eq!(z.get_by_rank(0, true), Some((&b"e"[..], 5.0)));
            let lex = RangeByLex::parse(b"[b", b"(d").unwrap();
            assert_eq!(z.count_by_lex(&lex), 2);
            let mut popped = vec![];
            assert_eq!(z.pop_max(2, |m, _| popped.push(m.to_vec())), 2);
            assert_eq!(popped, vec![b"e".to_vec(), b"d".to_vec()]);
            assert_eq!(z.remove_range_by_score(&r), 2);
            assert_eq!(collect(z.iter()), vec![(b"a".to_vec(), 1.0)]);
        }
    }

    #[test]
    fn lex_walks_over_mixed_scores_match_redis_listpack() {
        // Replies of redis-server 7.0.15 for ZADD k 1 b 2 a 3 c 4 aa.
        let l = ZSetLimits::default();
        let mut z = ZSet::new();
        for (m, s) in [("b", 1.0), ("a", 2.0), ("c", 3.0), ("aa", 4.0)] {
            z.insert(m.as_bytes(), s, l);
        }
        let names = |r: Range<'_>| -> Vec<String> {
            r.map(|(m, _)| String::from_utf8_lossy(m).into_owned())
                .collect()
        };
        let r = RangeByLex::parse(b"[a", b"[b").unwrap();
        assert_eq!(names(z.range_by_lex(&r, false, 0, None)), ["b", "a"]);
        assert_eq!(
            names(z.range_by_lex(&r, true, 0, None)),
            ["aa", "c", "a", "b"]
        );
        assert_eq!(z.count_by_lex(&r), 2);
        let r2 = RangeByLex::parse(b"(a", b"+").unwrap();
        assert_eq!(names(z.range_by_lex(&r2, false, 1, Some(2))), ["a", "c"]);
        let r3 = RangeByLex::parse(b"-", b"[aa").unwrap();
        assert_eq!(z.range_by_lex(&r3, false, 0, None).count(), 0);
        assert_eq!(z.remove_range_by_lex(&r), 2);
        assert_eq!(names(z.iter()), ["c", "aa"]);
    }
}
