//! A board's entries: fixed-size records in an arena addressed by `u32`
//! ids, and the order between them.
//!
//! An entry is 40 bytes: score, subscore, time, and its member, inline when
//! at most 15 bytes, else as (offset, length) into one byte heap. Freed ids
//! are reused; heap bytes of removed members are garbage until the board
//! compacts its heap.

use std::cmp::Ordering;

use crate::engine::zset::alloc_size;
use crate::engine::zset::arena::ChunkedVec;

use super::tree::{reserve, NIL};
use super::{Order, Tiebreak};

/// Longest member stored inside its entry.
const INLINE_MAX: usize = 15;
/// First byte of a member slot whose bytes are in the heap.
const HEAP_TAG: u8 = 0xFF;

/// One entry, or a free slot (linked through `time`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub score: i64,
    pub subscore: i64,
    pub time: u64,
    /// `[len, bytes..]` when len <= 15, else `[HEAP_TAG, offset: 7 bytes,
    /// len: 8 bytes]`.
    member: [u8; 1 + INLINE_MAX],
}

/// What orders an entry: the ordering keys of score, subscore and time
/// (mapped so that ascending is the board's order), then the member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Key<'a> {
    pub ks: i64,
    pub kss: i64,
    pub kt: u64,
    pub member: &'a [u8],
    /// The member as [`packed`] orders it, when it fits inline (a
    /// function of `member`, so it changes no comparison).
    packed: Option<u128>,
}

/// A member of at most `INLINE_MAX` bytes in its entry's slot (`[len,
/// bytes.., zeros]`) as a number whose order is the members' byte order:
/// the bytes, zero-padded, then the length (a shorter member that the
/// other starts with is equal to it up to the padding, and then smaller
/// by its length). None for a member in the heap. A tie on score,
/// subscore and time (every pipelined submit of one run shares its time)
/// compares members: one comparison of numbers instead of a memcmp call.
#[inline]
fn packed(m: &[u8; 1 + INLINE_MAX]) -> Option<u128> {
    (m[0] as usize <= INLINE_MAX).then(|| u128::from_be_bytes(*m).rotate_left(8))
}

/// The entries and the board's order.
#[derive(Debug, Clone)]
pub(super) struct Store {
    entries: ChunkedVec<Entry>,
    heap: Vec<u8>,
    heap_garbage: usize,
    free: u32,
    desc: bool,
    latest: bool,
}

/// Highest entry id (the tree keeps a flag in the top bit of an id).
pub(super) const MAX_ID: u32 = (1 << 31) - 2;

impl Store {
    /// No entries, ordered by `order` and `tiebreak`.
    pub fn new(order: Order, tiebreak: Tiebreak) -> Store {
        Store {
            entries: ChunkedVec::new(),
            heap: Vec::new(),
            heap_garbage: 0,
            free: NIL,
            desc: order == Order::Desc,
            latest: tiebreak == Tiebreak::Latest,
        }
    }

    /// Bytes allocated, rounded to the allocator's size classes.
    pub fn memory_usage(&self) -> usize {
        self.entries.allocated() + alloc_size(self.heap.capacity())
    }

    /// Entries in the arena, free ones included.
    pub fn slots(&self) -> usize {
        self.entries.len()
    }

    /// Entry `id`.
    #[inline]
    pub fn get(&self, id: u32) -> &Entry {
        &self.entries[id as usize]
    }

    /// Entry `id`'s member.
    #[inline]
    pub fn member(&self, id: u32) -> &[u8] {
        let m = &self.entries[id as usize].member;
        let tag = m[0] as usize;
        if tag <= INLINE_MAX {
            &m[1..1 + tag]
        } else {
            let (off, len) = heap_ref(m);
            self.heap.get(off..off.saturating_add(len)).unwrap_or(&[])
        }
    }

    /// The ordering key of a score (ascending is the board's order).
    #[inline]
    pub fn score_key(&self, score: i64) -> i64 {
        if self.desc {
            !score
        } else {
            score
        }
    }

    /// The ordering key of a time.
    #[inline]
    fn time_key(&self, time: u64) -> u64 {
        if self.latest {
            !time
        } else {
            time
        }
    }

    /// The ordering key of entry `id`'s score.
    #[inline]
    pub fn order_score(&self, id: u32) -> i64 {
        self.score_key(self.entries[id as usize].score)
    }

    /// The key of an entry with these fields.
    pub fn key_of<'a>(&self, score: i64, subscore: i64, time: u64, member: &'a [u8]) -> Key<'a> {
        let packed = (member.len() <= INLINE_MAX).then(|| {
            let mut m = [0u8; 1 + INLINE_MAX];
            m[0] = member.len() as u8;
            m[1..1 + member.len()].copy_from_slice(member);
            u128::from_be_bytes(m).rotate_left(8)
        });
        Key {
            ks: self.score_key(score),
            kss: self.score_key(subscore),
            kt: self.time_key(time),
            member,
            packed,
        }
    }

    /// Entry `id`'s key.
    #[inline]
    pub fn key(&self, id: u32) -> Key<'_> {
        let e = self.get(id);
        Key {
            ks: self.score_key(e.score),
            kss: self.score_key(e.subscore),
            kt: self.time_key(e.time),
            member: self.member(id),
            packed: packed(&e.member),
        }
    }

    /// Entry `e`'s key against `key`, whose score it shares: subscore,
    /// time, then member, read only as far as they tie.
    #[inline(always)]
    fn cmp_tied(&self, e: u32, key: &Key<'_>) -> Ordering {
        let x = self.get(e);
        self.score_key(x.subscore)
            .cmp(&key.kss)
            .then_with(|| self.time_key(x.time).cmp(&key.kt))
            .then_with(|| match (packed(&x.member), key.packed) {
                (Some(a), Some(b)) => a.cmp(&b),
                _ => self.member(e).cmp(key.member),
            })
    }

    /// Entry `e` (whose score's ordering key is `ks`) comes before `key`.
    #[inline]
    pub fn before(&self, ks: i64, e: u32, key: &Key<'_>) -> bool {
        match ks.cmp(&key.ks) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => self.cmp_tied(e, key) == Ordering::Less,
        }
    }

    /// Entry `e` (whose score's ordering key is `ks`) comes before `key`
    /// or is it.
    #[inline]
    pub fn not_after(&self, ks: i64, e: u32, key: &Key<'_>) -> bool {
        match ks.cmp(&key.ks) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => self.cmp_tied(e, key) != Ordering::Greater,
        }
    }

    /// Entry `e` is strictly better than (score, subscore) = `ks`, `kss`
    /// (ordering keys).
    #[inline]
    pub fn before_group(&self, ks: i64, e: u32, kss: (i64, i64)) -> bool {
        match ks.cmp(&kss.0) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => self.score_key(self.get(e).subscore) < kss.1,
        }
    }

    /// Entries `a` and `b` have the same (score, subscore).
    #[inline]
    pub fn same_group(&self, a: u32, b: u32) -> bool {
        let (x, y) = (self.get(a), self.get(b));
        x.score == y.score && x.subscore == y.subscore
    }

    /// Stores a new entry; None when the ids are used up.
    pub fn alloc(&mut self, member: &[u8], score: i64, subscore: i64, time: u64) -> Option<u32> {
        let id = if self.free != NIL {
            self.free
        } else if self.entries.len() <= MAX_ID as usize {
            self.entries.len() as u32
        } else {
            return None;
        };
        let entry = Entry {
            score,
            subscore,
            time,
            member: self.store_member(member),
        };
        if id == self.free {
            self.free = self.entries[id as usize].time as u32;
            self.entries[id as usize] = entry;
        } else {
            self.entries.push_growing_from(entry, 4);
        }
        Some(id)
    }

    /// Frees entry `id`.
    pub fn free(&mut self, id: u32) {
        let next = self.free;
        let e = &mut self.entries[id as usize];
        if e.member[0] == HEAP_TAG {
            self.heap_garbage += heap_ref(&e.member).1;
        }
        e.member = [0; 1 + INLINE_MAX];
        e.time = u64::from(next);
        self.free = id;
    }

    /// Sets entry `id`'s score, subscore and time (out of the tree).
    pub fn set(&mut self, id: u32, score: i64, subscore: i64, time: u64) {
        let e = &mut self.entries[id as usize];
        e.score = score;
        e.subscore = subscore;
        e.time = time;
    }

    fn store_member(&mut self, member: &[u8]) -> [u8; 1 + INLINE_MAX] {
        let mut slot = [0u8; 1 + INLINE_MAX];
        if member.len() <= INLINE_MAX {
            slot[0] = member.len() as u8;
            slot[1..1 + member.len()].copy_from_slice(member);
        } else {
            let off = self.heap.len() as u64;
            reserve(&mut self.heap, member.len());
            self.heap.extend_from_slice(member);
            slot[0] = HEAP_TAG;
            slot[1..8].copy_from_slice(&off.to_le_bytes()[..7]);
            slot[8..16].copy_from_slice(&(member.len() as u64).to_le_bytes());
        }
        slot
    }

    /// Heap bytes no live member uses make up most of the heap.
    pub fn heap_mostly_garbage(&self) -> bool {
        self.heap_garbage > 4096 && self.heap_garbage * 2 > self.heap.len()
    }

    /// Rewrites the heap with the members of `live` only (every entry
    /// in use).
    pub fn compact_heap(&mut self, live: impl Iterator<Item = u32>) {
        let mut heap = Vec::new();
        reserve(
            &mut heap,
            self.heap.len() - self.heap_garbage.min(self.heap.len()),
        );
        for id in live {
            let m = self.entries[id as usize].member;
            if m[0] != HEAP_TAG {
                continue;
            }
            let (off, len) = heap_ref(&m);
            let bytes = self.heap.get(off..off.saturating_add(len)).unwrap_or(&[]);
            let at = heap.len() as u64;
            reserve(&mut heap, bytes.len());
            heap.extend_from_slice(bytes);
            self.entries[id as usize].member[1..8].copy_from_slice(&at.to_le_bytes()[..7]);
        }
        self.heap = heap;
        self.heap_garbage = 0;
    }
}

/// The (offset, length) of a member stored in the heap.
#[inline]
fn heap_ref(m: &[u8; 1 + INLINE_MAX]) -> (usize, usize) {
    let off = u64::from_le_bytes([m[1], m[2], m[3], m[4], m[5], m[6], m[7], 0]);
    let len = u64::from_le_bytes([m[8], m[9], m[10], m[11], m[12], m[13], m[14], m[15]]);
    (
        usize::try_from(off).unwrap_or(usize::MAX),
        usize::try_from(len).unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            prop_oneof![Just(0u8), Just(1), Just(b'a'), Just(255)],
            0..18,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// Entries tied on score, subscore and time order by member bytes,
        /// inline (packed) or in the heap, against a key of either kind;
        /// zero bytes and members that start with one another included.
        #[test]
        fn tied_entries_order_by_member_bytes(a in bytes(), b in bytes(), t in 0u64..2) {
            for (order, tiebreak) in [(Order::Desc, Tiebreak::Earliest), (Order::Asc, Tiebreak::Latest)] {
                let mut s = Store::new(order, tiebreak);
                let Some(e) = s.alloc(&a, 5, 1, t) else {
                    return Err(TestCaseError::fail("alloc"));
                };
                let key = s.key_of(5, 1, 1, &b);
                let ks = s.order_score(e);
                let want = (s.time_key(t), &a[..]).cmp(&(s.time_key(1), &b[..]));
                prop_assert_eq!(s.before(ks, e, &key), want == Ordering::Less);
                prop_assert_eq!(s.not_after(ks, e, &key), want != Ordering::Greater);
                prop_assert_eq!(s.key(e).cmp(&key), want);
                prop_assert_eq!(s.key(e).packed, s.key_of(5, 1, t, &a).packed);
            }
        }
    }
}
