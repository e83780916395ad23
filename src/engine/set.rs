//! Sets, in the two encodings Redis 7.0 reports with OBJECT ENCODING:
//!
//! - `intset`: a sorted array of integers, each of the smallest width (16, 32
//!   or 64 bits) that holds every member, used while every member is a
//!   canonical integer (Redis's `string2ll`: `12`, not `012` or `+12`) and
//!   the set has at most `set-max-intset-entries` members.
//! - `hashtable`: [`MemberTable`], an open-addressing table over members
//!   stored back to back in one byte arena, built for memory (friend lists of
//!   100 to 5,000 ids are the common case).
//!
//! A set moves from `intset` to `hashtable` in one place,
//! `SetValue::convert_to_hashtable`, and never back, except when a command
//! builds a new set ([`SetValue::from_members`], [`SetValue::reencode`]),
//! which picks the encoding a fresh set of those members gets in Redis.
//!
//! Nothing here knows about RESP or commands; randomness comes from the
//! caller's `Rng`.

use std::sync::{Arc, OnceLock};

use ahash::RandomState;
use rand::seq::{index, SliceRandom};
use rand::Rng;

use super::cow::{ArenaCapture, ArenaEntries, CapturedArena, CowCounter, SharedArenaLog};
use crate::protocol::number::parse_i64;

/// Redis's default `set-max-intset-entries`.
pub const DEFAULT_MAX_INTSET_ENTRIES: usize = 512;

/// The score every member of a plain set has when the set is read as a
/// sorted set (ZUNIONSTORE, ZINTER, ... accept sets as inputs).
pub const MEMBER_SCORE: f64 = 1.0;

/// One member as the set holds it: an `intset` member is an integer, a
/// `hashtable` member is bytes. [`Member::bytes`] gives the bytes either way
/// without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member<'a> {
    /// A member of an `intset`.
    Int(i64),
    /// A member of a `hashtable`.
    Bytes(&'a [u8]),
}

impl<'a> Member<'a> {
    /// The member's bytes, as clients see them; an integer is formatted into
    /// `buf` (a stack buffer), so no allocation either way.
    pub fn bytes<'b>(&'b self, buf: &'b mut itoa::Buffer) -> &'b [u8]
    where
        'a: 'b,
    {
        match *self {
            Member::Int(n) => buf.format(n).as_bytes(),
            Member::Bytes(b) => b,
        }
    }

    /// The member's bytes in a new vector.
    pub fn to_vec(&self) -> Vec<u8> {
        self.bytes(&mut itoa::Buffer::new()).to_vec()
    }

    /// The member as an integer, if it is a canonical one.
    pub fn as_int(&self) -> Option<i64> {
        match *self {
            Member::Int(n) => Some(n),
            Member::Bytes(b) => parse_i64(b),
        }
    }
}

/// A set value.
#[derive(Debug, Clone)]
pub struct SetValue {
    enc: Encoding,
}

#[derive(Debug, Clone)]
enum Encoding {
    Ints(IntSet),
    // Boxed so a small intset does not carry the table's fields.
    Table(Box<MemberTable>),
}

impl Default for SetValue {
    fn default() -> Self {
        SetValue::new()
    }
}

impl SetValue {
    /// An empty set (an `intset`, as Redis creates for an integer first
    /// member; the first non-integer converts it).
    pub fn new() -> SetValue {
        SetValue {
            enc: Encoding::Ints(IntSet::default()),
        }
    }

    /// A set of `members` (duplicates collapse) in the encoding Redis gives
    /// a freshly built set: `intset` when every member is an integer and
    /// there are at most `max_intset` of them.
    pub fn from_members<'m>(
        members: impl IntoIterator<Item = &'m [u8]>,
        max_intset: usize,
    ) -> SetValue {
        let mut s = SetValue::new();
        for m in members {
            s.insert(m, max_intset);
        }
        s
    }

    /// Number of members (SCARD).
    pub fn len(&self) -> usize {
        match &self.enc {
            Encoding::Ints(i) => i.len(),
            Encoding::Table(t) => t.len(),
        }
    }

    /// Whether the set has no members (such a set must not stay in the
    /// keyspace).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An `intset`'s bytes per member (2, 4 or 8; it only grows, as in
    /// Redis), `None` for a `hashtable`.
    pub fn intset_width(&self) -> Option<usize> {
        match &self.enc {
            Encoding::Ints(i) => Some(i.width()),
            Encoding::Table(_) => None,
        }
    }

    /// The name OBJECT ENCODING answers: `intset` or `hashtable`.
    pub fn encoding(&self) -> &'static str {
        match &self.enc {
            Encoding::Ints(_) => "intset",
            Encoding::Table(_) => "hashtable",
        }
    }

    /// A deep copy.
    pub fn duplicate(&self) -> SetValue {
        self.clone()
    }

    /// Approximate bytes used (heap buffers by capacity, plus the struct).
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<SetValue>()
            + match &self.enc {
                Encoding::Ints(i) => i.heap_bytes(),
                Encoding::Table(t) => std::mem::size_of::<MemberTable>() + t.heap_bytes(),
            }
    }

    /// Whether `member` is in the set (SISMEMBER).
    pub fn contains(&self, member: &[u8]) -> bool {
        match &self.enc {
            Encoding::Ints(i) => parse_i64(member).is_some_and(|n| i.contains(n)),
            Encoding::Table(t) => t.contains(member),
        }
    }

    /// Whether a member read from another set is in this one, without
    /// formatting integers when both sides are `intset`s.
    pub fn contains_member(&self, member: Member<'_>) -> bool {
        match (&self.enc, member) {
            (Encoding::Ints(i), Member::Int(n)) => i.contains(n),
            (_, m) => self.contains(m.bytes(&mut itoa::Buffer::new())),
        }
    }

    /// Adds `member`; returns whether it was new. An `intset` becomes a
    /// `hashtable` when `member` is not an integer or the set would exceed
    /// `max_intset` members (`set-max-intset-entries`).
    pub fn insert(&mut self, member: &[u8], max_intset: usize) -> bool {
        if let Encoding::Ints(ints) = &mut self.enc {
            match parse_i64(member) {
                Some(n) if ints.contains(n) => return false,
                Some(n) if ints.len() < max_intset => return ints.insert(n),
                _ => self.convert_to_hashtable(1),
            }
        }
        match &mut self.enc {
            Encoding::Table(t) => t.insert(member),
            Encoding::Ints(_) => false,
        }
    }

    /// Removes `member`; returns whether it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match &mut self.enc {
            Encoding::Ints(i) => parse_i64(member).is_some_and(|n| i.remove(n)),
            Encoding::Table(t) => t.remove(member),
        }
    }

    /// The one place an `intset` becomes a `hashtable` (room is made for
    /// `extra` more members).
    fn convert_to_hashtable(&mut self, extra: usize) {
        let Encoding::Ints(ints) = &self.enc else {
            return;
        };
        let mut table = MemberTable::with_capacity(ints.len() + extra);
        let mut buf = itoa::Buffer::new();
        for n in ints.iter() {
            table.insert(buf.format(n).as_bytes());
        }
        self.enc = Encoding::Table(Box::new(table));
    }

    /// Rebuilds the set in the encoding a fresh set of the same members
    /// gets: a `hashtable` of at most `max_intset` integers becomes an
    /// `intset` again (Redis does this when SPOP keeps only a few members).
    pub fn reencode(&mut self, max_intset: usize) {
        let Encoding::Table(t) = &self.enc else {
            return;
        };
        if t.len() > max_intset {
            return;
        }
        let mut ints = IntSet::default();
        for m in t.iter() {
            match parse_i64(m) {
                Some(n) => {
                    ints.insert(n);
                }
                None => return,
            }
        }
        self.enc = Encoding::Ints(ints);
    }

    /// Every member: ascending for an `intset`, table order for a
    /// `hashtable` (SMEMBERS order). Read as a sorted set, each member has
    /// the score [`MEMBER_SCORE`] (see [`SetValue::iter_scored`]).
    pub fn iter(&self) -> Iter<'_> {
        match &self.enc {
            Encoding::Ints(i) => Iter::Ints(i.iter()),
            Encoding::Table(t) => Iter::Table(t.iter()),
        }
    }

    /// The set read as a sorted set: `(member, 1.0)` pairs, for the
    /// sorted-set commands that accept plain sets as inputs.
    pub fn iter_scored(&self) -> impl Iterator<Item = (Member<'_>, f64)> + '_ {
        self.iter().map(|m| (m, MEMBER_SCORE))
    }

    /// One member chosen uniformly at random (SRANDMEMBER, SPOP).
    pub fn random_member<R: Rng + ?Sized>(&self, rng: &mut R) -> Option<Member<'_>> {
        match &self.enc {
            Encoding::Ints(i) => {
                if i.len() == 0 {
                    return None;
                }
                i.get(rng.random_range(0..i.len())).map(Member::Int)
            }
            Encoding::Table(t) => t.random(rng).map(Member::Bytes),
        }
    }

    /// `count` distinct members chosen at random, or every member when the
    /// set has no more than `count` (in set order then).
    pub fn random_distinct<R: Rng + ?Sized>(&self, count: usize, rng: &mut R) -> Vec<Member<'_>> {
        let len = self.len();
        if count >= len {
            return self.iter().collect();
        }
        match &self.enc {
            Encoding::Ints(ints) => index::sample(rng, len, count)
                .into_iter()
                .filter_map(|i| ints.get(i).map(Member::Int))
                .collect(),
            // Many of the members: shuffle `count` of them into place and
            // keep those (the part partial_shuffle returns, which rand puts
            // at the end of the slice, not the start).
            Encoding::Table(t) if count.saturating_mul(3) > len => {
                let mut all: Vec<&[u8]> = t.iter().collect();
                let (picked, _) = all.partial_shuffle(rng, count);
                picked.iter().copied().map(Member::Bytes).collect()
            }
            // Few of them: draw slots until enough distinct ones came up.
            Encoding::Table(t) => {
                let mut slots = std::collections::HashSet::with_capacity(count);
                let mut out = Vec::with_capacity(count);
                while out.len() < count {
                    let Some((slot, m)) = t.random_slot(rng) else {
                        break;
                    };
                    if slots.insert(slot) {
                        out.push(Member::Bytes(m));
                    }
                }
                out
            }
        }
    }

    /// One step of SSCAN: calls `emit` for the members of at least `count`
    /// buckets' worth (a hint, as in Redis) starting at `cursor`, and returns
    /// the next cursor (0 when the iteration is complete). An `intset` is
    /// returned whole in one step. Every member present for a whole
    /// iteration is emitted at least once, even if the table is resized
    /// between steps.
    pub fn scan(&self, cursor: u64, count: usize, mut emit: impl FnMut(Member<'_>)) -> u64 {
        match &self.enc {
            Encoding::Ints(i) => {
                i.iter().for_each(|n| emit(Member::Int(n)));
                0
            }
            Encoding::Table(t) => t.scan(cursor, count, |m| emit(Member::Bytes(m))),
        }
    }

    /// Starts a point-in-time capture of this set walked in steps
    /// ([`SetValue::snapshot_step`]; see `engine::cow`). `None` (and
    /// nothing started) for an `intset`: write that out whole.
    pub fn begin_snapshot(&mut self, counter: Arc<CowCounter>) -> Option<SharedArenaLog> {
        match &mut self.enc {
            Encoding::Table(t) => Some(t.capture.begin(t.arena.len(), counter)),
            Encoding::Ints(_) => None,
        }
    }

    /// Whether this set is the one `log` captures.
    pub fn is_captured_by(&self, log: &SharedArenaLog) -> bool {
        matches!(&self.enc, Encoding::Table(t) if t.capture.is(log))
    }

    /// One step of the capture: emits the point-in-time members among the
    /// next `budget` entries of the arena. True when the walk is over (the
    /// set no longer carries the log; members saved early are in the log).
    pub fn snapshot_step(&mut self, budget: usize, emit: &mut dyn FnMut(&[u8])) -> bool {
        match &mut self.enc {
            Encoding::Table(t) => ArenaCapture::step_of(&mut **t, budget, &mut |raw| {
                for_each_saved_member(raw, &mut *emit)
            }),
            _ => true,
        }
    }

    /// Ends a capture now (the set leaves the keyspace): what the walk has
    /// not read is saved in the log.
    pub fn end_snapshot(&mut self) {
        if let Encoding::Table(t) = &mut self.enc {
            ArenaCapture::finish_of(&mut **t);
        }
    }

    /// Drops a capture without finishing it (the snapshot gave up).
    pub fn abandon_snapshot(&mut self) {
        if let Encoding::Table(t) = &mut self.enc {
            t.capture.abandon();
        }
    }
}

/// Calls `emit` on each member of raw `hashtable` entries, as a capture
/// reads or saves them.
pub fn for_each_saved_member(raw: &[u8], emit: &mut dyn FnMut(&[u8])) {
    let mut at = 0;
    while at < raw.len() {
        let mut len = 0usize;
        let mut shift = 0;
        while let Some(&b) = raw.get(at) {
            at += 1;
            len |= ((b & 0x7f) as usize) << shift;
            shift += 7;
            if b & 0x80 == 0 || shift >= usize::BITS {
                break;
            }
        }
        let Some(m) = at.checked_add(len).and_then(|end| raw.get(at..end)) else {
            return;
        };
        emit(m);
        at += len;
    }
}

/// Iterator over a set's members; see [`SetValue::iter`].
pub enum Iter<'a> {
    /// Over an `intset`.
    Ints(IntIter<'a>),
    /// Over a `hashtable`.
    Table(TableIter<'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = Member<'a>;

    fn next(&mut self) -> Option<Member<'a>> {
        match self {
            Iter::Ints(i) => i.next().map(Member::Int),
            Iter::Table(t) => t.next().map(Member::Bytes),
        }
    }
}

// ---------------------------------------------------------------------------
// intset

/// A sorted array of distinct integers, all stored in the narrowest width
/// that holds the widest member (it widens, never narrows, as in Redis).
#[derive(Debug, Clone)]
enum IntSet {
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

impl Default for IntSet {
    fn default() -> Self {
        IntSet::I16(Vec::new())
    }
}

/// Binary search for `x` in a sorted slice of a narrower type; a value that
/// does not fit the type is before or after everything.
fn search<T: Copy + Ord + TryFrom<i64>>(v: &[T], x: i64) -> Result<usize, usize> {
    match T::try_from(x) {
        Ok(t) => v.binary_search(&t),
        Err(_) if x < 0 => Err(0),
        Err(_) => Err(v.len()),
    }
}

/// Inserts at `at`, growing the buffer by one slot at a time: an intset is
/// small and insertion moves the tail anyway, so memory stays exact.
fn insert_exact<T>(v: &mut Vec<T>, at: usize, x: T) {
    if v.len() == v.capacity() {
        v.reserve_exact(1);
    }
    v.insert(at, x);
}

impl IntSet {
    /// Bytes per member (2, 4 or 8): the width only grows, as Redis's.
    fn width(&self) -> usize {
        match self {
            IntSet::I16(_) => 2,
            IntSet::I32(_) => 4,
            IntSet::I64(_) => 8,
        }
    }

    fn len(&self) -> usize {
        match self {
            IntSet::I16(v) => v.len(),
            IntSet::I32(v) => v.len(),
            IntSet::I64(v) => v.len(),
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            IntSet::I16(v) => v.capacity() * 2,
            IntSet::I32(v) => v.capacity() * 4,
            IntSet::I64(v) => v.capacity() * 8,
        }
    }

    fn position(&self, x: i64) -> Result<usize, usize> {
        match self {
            IntSet::I16(v) => search(v, x),
            IntSet::I32(v) => search(v, x),
            IntSet::I64(v) => search(v, x),
        }
    }

    fn contains(&self, x: i64) -> bool {
        self.position(x).is_ok()
    }

    fn get(&self, i: usize) -> Option<i64> {
        match self {
            IntSet::I16(v) => v.get(i).map(|&n| n.into()),
            IntSet::I32(v) => v.get(i).map(|&n| n.into()),
            IntSet::I64(v) => v.get(i).copied(),
        }
    }

    /// Widens the array so that `x` fits.
    fn widen_for(&mut self, x: i64) {
        let needs_64 = i32::try_from(x).is_err();
        let needs_32 = i16::try_from(x).is_err();
        match self {
            IntSet::I16(v) if needs_64 => {
                *self = IntSet::I64(v.iter().map(|&n| n.into()).collect());
            }
            IntSet::I16(v) if needs_32 => {
                *self = IntSet::I32(v.iter().map(|&n| n.into()).collect());
            }
            IntSet::I32(v) if needs_64 => {
                *self = IntSet::I64(v.iter().map(|&n| n.into()).collect());
            }
            _ => {}
        }
    }

    fn insert(&mut self, x: i64) -> bool {
        self.widen_for(x);
        let Err(at) = self.position(x) else {
            return false;
        };
        match self {
            IntSet::I16(v) => i16::try_from(x).map(|n| insert_exact(v, at, n)).is_ok(),
            IntSet::I32(v) => i32::try_from(x).map(|n| insert_exact(v, at, n)).is_ok(),
            IntSet::I64(v) => {
                insert_exact(v, at, x);
                true
            }
        }
    }

    fn remove(&mut self, x: i64) -> bool {
        let Ok(at) = self.position(x) else {
            return false;
        };
        match self {
            IntSet::I16(v) => drop(v.remove(at)),
            IntSet::I32(v) => drop(v.remove(at)),
            IntSet::I64(v) => drop(v.remove(at)),
        }
        true
    }

    fn iter(&self) -> IntIter<'_> {
        match self {
            IntSet::I16(v) => IntIter::I16(v.iter()),
            IntSet::I32(v) => IntIter::I32(v.iter()),
            IntSet::I64(v) => IntIter::I64(v.iter()),
        }
    }
}

/// Iterator over an `intset`, ascending.
pub enum IntIter<'a> {
    /// 16-bit members.
    I16(std::slice::Iter<'a, i16>),
    /// 32-bit members.
    I32(std::slice::Iter<'a, i32>),
    /// 64-bit members.
    I64(std::slice::Iter<'a, i64>),
}

impl Iterator for IntIter<'_> {
    type Item = i64;

    fn next(&mut self) -> Option<i64> {
        match self {
            IntIter::I16(i) => i.next().map(|&n| n.into()),
            IntIter::I32(i) => i.next().map(|&n| n.into()),
            IntIter::I64(i) => i.next().copied(),
        }
    }
}

// ---------------------------------------------------------------------------
// hashtable

/// The hasher shared by every set table; seeded at random once per process
/// (SSCAN cursors are only meaningful within one process, as in Redis).
fn hasher() -> &'static RandomState {
    static STATE: OnceLock<RandomState> = OnceLock::new();
    STATE.get_or_init(RandomState::new)
}

fn hash_of(member: &[u8]) -> u64 {
    hasher().hash_one(member)
}

/// The control byte of an occupied slot: the top 7 bits of the hash with the
/// high bit set (0 marks an empty slot).
fn tag_of(hash: u64) -> u8 {
    0x80 | (hash >> 57) as u8
}

const MIN_SLOTS: usize = 8;

/// Slots for `n` members at a load of at most 4/5.
fn slots_for(n: usize) -> usize {
    n.saturating_mul(5)
        .div_ceil(4)
        .saturating_add(1)
        .next_power_of_two()
        .max(MIN_SLOTS)
}

/// Arena offsets: 4 bytes each until the arena outgrows 4 GiB.
#[derive(Debug, Clone)]
enum Offsets {
    Narrow(Vec<u32>),
    Wide(Vec<u64>),
}

impl Offsets {
    fn zeroed(n: usize, wide: bool) -> Offsets {
        if wide {
            Offsets::Wide(vec![0; n])
        } else {
            Offsets::Narrow(vec![0; n])
        }
    }

    fn is_wide(&self) -> bool {
        matches!(self, Offsets::Wide(_))
    }

    fn get(&self, i: usize) -> usize {
        match self {
            Offsets::Narrow(v) => v.get(i).map_or(0, |&o| o as usize),
            Offsets::Wide(v) => v.get(i).map_or(0, |&o| o as usize),
        }
    }

    fn set(&mut self, i: usize, off: usize) {
        match self {
            Offsets::Narrow(v) => {
                if let (Some(slot), Ok(o)) = (v.get_mut(i), u32::try_from(off)) {
                    *slot = o;
                }
            }
            Offsets::Wide(v) => {
                if let Some(slot) = v.get_mut(i) {
                    *slot = off as u64;
                }
            }
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Offsets::Narrow(v) => v.capacity() * 4,
            Offsets::Wide(v) => v.capacity() * 8,
        }
    }

    fn widen(&mut self) {
        if let Offsets::Narrow(v) = self {
            *self = Offsets::Wide(v.iter().map(|&o| o.into()).collect());
        }
    }
}

/// The `hashtable` encoding: member bytes live back to back in one arena,
/// each prefixed by its length (LEB128); an open-addressing table with
/// linear probing maps a member's hash to its arena offset. A slot costs 5
/// bytes (a control byte holding 7 hash bits, so most probes never touch the
/// arena, and a 4-byte offset), at a load between 2/5 and 4/5; a member of
/// 12 bytes costs about 13 bytes of arena. Removal shifts the following
/// slots back (no tombstones) and leaves a hole in the arena, compacted once
/// holes outweigh live bytes.
///
/// Each member sits in exactly one slot, so a random occupied slot is a
/// uniformly random member, and SSCAN walks "home" buckets (`hash & mask`)
/// in reverse-binary order like Redis's `dictScan`, which keeps its promise
/// across resizes.
#[derive(Debug, Clone)]
pub struct MemberTable {
    ctrl: Vec<u8>,
    offsets: Offsets,
    arena: Vec<u8>,
    len: usize,
    garbage: usize,
    /// While a snapshot walks the arena in steps (see `engine::cow`): no
    /// entry is moved, and removals are noted first.
    capture: ArenaCapture,
}

impl Drop for MemberTable {
    fn drop(&mut self) {
        ArenaCapture::finish_of(self);
    }
}

impl CapturedArena for MemberTable {
    fn capture_mut(&mut self) -> &mut ArenaCapture {
        &mut self.capture
    }
}

impl ArenaEntries for MemberTable {
    fn arena(&self) -> &[u8] {
        &self.arena
    }

    fn entry_size(&self, off: usize) -> usize {
        self.entry_at(off).1
    }

    fn is_live(&self, off: usize) -> bool {
        let member = self.entry_at(off).0;
        self.find(member, hash_of(member))
            .is_some_and(|slot| self.offsets.get(slot) == off)
    }
}

impl MemberTable {
    fn with_capacity(n: usize) -> MemberTable {
        let slots = slots_for(n);
        MemberTable {
            ctrl: vec![0; slots],
            offsets: Offsets::zeroed(slots, false),
            arena: Vec::new(),
            len: 0,
            garbage: 0,
            capture: ArenaCapture::default(),
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn mask(&self) -> usize {
        self.ctrl.len().wrapping_sub(1)
    }

    fn heap_bytes(&self) -> usize {
        self.ctrl.capacity() + self.offsets.heap_bytes() + self.arena.capacity()
    }

    /// The member stored at arena offset `off`, and the size of its entry.
    fn entry_at(&self, off: usize) -> (&[u8], usize) {
        let mut len = 0usize;
        let mut shift = 0;
        let mut at = off;
        while let Some(&b) = self.arena.get(at) {
            at += 1;
            len |= ((b & 0x7f) as usize) << shift;
            shift += 7;
            if b & 0x80 == 0 || shift >= usize::BITS {
                break;
            }
        }
        let m = self.arena.get(at..at.saturating_add(len)).unwrap_or(&[]);
        (m, at - off + m.len())
    }

    fn member_at_slot(&self, slot: usize) -> &[u8] {
        self.entry_at(self.offsets.get(slot)).0
    }

    fn home(&self, member: &[u8]) -> usize {
        hash_of(member) as usize & self.mask()
    }

    /// The slot holding `member`.
    fn find(&self, member: &[u8], hash: u64) -> Option<usize> {
        let mask = self.mask();
        let tag = tag_of(hash);
        let mut i = hash as usize & mask;
        loop {
            let c = *self.ctrl.get(i)?;
            if c == 0 {
                return None;
            }
            if c == tag && self.member_at_slot(i) == member {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    fn contains(&self, member: &[u8]) -> bool {
        self.find(member, hash_of(member)).is_some()
    }

    /// Puts an arena offset into the first free slot from the hash's home.
    fn place(&mut self, hash: u64, off: usize) {
        let mask = self.mask();
        let mut i = hash as usize & mask;
        while self.ctrl.get(i).is_some_and(|&c| c != 0) {
            i = (i + 1) & mask;
        }
        if let Some(c) = self.ctrl.get_mut(i) {
            *c = tag_of(hash);
            self.offsets.set(i, off);
        }
    }

    /// Appends a member's entry to the arena; returns its offset. The arena
    /// grows by a quarter at a time, not double, to keep memory tight.
    fn push_entry(&mut self, member: &[u8]) -> usize {
        let need = member.len() + 10;
        if self.arena.capacity() - self.arena.len() < need {
            let extra = need.max(self.arena.len() / 4).max(64);
            self.arena.reserve_exact(extra);
        }
        let off = self.arena.len();
        let mut n = member.len();
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                self.arena.push(b);
                break;
            }
            self.arena.push(b | 0x80);
        }
        self.arena.extend_from_slice(member);
        if off > u32::MAX as usize {
            self.offsets.widen();
        }
        off
    }

    fn insert(&mut self, member: &[u8]) -> bool {
        let hash = hash_of(member);
        if self.find(member, hash).is_some() {
            return false;
        }
        if (self.len + 1) * 5 > self.ctrl.len() * 4 {
            self.resize(self.ctrl.len() * 2);
        }
        let off = self.push_entry(member);
        self.place(hash, off);
        self.len += 1;
        true
    }

    fn remove(&mut self, member: &[u8]) -> bool {
        let Some(mut hole) = self.find(member, hash_of(member)) else {
            return false;
        };
        let size = self.entry_at(self.offsets.get(hole)).1;
        self.capture.before_kill(self.offsets.get(hole), size);
        self.garbage += size;
        // Backward-shift deletion: pull later members of the probe run into
        // the hole when their home allows it, so no tombstones are needed.
        let mask = self.mask();
        let mut j = (hole + 1) & mask;
        while let Some(&c) = self.ctrl.get(j).filter(|&&c| c != 0) {
            let home = self.home(self.member_at_slot(j));
            let stays = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !stays {
                if let Some(h) = self.ctrl.get_mut(hole) {
                    *h = c;
                }
                let off = self.offsets.get(j);
                self.offsets.set(hole, off);
                hole = j;
            }
            j = (j + 1) & mask;
        }
        if let Some(h) = self.ctrl.get_mut(hole) {
            *h = 0;
        }
        self.len -= 1;
        if self.len * 8 < self.ctrl.len() && self.ctrl.len() > MIN_SLOTS {
            self.resize(slots_for(self.len));
        }
        if self.garbage >= 64 && self.garbage * 2 > self.arena.len() && !self.capture.pins_arena() {
            self.compact_arena();
        }
        true
    }

    /// Rebuilds the slots with `slots` entries (a power of two).
    fn resize(&mut self, slots: usize) {
        let old_ctrl = std::mem::replace(&mut self.ctrl, vec![0; slots]);
        let wide = self.offsets.is_wide();
        let old_offsets = std::mem::replace(&mut self.offsets, Offsets::zeroed(slots, wide));
        for (i, &c) in old_ctrl.iter().enumerate() {
            if c != 0 {
                let off = old_offsets.get(i);
                let hash = hash_of(self.entry_at(off).0);
                self.place(hash, off);
            }
        }
    }

    /// Copies the live entries into a fresh arena, dropping the holes.
    fn compact_arena(&mut self) {
        let mut arena = Vec::with_capacity(self.arena.len() - self.garbage);
        for i in 0..self.ctrl.len() {
            if self.ctrl.get(i).is_some_and(|&c| c != 0) {
                let off = self.offsets.get(i);
                let size = self.entry_at(off).1;
                let new_off = arena.len();
                arena.extend_from_slice(self.arena.get(off..off + size).unwrap_or(&[]));
                self.offsets.set(i, new_off);
            }
        }
        self.arena = arena;
        self.garbage = 0;
    }

    fn iter(&self) -> TableIter<'_> {
        TableIter {
            table: self,
            slot: 0,
        }
    }

    /// A uniformly random occupied slot and its member.
    fn random_slot<R: Rng + ?Sized>(&self, rng: &mut R) -> Option<(usize, &[u8])> {
        if self.len == 0 {
            return None;
        }
        // The load is at least 1/8 (the table shrinks below that), so this
        // takes a few draws on average.
        loop {
            let i = rng.random_range(0..self.ctrl.len());
            if self.ctrl.get(i).is_some_and(|&c| c != 0) {
                return Some((i, self.member_at_slot(i)));
            }
        }
    }

    fn random<R: Rng + ?Sized>(&self, rng: &mut R) -> Option<&[u8]> {
        self.random_slot(rng).map(|(_, m)| m)
    }

    /// Emits the members whose home bucket is `bucket`: they sit in the
    /// probe run that starts there.
    fn emit_bucket(&self, bucket: usize, emit: &mut impl FnMut(&[u8])) {
        let mask = self.mask();
        let mut i = bucket;
        while self.ctrl.get(i).is_some_and(|&c| c != 0) {
            let m = self.member_at_slot(i);
            if self.home(m) == bucket {
                emit(m);
            }
            i = (i + 1) & mask;
            if i == bucket {
                break;
            }
        }
    }

    fn scan(&self, cursor: u64, count: usize, mut emit: impl FnMut(&[u8])) -> u64 {
        let mask = self.mask() as u64;
        let mut v = cursor;
        let mut emitted = 0usize;
        let mut buckets = count.saturating_mul(10).max(1);
        loop {
            self.emit_bucket((v & mask) as usize, &mut |m| {
                emitted += 1;
                emit(m)
            });
            // Increment the reversed cursor (Redis's dictScan order).
            v |= !mask;
            v = v.reverse_bits().wrapping_add(1).reverse_bits();
            buckets -= 1;
            if v == 0 || emitted >= count || buckets == 0 {
                return v;
            }
        }
    }
}

/// Iterator over a `hashtable`'s members, in slot order.
pub struct TableIter<'a> {
    table: &'a MemberTable,
    slot: usize,
}

impl<'a> Iterator for TableIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let t = self.table;
        while let Some(&c) = t.ctrl.get(self.slot) {
            self.slot += 1;
            if c != 0 {
                return Some(t.member_at_slot(self.slot - 1));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use std::collections::HashSet;

    fn members(s: &SetValue) -> Vec<Vec<u8>> {
        s.iter().map(|m| m.to_vec()).collect()
    }

    fn sorted(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        v.sort();
        v
    }

    #[test]
    fn intset_is_ascending_and_widens() {
        let mut s = SetValue::new();
        for m in ["5", "-3", "70000", "1", "-9223372036854775808", "5"] {
            s.insert(m.as_bytes(), DEFAULT_MAX_INTSET_ENTRIES);
        }
        assert_eq!(s.encoding(), "intset");
        assert_eq!(s.len(), 5);
        let got: Vec<Vec<u8>> = members(&s);
        let want: Vec<Vec<u8>> = ["-9223372036854775808", "-3", "1", "5", "70000"]
            .iter()
            .map(|m| m.as_bytes().to_vec())
            .collect();
        assert_eq!(got, want);
        assert!(s.contains(b"70000"));
        assert!(!s.contains(b"070000"));
        assert!(s.remove(b"-3"));
        assert!(!s.remove(b"-3"));
        assert_eq!(s.len(), 4);
    }

    #[test]
    fn non_canonical_integers_convert() {
        for m in ["01", "+1", "-0", " 1", "1 ", "9223372036854775808", "a"] {
            let mut s = SetValue::from_members([b"1".as_slice()], 512);
            assert_eq!(s.encoding(), "intset");
            assert!(s.insert(m.as_bytes(), 512), "{m}");
            assert_eq!(s.encoding(), "hashtable", "{m}");
            assert!(s.contains(b"1") && s.contains(m.as_bytes()));
        }
    }

    #[test]
    fn conversion_happens_past_the_limit() {
        let mut s = SetValue::new();
        s.insert(b"1", 2);
        s.insert(b"2", 2);
        assert_eq!(s.encoding(), "intset");
        s.insert(b"2", 2);
        assert_eq!(s.encoding(), "intset");
        s.insert(b"3", 2);
        assert_eq!(s.encoding(), "hashtable");
        let mut z = SetValue::new();
        z.insert(b"1", 0);
        assert_eq!(z.encoding(), "hashtable");
        assert_eq!(
            sorted(members(&s)),
            vec![b"1".to_vec(), b"2".to_vec(), b"3".to_vec()]
        );
    }

    #[test]
    fn reencode_returns_to_intset_only_when_it_fits() {
        let mut s = SetValue::from_members(["1", "2", "a"].map(str::as_bytes), 512);
        s.reencode(512);
        assert_eq!(s.encoding(), "hashtable");
        s.remove(b"a");
        s.reencode(1);
        assert_eq!(s.encoding(), "hashtable");
        s.reencode(2);
        assert_eq!(s.encoding(), "intset");
        assert_eq!(members(&s), vec![b"1".to_vec(), b"2".to_vec()]);
    }

    #[test]
    fn table_grows_shrinks_and_compacts() {
        let mut s = SetValue::new();
        let n = 5000;
        for i in 0..n {
            assert!(s.insert(format!("user:{i}").as_bytes(), 512));
        }
        assert_eq!(s.len(), n);
        for i in 0..n {
            assert!(s.contains(format!("user:{i}").as_bytes()));
        }
        for i in (0..n).filter(|i| i % 7 != 0) {
            assert!(s.remove(format!("user:{i}").as_bytes()));
        }
        assert_eq!(s.len(), n.div_ceil(7));
        for i in 0..n {
            assert_eq!(s.contains(format!("user:{i}").as_bytes()), i % 7 == 0);
        }
        let small = s.memory_usage();
        assert!(small < 20 * n, "{small}");
    }

    #[test]
    fn long_members_round_trip() {
        let big = vec![b'x'; 100_000];
        let mut s = SetValue::from_members([b"a".as_slice(), &big], 512);
        assert!(s.contains(&big));
        assert!(s.remove(b"a"));
        assert_eq!(members(&s), vec![big]);
    }

    #[test]
    fn scan_survives_growth_between_steps() {
        let mut s = SetValue::new();
        for i in 0..300 {
            s.insert(format!("m{i}").as_bytes(), 512);
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut steps = 0;
        loop {
            cursor = s.scan(cursor, 10, |m| {
                seen.insert(m.to_vec());
            });
            steps += 1;
            // Grow the table between steps: the original members must all
            // still come back.
            if steps < 20 {
                for j in 0..100 {
                    s.insert(format!("new{steps}-{j}").as_bytes(), 512);
                }
            }
            if cursor == 0 || steps > 100_000 {
                break;
            }
        }
        assert_eq!(cursor, 0);
        for i in 0..300 {
            assert!(seen.contains(format!("m{i}").as_bytes()), "m{i} missed");
        }
    }

    #[test]
    fn random_members_are_uniform_enough() {
        let mut rng = StdRng::seed_from_u64(7);
        let s = SetValue::from_members(["a", "b", "c", "d"].map(str::as_bytes), 512);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..4000 {
            let m = s.random_member(&mut rng).map(|m| m.to_vec());
            *counts.entry(m).or_insert(0) += 1;
        }
        assert_eq!(counts.len(), 4);
        assert!(counts.values().all(|&c| c > 800), "{counts:?}");
    }

    #[test]
    fn distinct_picks_are_uniform_enough() {
        // 4 of 10 members of a hashtable set, 10,000 times: each member
        // should come up about 4,000 times (a prefix of a partly shuffled
        // slice gave the first members ~6,000).
        let mut rng = StdRng::seed_from_u64(11);
        let names: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
        let s = SetValue::from_members(names.iter().map(|n| n.as_bytes()), 512);
        assert_eq!(s.encoding(), "hashtable");
        let mut counts = std::collections::HashMap::new();
        for _ in 0..10_000 {
            let picks = s.random_distinct(4, &mut rng);
            assert_eq!(picks.len(), 4);
            for m in picks {
                *counts.entry(m.to_vec()).or_insert(0) += 1;
            }
        }
        assert_eq!(counts.len(), 10);
        assert!(
            counts.values().all(|&c| (3_500..4_500).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn scored_view_gives_score_one() {
        let s = SetValue::from_members(["3", "1"].map(str::as_bytes), 512);
        let pairs: Vec<(Vec<u8>, f64)> = s.iter_scored().map(|(m, x)| (m.to_vec(), x)).collect();
        assert_eq!(pairs, vec![(b"1".to_vec(), 1.0), (b"3".to_vec(), 1.0)]);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(Vec<u8>),
        Remove(Vec<u8>),
        Reencode,
    }

    fn member() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            (-40i64..40).prop_map(|n| n.to_string().into_bytes()),
            any::<i16>().prop_map(|n| n.to_string().into_bytes()),
            any::<i64>().prop_map(|n| n.to_string().into_bytes()),
            prop_oneof![Just("01"), Just("-0"), Just("+3"), Just("")]
                .prop_map(|s| s.as_bytes().to_vec()),
            "[a-e]{1,3}".prop_map(String::into_bytes),
            proptest::collection::vec(any::<u8>(), 0..200),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => member().prop_map(Op::Insert),
            3 => member().prop_map(Op::Remove),
            1 => Just(Op::Reencode),
        ]
    }

    fn check_against_model(ops: &[Op], max: usize, seed: u64) -> Result<(), TestCaseError> {
        let mut s = SetValue::new();
        let mut model: HashSet<Vec<u8>> = HashSet::new();
        let mut intset = true;
        for o in ops {
            match o {
                Op::Insert(m) => {
                    let fits = parse_i64(m).is_some() && (model.contains(m) || model.len() < max);
                    intset &= fits;
                    prop_assert_eq!(s.insert(m, max), model.insert(m.clone()));
                }
                Op::Remove(m) => prop_assert_eq!(s.remove(m), model.remove(m)),
                Op::Reencode => {
                    s.reencode(max);
                    intset |= model.len() <= max && model.iter().all(|m| parse_i64(m).is_some());
                }
            }
            prop_assert_eq!(s.len(), model.len());
            prop_assert_eq!(s.encoding(), if intset { "intset" } else { "hashtable" });
        }
        for m in &model {
            prop_assert!(s.contains(m));
        }
        let all = members(&s);
        prop_assert_eq!(all.len(), model.len());
        prop_assert_eq!(all.iter().cloned().collect::<HashSet<_>>(), model.clone());
        if s.encoding() == "intset" {
            let ints: Vec<i64> = s.iter().filter_map(|m| m.as_int()).collect();
            prop_assert!(ints.windows(2).all(|w| w[0] < w[1]));
        }
        let mut scanned = HashSet::new();
        let mut cursor = 0;
        loop {
            cursor = s.scan(cursor, 3, |m| {
                scanned.insert(m.to_vec());
            });
            if cursor == 0 {
                break;
            }
        }
        prop_assert_eq!(&scanned, &model);
        let mut rng = StdRng::seed_from_u64(seed);
        if let Some(m) = s.random_member(&mut rng) {
            prop_assert!(model.contains(&m.to_vec()));
        } else {
            prop_assert!(model.is_empty());
        }
        for count in [0, 1, 2, model.len() / 2, model.len() + 1] {
            let picked = s.random_distinct(count, &mut rng);
            prop_assert_eq!(picked.len(), count.min(model.len()));
            let distinct: HashSet<Vec<u8>> = picked.iter().map(|m| m.to_vec()).collect();
            prop_assert_eq!(distinct.len(), picked.len());
            prop_assert!(distinct.is_subset(&model));
        }
        let copy = s.duplicate();
        prop_assert_eq!(sorted(members(&copy)), sorted(all));
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        #[test]
        fn matches_model_with_small_limit(
            ops in proptest::collection::vec(op(), 0..300),
            seed in any::<u64>(),
        ) {
            check_against_model(&ops, 4, seed)?;
        }

        #[test]
        fn matches_model_with_default_limit(
            ops in proptest::collection::vec(op(), 0..600),
            seed in any::<u64>(),
        ) {
            check_against_model(&ops, DEFAULT_MAX_INTSET_ENTRIES, seed)?;
        }
    }
}
