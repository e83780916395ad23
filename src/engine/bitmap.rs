//! Bitmaps: the compressed form of a sparse string (a bitmap written by
//! SETBIT at far-apart offsets), bit counting and searching on plain bytes,
//! and the integer arithmetic of BITFIELD.
//!
//! A [`SparseBitmap`] is a string of `len` bytes, almost all zero, kept in
//! chunks of 65,536 bits (8 KiB of the string): a sorted array of the
//! positions of its ones while a chunk holds at most 4,096 of them, an 8 KiB
//! bitset above that. A missing chunk is all zero. The chunks are found by
//! number in a sorted list while they are few or far apart, then in a table
//! indexed by chunk number (4 bytes a chunk of the string's span, at most
//! 1/2048 of its length), so a GETBIT on a big sparse bitmap costs one table
//! step. Bits are numbered as Redis numbers them: bit 0 is the most
//! significant bit of byte 0.
//!
//! Which form a string takes (plain bytes or sparse) and the switch between
//! the two live in `engine::string`; nothing here knows about commands.

use std::fmt;

use smallvec::SmallVec;

use super::zset::alloc_size;

/// Bits in one chunk.
pub const CHUNK_BITS: u64 = 1 << 16;
/// Bytes of the string one chunk covers.
pub const CHUNK_BYTES: usize = (CHUNK_BITS / 8) as usize;
/// Most ones a chunk keeps as an array (the array is then as big as a bitset).
const ARRAY_MAX: usize = CHUNK_BYTES / 2;
/// A bitset whose ones drop to this many turns back into an array.
const ARRAY_RETURN: usize = ARRAY_MAX / 2;
/// Positions an array chunk holds in its entry before it takes a buffer of
/// its own (so a chunk entry is one 64-byte cache line).
const INLINE_ONES: usize = 24;
/// The positions of an array chunk.
type Positions = SmallVec<[u16; INLINE_ONES]>;

/// Fewest chunks found through a table rather than the sorted list.
const TABLE_MIN: usize = 32;
/// Table slots (4 bytes each) allowed per chunk: a table is built once it
/// costs at most 64 bytes a chunk.
const SLOTS_PER_CHUNK: usize = 16;
/// Writes up to this many bytes go bit by bit; longer ones chunk by chunk.
const SMALL_WRITE: usize = 16;

/// The mask of bit `bit` (0 = most significant) within its byte.
fn mask(bit: u64) -> u8 {
    0x80 >> (bit & 7)
}

fn chunk_of(bit: u64) -> (u64, u16) {
    (bit >> 16, (bit & 0xffff) as u16)
}

/// One 65,536-bit chunk holding at least one set bit.
#[derive(Clone)]
enum Chunk {
    /// Sorted positions of the set bits.
    Array(Positions),
    /// The chunk's 8 KiB of string, and how many ones it holds.
    Bitset {
        bits: Box<[u8; CHUNK_BYTES]>,
        ones: u32,
    },
}

impl Chunk {
    /// The chunk made of `block` (at most [`CHUNK_BYTES`], zero-padded);
    /// `None` when it is all zero.
    fn from_block(block: &[u8]) -> Option<Chunk> {
        let ones = popcount(block);
        if ones == 0 {
            None
        } else if ones as usize <= ARRAY_MAX {
            let mut v = Positions::with_capacity(ones as usize);
            push_positions(block, &mut v);
            Some(Chunk::Array(v))
        } else {
            let mut bits = Box::new([0u8; CHUNK_BYTES]);
            let n = block.len().min(CHUNK_BYTES);
            if let (Some(dst), Some(src)) = (bits.get_mut(..n), block.get(..n)) {
                dst.copy_from_slice(src);
            }
            Some(Chunk::Bitset {
                bits,
                ones: ones as u32,
            })
        }
    }

    fn ones(&self) -> u64 {
        match self {
            Chunk::Array(v) => v.len() as u64,
            Chunk::Bitset { ones, .. } => u64::from(*ones),
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Chunk::Array(v) if v.spilled() => alloc_size(v.capacity() * 2),
            Chunk::Array(_) => 0,
            Chunk::Bitset { .. } => CHUNK_BYTES,
        }
    }

    fn get(&self, p: u16) -> bool {
        match self {
            Chunk::Array(v) => v.binary_search(&p).is_ok(),
            Chunk::Bitset { bits, .. } => bits[usize::from(p >> 3)] & mask(u64::from(p)) != 0,
        }
    }

    /// Sets or clears bit `p`, returning its old value; converts between
    /// array and bitset as the count of ones crosses the limits.
    fn set(&mut self, p: u16, on: bool) -> bool {
        let (old, convert) = match self {
            Chunk::Array(v) => match v.binary_search(&p) {
                Ok(i) => {
                    if !on {
                        v.remove(i);
                    }
                    (true, false)
                }
                Err(i) => {
                    if on {
                        v.insert(i, p);
                    }
                    (false, v.len() > ARRAY_MAX)
                }
            },
            Chunk::Bitset { bits, ones } => {
                let byte = &mut bits[usize::from(p >> 3)];
                let m = mask(u64::from(p));
                let old = *byte & m != 0;
                if old != on {
                    *byte ^= m;
                    if on {
                        *ones += 1;
                    } else {
                        *ones -= 1;
                    }
                }
                (old, *ones as usize <= ARRAY_RETURN)
            }
        };
        if convert {
            *self = match self {
                Chunk::Array(v) => {
                    let mut bits = Box::new([0u8; CHUNK_BYTES]);
                    for &q in v.iter() {
                        bits[usize::from(q >> 3)] |= mask(u64::from(q));
                    }
                    Chunk::Bitset {
                        bits,
                        ones: v.len() as u32,
                    }
                }
                Chunk::Bitset { bits, ones } => {
                    let mut v = Positions::with_capacity(*ones as usize);
                    push_positions(&bits[..], &mut v);
                    Chunk::Array(v)
                }
            };
        }
        old
    }

    /// Ones between positions `lo` and `hi`, both included.
    fn count(&self, lo: u16, hi: u16) -> u64 {
        match self {
            Chunk::Array(v) => {
                let a = v.partition_point(|&x| x < lo);
                let b = v.partition_point(|&x| x <= hi);
                b.saturating_sub(a) as u64
            }
            Chunk::Bitset { bits, .. } => count_ones(&bits[..], u64::from(lo), u64::from(hi)),
        }
    }

    /// The first position in `lo..=hi` holding `bit`.
    fn first(&self, bit: bool, lo: u16, hi: u16) -> Option<u16> {
        let found = match self {
            Chunk::Array(v) => {
                let i = v.partition_point(|&x| x < lo);
                if bit {
                    v.get(i).map(|&x| u64::from(x))
                } else {
                    let mut cand = u64::from(lo);
                    for &x in v.get(i..).unwrap_or(&[]) {
                        if u64::from(x) != cand {
                            break;
                        }
                        cand += 1;
                    }
                    Some(cand)
                }
            }
            Chunk::Bitset { bits, .. } => first_bit(&bits[..], bit, u64::from(lo), u64::from(hi)),
        };
        found
            .filter(|&p| p <= u64::from(hi))
            .and_then(|p| u16::try_from(p).ok())
    }

    /// ORs the chunk's bytes `from..from + out.len()` into `out`.
    fn fill(&self, from: usize, out: &mut [u8]) {
        match self {
            Chunk::Array(v) => {
                let first = (from * 8) as u64;
                let i = v.partition_point(|&x| u64::from(x) < first);
                for &x in v.get(i..).unwrap_or(&[]) {
                    let Some(b) = out.get_mut(usize::from(x >> 3) - from) else {
                        break;
                    };
                    *b |= mask(u64::from(x));
                }
            }
            Chunk::Bitset { bits, .. } => {
                if let Some(src) = bits.get(from..from + out.len()) {
                    for (o, s) in out.iter_mut().zip(src) {
                        *o |= s;
                    }
                }
            }
        }
    }
}

/// Appends the positions of the ones of `block` to `out`, in order.
fn push_positions(block: &[u8], out: &mut Positions) {
    for (i, &b) in block.iter().enumerate() {
        let mut b = b;
        while b != 0 {
            let j = b.leading_zeros() as usize;
            out.push((i * 8 + j) as u16);
            b &= !(0x80 >> j);
        }
    }
}

/// The chunks of a bitmap by chunk number: a sorted list while they are
/// fewer than [`TABLE_MIN`] or spread over more than [`SLOTS_PER_CHUNK`]
/// numbers each, else a table of slots indexed by chunk number.
#[derive(Clone, Default)]
struct ChunkMap {
    /// Chunk number of each entry; in order while `slots` is empty.
    keys: Vec<u64>,
    /// The chunks, beside their numbers in `keys`.
    chunks: Vec<Chunk>,
    /// Empty (sorted list), or by chunk number: its entry's index + 1 (0:
    /// no chunk). Its last slot is never 0.
    slots: Vec<u32>,
}

impl ChunkMap {
    fn len(&self) -> usize {
        self.keys.len()
    }

    /// Index of chunk `k`'s entry.
    fn find(&self, k: u64) -> Option<usize> {
        if self.slots.is_empty() {
            self.keys.binary_search(&k).ok()
        } else {
            let slot = *self.slots.get(usize::try_from(k).ok()?)?;
            (slot as usize).checked_sub(1)
        }
    }

    fn get(&self, k: u64) -> Option<&Chunk> {
        self.chunks.get(self.find(k)?)
    }

    fn get_mut(&mut self, k: u64) -> Option<&mut Chunk> {
        let i = self.find(k)?;
        self.chunks.get_mut(i)
    }

    /// Adds chunk `k`, replacing any chunk of that number.
    fn insert(&mut self, k: u64, c: Chunk) {
        if let Some(old) = self.get_mut(k) {
            *old = c;
            return;
        }
        if self.slots.is_empty() {
            let i = self.keys.partition_point(|&x| x < k);
            self.keys.insert(i, k);
            self.chunks.insert(i, c);
            self.index();
            return;
        }
        self.keys.push(k);
        self.chunks.push(c);
        let span = usize::try_from(k).map_or(usize::MAX, |k| k.saturating_add(1));
        if span > self.slots.len() && span > self.len() * SLOTS_PER_CHUNK {
            // Too far out for the table: back to the sorted list.
            self.sort();
        } else {
            let i = self.keys.len() as u32;
            if let Some(slot) = self.slot_mut(k) {
                *slot = i;
            }
        }
    }

    /// Removes chunk `k`.
    fn remove(&mut self, k: u64) -> Option<Chunk> {
        let i = self.find(k)?;
        if self.slots.is_empty() {
            self.keys.remove(i);
            let c = self.chunks.remove(i);
            // The chunk may have been the one too far out for a table.
            self.index();
            return Some(c);
        }
        if let Some(slot) = self.slot_mut(k) {
            *slot = 0;
        }
        self.keys.swap_remove(i);
        let c = self.chunks.swap_remove(i);
        if let Some(&moved) = self.keys.get(i) {
            if let Some(slot) = self.slot_mut(moved) {
                *slot = i as u32 + 1;
            }
        }
        while self.slots.last() == Some(&0) {
            self.slots.pop();
        }
        if self.len() < TABLE_MIN / 2 || self.slots.len() > 4 * SLOTS_PER_CHUNK * self.len() {
            self.sort();
        }
        Some(c)
    }

    /// Chunk `k`'s slot in the table, which grows to cover it.
    fn slot_mut(&mut self, k: u64) -> Option<&mut u32> {
        let k = usize::try_from(k).ok()?;
        if k >= self.slots.len() {
            self.slots.resize(k.checked_add(1)?, 0);
        }
        self.slots.get_mut(k)
    }

    /// Builds the table once the sorted list is long and dense enough.
    fn index(&mut self) {
        if !self.slots.is_empty() || self.len() < TABLE_MIN {
            return;
        }
        let span = self
            .keys
            .last()
            .and_then(|&k| usize::try_from(k).ok())
            .map_or(usize::MAX, |k| k.saturating_add(1));
        if span > self.len() * SLOTS_PER_CHUNK {
            return;
        }
        let mut slots = vec![0u32; span];
        for (i, &k) in self.keys.iter().enumerate() {
            if let Some(slot) = slots.get_mut(k as usize) {
                *slot = i as u32 + 1;
            }
        }
        self.slots = slots;
    }

    /// Drops the table and puts the entries in order.
    fn sort(&mut self) {
        self.slots = Vec::new();
        let mut pairs: Vec<(u64, Chunk)> = self.keys.drain(..).zip(self.chunks.drain(..)).collect();
        pairs.sort_unstable_by_key(|p| p.0);
        (self.keys, self.chunks) = pairs.into_iter().unzip();
    }

    /// The chunks numbered `lo..=hi`, in order.
    fn range(&self, lo: u64, hi: u64) -> impl Iterator<Item = (u64, &Chunk)> + '_ {
        let (sorted, table) = if self.slots.is_empty() {
            let a = self.keys.partition_point(|&x| x < lo);
            let b = self.keys.partition_point(|&x| x <= hi).max(a);
            let keys = self.keys.get(a..b).unwrap_or(&[]);
            let chunks = self.chunks.get(a..b).unwrap_or(&[]);
            (Some(keys.iter().copied().zip(chunks)), None)
        } else {
            let n = self.slots.len();
            let a = usize::try_from(lo).map_or(n, |a| a.min(n));
            let b = usize::try_from(hi)
                .map_or(n, |b| b.saturating_add(1).min(n))
                .max(a);
            let slots = self.slots.get(a..b).unwrap_or(&[]);
            let found = slots.iter().enumerate().filter_map(move |(j, &slot)| {
                let c = self.chunks.get((slot as usize).checked_sub(1)?)?;
                Some(((a + j) as u64, c))
            });
            (None, Some(found))
        };
        sorted
            .into_iter()
            .flatten()
            .chain(table.into_iter().flatten())
    }

    /// Estimated bytes of the lists and the table (not the chunks' contents).
    fn heap_bytes(&self) -> usize {
        alloc_size(self.keys.capacity() * 8)
            + alloc_size(self.chunks.capacity() * std::mem::size_of::<Chunk>())
            + alloc_size(self.slots.capacity() * 4)
    }
}

/// A mostly-zero string stored compressed: see the module documentation.
#[derive(Default)]
pub struct SparseBitmap {
    /// Chunks holding ones, by chunk number (bit offset / 65,536).
    chunks: ChunkMap,
    /// Length of the string in bytes (the highest byte ever touched + 1).
    len: u64,
    /// Estimated heap bytes of the chunks' contents.
    heap: usize,
}

impl Clone for SparseBitmap {
    /// A copy whose heap estimate is counted from its own chunks: a cloned
    /// chunk's buffer need not have the original's capacity.
    fn clone(&self) -> Self {
        let chunks = self.chunks.clone();
        let heap = chunks.range(0, u64::MAX).map(|(_, c)| c.heap_bytes()).sum();
        SparseBitmap {
            chunks,
            len: self.len,
            heap,
        }
    }
}

impl fmt::Debug for SparseBitmap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SparseBitmap")
            .field("len", &self.len)
            .field("chunks", &self.chunks.len())
            .field("heap", &self.heap)
            .finish()
    }
}

impl SparseBitmap {
    /// An empty string.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same bytes, compressed.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let mut s = SparseBitmap {
            len: bytes.len() as u64,
            ..Self::default()
        };
        for (k, block) in bytes.chunks(CHUNK_BYTES).enumerate() {
            if let Some(c) = Chunk::from_block(block) {
                s.heap += c.heap_bytes();
                s.chunks.insert(k as u64, c);
            }
        }
        s
    }

    /// The string's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len as usize];
        for (k, c) in self.chunks.range(0, u64::MAX) {
            let start = k as usize * CHUNK_BYTES;
            let end = (start + CHUNK_BYTES).min(out.len());
            if let Some(dst) = out.get_mut(start..end) {
                c.fill(0, dst);
            }
        }
        out
    }

    /// Length of the string in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the string is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Estimated bytes used, the structure included.
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<Self>() + self.heap + self.chunks.heap_bytes()
    }

    /// Whether plain bytes would take no more room than this form.
    pub fn denser_than_bytes(&self) -> bool {
        self.memory_usage() as u64 >= self.len
    }

    /// Zero-extends the string to at least `len` bytes.
    pub fn grow(&mut self, len: u64) {
        self.len = self.len.max(len);
    }

    /// The bit at `offset` (zero past the end).
    pub fn get_bit(&self, offset: u64) -> bool {
        let (k, p) = chunk_of(offset);
        self.chunks.get(k).is_some_and(|c| c.get(p))
    }

    /// Sets or clears the bit at `offset`, growing the string to cover it;
    /// returns the old bit.
    pub fn set_bit(&mut self, offset: u64, on: bool) -> bool {
        self.grow(offset / 8 + 1);
        let (k, p) = chunk_of(offset);
        match self.chunks.get_mut(k) {
            Some(c) => {
                let before = c.heap_bytes();
                let old = c.set(p, on);
                let after = c.heap_bytes();
                if c.ones() == 0 {
                    self.chunks.remove(k);
                    self.heap -= before;
                } else {
                    self.heap = self.heap - before + after;
                }
                old
            }
            None => {
                if on {
                    let c = Chunk::Array(smallvec::smallvec![p]);
                    self.heap += c.heap_bytes();
                    self.chunks.insert(k, c);
                }
                false
            }
        }
    }

    /// Ones between bit offsets `first` and `last`, both included.
    pub fn count_ones(&self, first: u64, last: u64) -> u64 {
        if first > last {
            return 0;
        }
        let (fk, fp) = chunk_of(first);
        let (lk, lp) = chunk_of(last);
        let mut n = 0;
        for (k, c) in self.chunks.range(fk, lk) {
            let lo = if k == fk { fp } else { 0 };
            let hi = if k == lk { lp } else { u16::MAX };
            n += if lo == 0 && hi == u16::MAX {
                c.ones()
            } else {
                c.count(lo, hi)
            };
        }
        n
    }

    /// The first offset in `first..=last` whose bit is `bit` (bits past the
    /// end of the string read as zero).
    pub fn first_bit(&self, bit: bool, first: u64, last: u64) -> Option<u64> {
        if first > last {
            return None;
        }
        let (lk, lp) = chunk_of(last);
        if bit {
            let (fk, fp) = chunk_of(first);
            for (k, c) in self.chunks.range(fk, lk) {
                let lo = if k == fk { fp } else { 0 };
                let hi = if k == lk { lp } else { u16::MAX };
                if let Some(p) = c.first(true, lo, hi) {
                    return Some(k << 16 | u64::from(p));
                }
            }
            return None;
        }
        let mut pos = first;
        while pos <= last {
            let (k, p) = chunk_of(pos);
            let Some(c) = self.chunks.get(k) else {
                return Some(pos);
            };
            let hi = if k == lk { lp } else { u16::MAX };
            if let Some(q) = c.first(false, p, hi) {
                return Some(k << 16 | u64::from(q));
            }
            pos = (k + 1) << 16;
        }
        None
    }

    /// Copies the bytes from `start` into `out` (zero past the end).
    pub fn read(&self, start: u64, out: &mut [u8]) {
        out.fill(0);
        if out.is_empty() {
            return;
        }
        let end = start + out.len() as u64; // exclusive
        let first = start / CHUNK_BYTES as u64;
        let last = (end - 1) / CHUNK_BYTES as u64;
        for (k, c) in self.chunks.range(first, last) {
            let cstart = k * CHUNK_BYTES as u64;
            let lo = start.max(cstart);
            let hi = end.min(cstart + CHUNK_BYTES as u64);
            let dst = (lo - start) as usize..(hi - start) as usize;
            if let Some(d) = out.get_mut(dst) {
                c.fill((lo - cstart) as usize, d);
            }
        }
    }

    /// Overwrites the bytes from `start` with `data`, growing the string as
    /// needed. Writing nothing changes nothing.
    pub fn write(&mut self, start: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        self.grow(start + data.len() as u64);
        if data.len() <= SMALL_WRITE {
            for (i, &b) in data.iter().enumerate() {
                let base = (start + i as u64) * 8;
                for j in 0..8 {
                    self.set_bit(base + j, b & mask(j) != 0);
                }
            }
            return;
        }
        let end = start + data.len() as u64;
        let mut block = vec![0u8; CHUNK_BYTES];
        let mut k = start / CHUNK_BYTES as u64;
        while k * (CHUNK_BYTES as u64) < end {
            let cstart = k * CHUNK_BYTES as u64;
            block.fill(0);
            if let Some(c) = self.chunks.get(k) {
                c.fill(0, &mut block);
            }
            let lo = start.max(cstart);
            let hi = end.min(cstart + CHUNK_BYTES as u64);
            let src = data.get((lo - start) as usize..(hi - start) as usize);
            let dst = block.get_mut((lo - cstart) as usize..(hi - cstart) as usize);
            if let (Some(s), Some(d)) = (src, dst) {
                d.copy_from_slice(s);
            }
            self.replace_chunk(k, &block);
            k += 1;
        }
    }

    /// Replaces chunk `k` with `block` (its 8 KiB of string, zero-padded).
    /// The length is not changed.
    pub fn replace_chunk(&mut self, k: u64, block: &[u8]) {
        if let Some(old) = self.chunks.remove(k) {
            self.heap -= old.heap_bytes();
        }
        if let Some(c) = Chunk::from_block(block) {
            self.heap += c.heap_bytes();
            self.chunks.insert(k, c);
        }
    }

    /// Numbers of the chunks holding at least one set bit, in order (chunk
    /// `k` covers bytes `k * CHUNK_BYTES ..`).
    pub fn chunk_numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.chunks.range(0, u64::MAX).map(|(k, _)| k)
    }
}

/// Number of ones in `bytes`.
pub fn popcount(bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    let mut n: u64 = 0;
    for w in &mut words {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        n += u64::from(u64::from_ne_bytes(a).count_ones());
    }
    n + words
        .remainder()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum::<u64>()
}

/// Ones of `bytes` between bit offsets `first` and `last`, both included
/// (offsets past the end count nothing).
pub fn count_ones(bytes: &[u8], first: u64, last: u64) -> u64 {
    let nbits = bytes.len() as u64 * 8;
    if first > last || first >= nbits {
        return 0;
    }
    let last = last.min(nbits - 1);
    let (fb, lb) = ((first / 8) as usize, (last / 8) as usize);
    let Some(span) = bytes.get(fb..=lb) else {
        return 0;
    };
    let head = span.first().map_or(0, |&b| b & !(0xffu8 >> (first & 7)));
    let tail = span
        .last()
        .map_or(0, |&b| b & !(0xffu8 << (7 - (last & 7))));
    popcount(span) - u64::from(head.count_ones()) - u64::from(tail.count_ones())
}

/// The first offset in `first..=last` where `bytes` holds `bit`; offsets
/// past the end of `bytes` are not searched.
pub fn first_bit(bytes: &[u8], bit: bool, first: u64, last: u64) -> Option<u64> {
    let nbits = bytes.len() as u64 * 8;
    if first > last || first >= nbits {
        return None;
    }
    let last = last.min(nbits - 1);
    let (fb, lb) = ((first / 8) as usize, (last / 8) as usize);
    let flip = if bit { 0 } else { 0xff };
    let head = 0xffu8 >> (first & 7);
    let tail = 0xffu8 << (7 - (last & 7));
    let at = |i: usize, v: u8| Some(i as u64 * 8 + u64::from(v.leading_zeros()));
    let first_byte = (bytes.get(fb)? ^ flip) & head & if fb == lb { tail } else { 0xff };
    if first_byte != 0 {
        return at(fb, first_byte);
    }
    if fb == lb {
        return None;
    }
    if let Some(middle) = bytes.get(fb + 1..lb) {
        if let Some(p) = first_one(middle, flip) {
            return Some((fb as u64 + 1) * 8 + p);
        }
    }
    let last_byte = (bytes.get(lb)? ^ flip) & tail;
    if last_byte != 0 {
        return at(lb, last_byte);
    }
    None
}

/// The first bit offset of `bytes ^ flip` that is one, skipping a word at a
/// time.
fn first_one(bytes: &[u8], flip: u8) -> Option<u64> {
    let skip = u64::from_ne_bytes([flip; 8]);
    let mut words = bytes.chunks_exact(8);
    let mut base = 0u64;
    for w in &mut words {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        let v = u64::from_be_bytes(a);
        if v != skip {
            return Some(base + u64::from((v ^ skip).leading_zeros()));
        }
        base += 64;
    }
    for &b in words.remainder() {
        let v = b ^ flip;
        if v != 0 {
            return Some(base + u64::from(v.leading_zeros()));
        }
        base += 8;
    }
    None
}

/// What BITFIELD does when a SET or INCRBY leaves the field's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// Wrap around (modulo 2^bits; two's complement for signed fields).
    Wrap,
    /// Saturate at the field's minimum or maximum.
    Sat,
    /// Refuse: the field is left as it was.
    Fail,
}

/// A BITFIELD field type: `i1`..`i64` or `u1`..`u63`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldType {
    /// Whether the field is signed.
    pub signed: bool,
    /// Width in bits.
    pub bits: u32,
}

impl FieldType {
    /// The field's value read from its raw bits (sign-extended if signed).
    pub fn decode(self, raw: u64) -> i64 {
        if self.signed && self.bits < 64 {
            let shift = 64 - self.bits;
            ((raw << shift) as i64) >> shift
        } else {
            raw as i64
        }
    }

    /// `value + incr` as the field would store it, or `None` when it leaves
    /// the field's range under [`Overflow::Fail`]. SET is `value` with a
    /// zero increment. The range checks are Redis's, including its wrapping
    /// arithmetic, so values far outside the range are judged as Redis
    /// judges them (for unsigned fields `value` is taken as unsigned).
    pub fn add(self, value: i64, incr: i64, overflow: Overflow) -> Option<i64> {
        let bits = self.bits;
        let wrap = || {
            let c = (value as u64).wrapping_add(incr as u64);
            if bits >= 64 {
                c as i64
            } else if self.signed {
                let shift = 64 - bits;
                ((c << shift) as i64) >> shift
            } else {
                (c & ((1u64 << bits) - 1)) as i64
            }
        };
        let limit = |high: bool, max: i64, min: i64| match overflow {
            Overflow::Wrap => Some(wrap()),
            Overflow::Sat => Some(if high { max } else { min }),
            Overflow::Fail => None,
        };
        if self.signed {
            let max: i64 = if bits >= 64 {
                i64::MAX
            } else {
                (1i64 << (bits - 1)) - 1
            };
            let min = -max - 1;
            // Only meaningful once `value` is known to be in range; computed
            // wrapping, as Redis does.
            let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
            let minincr = min.wrapping_sub(value);
            if value > max
                || (bits != 64 && incr > maxincr)
                || (value >= 0 && incr > 0 && incr > maxincr)
            {
                limit(true, max, min)
            } else if value < min
                || (bits != 64 && incr < minincr)
                || (value < 0 && incr < 0 && incr < minincr)
            {
                limit(false, max, min)
            } else {
                Some(value.wrapping_add(incr))
            }
        } else {
            let uvalue = value as u64;
            let max: u64 = (1u64 << bits.min(63)) - 1;
            let maxincr = max.wrapping_sub(uvalue) as i64;
            let minincr = uvalue.wrapping_neg() as i64;
            if uvalue > max || (incr > 0 && incr > maxincr) {
                limit(true, max as i64, 0)
            } else if incr < 0 && incr < minincr {
                limit(false, max as i64, 0)
            } else {
                Some(uvalue.wrapping_add(incr as u64) as i64)
            }
        }
    }
}

/// Reads `bits` (1..=64) bits at bit `shift` (0..8) of a 9-byte window.
pub fn window_get(window: &[u8; 9], shift: u32, bits: u32) -> u64 {
    let mut x: u128 = 0;
    for &b in window {
        x = x << 8 | u128::from(b);
    }
    let low = 72 - shift - bits;
    ((x >> low) & ((1u128 << bits) - 1)) as u64
}

/// Writes the low `bits` bits of `value` at bit `shift` of a 9-byte window.
pub fn window_set(window: &mut [u8; 9], shift: u32, bits: u32, value: u64) {
    let mut x: u128 = 0;
    for &b in window.iter() {
        x = x << 8 | u128::from(b);
    }
    let low = 72 - shift - bits;
    let m = ((1u128 << bits) - 1) << low;
    x = (x & !m) | ((u128::from(value) << low) & m);
    for (i, b) in window.iter_mut().enumerate() {
        *b = (x >> (64 - 8 * i as u32)) as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn model_bit(m: &[u8], off: u64) -> bool {
        m.get((off / 8) as usize)
            .is_some_and(|b| b & mask(off) != 0)
    }

    fn model_set(m: &mut Vec<u8>, off: u64, on: bool) -> bool {
        let i = (off / 8) as usize;
        if m.len() <= i {
            m.resize(i + 1, 0);
        }
        let old = m[i] & mask(off) != 0;
        if on {
            m[i] |= mask(off);
        } else {
            m[i] &= !mask(off);
        }
        old
    }

    #[test]
    fn a_copy_counts_its_own_buffers() {
        // 40 ones in one chunk: an array chunk with a buffer of exactly 40
        // positions; a clone's buffer may be larger (COPY of a bitmap).
        let mut block = vec![0u8; 64];
        for b in block.iter_mut().take(40) {
            *b = 1;
        }
        let s = SparseBitmap::from_bytes(&block);
        let mut copy = s.clone();
        for i in 0..40u64 {
            copy.set_bit(i * 8 + 7, false);
        }
        assert_eq!(copy.count_ones(0, u64::MAX), 0);
        assert_eq!(copy.heap, 0);
        assert_eq!(s.count_ones(0, u64::MAX), 40);
    }

    #[test]
    fn chunk_turns_into_bitset_and_back() {
        let mut s = SparseBitmap::new();
        for i in 0..=ARRAY_MAX as u64 {
            s.set_bit(i * 3, true);
        }
        assert!(matches!(s.chunks.get(0), Some(Chunk::Bitset { .. })));
        assert_eq!(s.count_ones(0, u64::MAX), ARRAY_MAX as u64 + 1);
        for i in 0..=ARRAY_MAX as u64 {
            assert!(s.get_bit(i * 3));
            assert!(!s.get_bit(i * 3 + 1));
        }
        for i in 0..=ARRAY_MAX as u64 / 2 + 1 {
            assert!(s.set_bit(i * 3, false));
        }
        assert!(matches!(s.chunks.get(0), Some(Chunk::Array(_))));
        for i in 0..=ARRAY_MAX as u64 {
            s.set_bit(i * 3, false);
        }
        assert_eq!(s.chunks.len(), 0);
        assert_eq!(s.heap, 0);
        assert_eq!(s.len(), (ARRAY_MAX as u64 * 3) / 8 + 1);
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn chunk_entry_is_a_cache_line() {
        assert_eq!(std::mem::size_of::<Chunk>(), 64);
        let mut s = SparseBitmap::new();
        for p in 0..INLINE_ONES as u64 {
            s.set_bit(p * 3, true);
        }
        assert_eq!(s.heap, 0);
        s.set_bit(1, true);
        assert!(s.heap > 0);
        assert_eq!(s.count_ones(0, u64::MAX), INLINE_ONES as u64 + 1);
    }

    #[test]
    fn chunk_table_comes_and_goes() {
        let mut s = SparseBitmap::new();
        for k in 0..1000 {
            s.set_bit(k * CHUNK_BITS + 5, true);
        }
        assert!(!s.chunks.slots.is_empty());
        let before = s.memory_usage();
        // A chunk far out would make the table too sparse.
        s.set_bit((1 << 32) - 1, true);
        assert!(s.chunks.slots.is_empty());
        assert!(s.memory_usage() < before + 1000);
        assert!(s.set_bit((1 << 32) - 1, false));
        for k in (0..1000).rev() {
            assert!(s.get_bit(k * CHUNK_BITS + 5));
            assert!(!s.get_bit(k * CHUNK_BITS + 4));
        }
        assert_eq!(s.count_ones(0, u64::MAX), 1000);
        assert_eq!(s.first_bit(true, 6, u64::MAX), Some(CHUNK_BITS + 5));
        for k in (0..1000).step_by(2) {
            assert!(s.set_bit(k * CHUNK_BITS + 5, false));
        }
        assert!(!s.chunks.slots.is_empty());
        assert_eq!(s.count_ones(0, u64::MAX), 500);
        let ones: Vec<u64> = s.chunk_numbers().collect();
        assert_eq!(ones, (1..1000).step_by(2).collect::<Vec<u64>>());
        for k in (1..1000).step_by(2) {
            assert!(s.set_bit(k * CHUNK_BITS + 5, false));
        }
        assert!(s.chunks.slots.is_empty());
        assert_eq!(s.chunks.len(), 0);
        assert_eq!(s.heap, 0);
    }

    #[test]
    fn far_offsets_and_bytes() {
        let mut s = SparseBitmap::new();
        let top = (1u64 << 32) - 1;
        assert!(!s.set_bit(top, true));
        assert!(s.set_bit(top, true));
        s.set_bit(7, true);
        assert_eq!(s.len(), 1 << 29);
        assert_eq!(s.count_ones(0, top), 2);
        assert_eq!(s.first_bit(true, 8, top), Some(top));
        assert_eq!(s.first_bit(false, 7, top), Some(8));
        let mut w = [0u8; 3];
        s.read((1 << 29) - 2, &mut w);
        assert_eq!(w, [0, 1, 0]);
        assert!(s.memory_usage() < 1000);
    }

    #[test]
    fn first_zero_skips_full_chunks() {
        let mut s = SparseBitmap::from_bytes(&vec![0xff; CHUNK_BYTES * 3 + 2]);
        assert_eq!(s.first_bit(false, 5, u64::MAX), Some(CHUNK_BITS * 3 + 16));
        s.set_bit(CHUNK_BITS + 9, false);
        assert_eq!(s.first_bit(false, 5, u64::MAX), Some(CHUNK_BITS + 9));
        assert_eq!(s.first_bit(false, 5, CHUNK_BITS + 8), None);
    }

    #[test]
    fn bitfield_windows() {
        let mut w = [0u8; 9];
        window_set(&mut w, 3, 64, u64::MAX);
        assert_eq!(w, [0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xe0]);
        assert_eq!(window_get(&w, 3, 64), u64::MAX);
        assert_eq!(window_get(&w, 0, 4), 1);
        window_set(&mut w, 5, 2, 0);
        assert_eq!(w[0], 0x19);
    }

    #[test]
    fn bitfield_overflow_rules() {
        let u8t = FieldType {
            signed: false,
            bits: 8,
        };
        let i8t = FieldType {
            signed: true,
            bits: 8,
        };
        assert_eq!(u8t.add(250, 10, Overflow::Wrap), Some(4));
        assert_eq!(u8t.add(250, 10, Overflow::Sat), Some(255));
        assert_eq!(u8t.add(250, 10, Overflow::Fail), None);
        assert_eq!(u8t.add(5, -10, Overflow::Sat), Some(0));
        assert_eq!(u8t.add(-1, 0, Overflow::Sat), Some(255));
        assert_eq!(i8t.add(100, 100, Overflow::Wrap), Some(-56));
        assert_eq!(i8t.add(-100, -100, Overflow::Sat), Some(-128));
        assert_eq!(i8t.add(200, 0, Overflow::Wrap), Some(-56));
        // Redis's wrapping check judges the most negative SET value high.
        assert_eq!(i8t.add(i64::MIN, 0, Overflow::Sat), Some(127));
        let i64t = FieldType {
            signed: true,
            bits: 64,
        };
        assert_eq!(i64t.add(i64::MAX, 1, Overflow::Wrap), Some(i64::MIN));
        assert_eq!(i64t.add(i64::MAX, 1, Overflow::Sat), Some(i64::MAX));
        assert_eq!(i64t.add(i64::MIN, -1, Overflow::Fail), None);
        assert_eq!(i8t.decode(0xff), -1);
        assert_eq!(u8t.decode(0xff), 255);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Set(u64, bool),
        Write(u64, Vec<u8>),
        Get(u64),
        Count(u64, u64),
        First(bool, u64, u64),
        Read(u64, usize),
    }

    /// Offsets clustered around a few bases (one chunk's edge, one near
    /// 2^32), so chunks fill and cross the array/bitset switch.
    fn offset() -> impl Strategy<Value = u64> {
        (
            prop::sample::select(vec![0u64, CHUNK_BITS - 40, 5 * CHUNK_BITS, (1 << 32) - 300]),
            0u64..600,
        )
            .prop_map(|(b, d)| b + d)
    }

    /// Offsets in up to 80 chunks, a few positions in each (so chunks come
    /// and go and the chunk table is built and dropped), and near 2^32.
    fn spread_offset() -> impl Strategy<Value = u64> {
        prop_oneof![
            20 => (0u64..80, prop::sample::select(vec![0u64, 1, 9000, CHUNK_BITS - 1]))
                .prop_map(|(k, p)| k * CHUNK_BITS + p),
            1 => (0u64..4).prop_map(|d| (1 << 32) - 4 + d),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        op_over(offset().boxed())
    }

    fn op_over(off: BoxedStrategy<u64>) -> impl Strategy<Value = Op> {
        let o = || off.clone();
        prop_oneof![
            6 => (o(), any::<bool>()).prop_map(|(o, b)| Op::Set(o, b)),
            1 => (o(), prop::collection::vec(any::<u8>(), 0..40))
                .prop_map(|(o, d)| Op::Write(o / 8, d)),
            2 => o().prop_map(Op::Get),
            1 => (o(), o()).prop_map(|(a, b)| Op::Count(a, b)),
            1 => (any::<bool>(), o(), o()).prop_map(|(bit, a, b)| Op::First(bit, a, b)),
            1 => (o(), 0usize..30).prop_map(|(o, n)| Op::Read(o / 8, n)),
        ]
    }

    /// Byte index -> byte: the plain string, without its (up to 512 MiB of)
    /// zeros.
    type Model = std::collections::BTreeMap<u64, u8>;

    fn byte(m: &Model, i: u64) -> u8 {
        m.get(&i).copied().unwrap_or(0)
    }

    fn bit(m: &Model, o: u64) -> bool {
        byte(m, o / 8) & mask(o) != 0
    }

    fn check(ops: Vec<Op>, burst: u64) -> Result<(), TestCaseError> {
        let mut s = SparseBitmap::new();
        let mut model = Model::new();
        let mut len = 0u64;
        // A burst of ones in the first chunk, to start past the switch.
        for i in 0..burst {
            let o = i * 7 % CHUNK_BITS;
            s.set_bit(o, true);
            *model.entry(o / 8).or_default() |= mask(o);
            len = len.max(o / 8 + 1);
        }
        for op in ops {
            match op {
                Op::Set(o, b) => {
                    let old = bit(&model, o);
                    let e = model.entry(o / 8).or_default();
                    if b {
                        *e |= mask(o)
                    } else {
                        *e &= !mask(o)
                    }
                    len = len.max(o / 8 + 1);
                    prop_assert_eq!(s.set_bit(o, b), old);
                }
                Op::Write(start, d) => {
                    for (i, &b) in d.iter().enumerate() {
                        model.insert(start + i as u64, b);
                    }
                    if !d.is_empty() {
                        len = len.max(start + d.len() as u64);
                    }
                    s.write(start, &d);
                }
                Op::Get(o) => prop_assert_eq!(s.get_bit(o), bit(&model, o)),
                Op::Count(a, b) => {
                    let want: u64 = if a > b {
                        0
                    } else {
                        model
                            .range(a / 8..=b / 8)
                            .flat_map(|(&i, _)| i * 8..i * 8 + 8)
                            .filter(|&o| o >= a && o <= b && bit(&model, o))
                            .count() as u64
                    };
                    prop_assert_eq!(s.count_ones(a, b), want);
                }
                Op::First(bf, a, b) => {
                    let want = if bf {
                        model
                            .range(a / 8..=b.max(a) / 8)
                            .flat_map(|(&i, _)| i * 8..i * 8 + 8)
                            .find(|&o| o >= a && o <= b && bit(&model, o))
                    } else {
                        (a..=b).find(|&o| !bit(&model, o))
                    };
                    prop_assert_eq!(s.first_bit(bf, a, b), want);
                }
                Op::Read(start, n) => {
                    let mut out = vec![0xaa; n];
                    s.read(start, &mut out);
                    let want: Vec<u8> = (0..n as u64).map(|i| byte(&model, start + i)).collect();
                    prop_assert_eq!(out, want);
                }
            }
            prop_assert_eq!(s.len(), len);
            let counted: usize = s
                .chunks
                .range(0, u64::MAX)
                .map(|(_, c)| c.heap_bytes())
                .sum();
            prop_assert_eq!(s.heap, counted, "heap estimate drifted");
        }
        let total = model
            .values()
            .map(|b| u64::from(b.count_ones()))
            .sum::<u64>();
        prop_assert_eq!(s.count_ones(0, u64::MAX), total);
        // Round trip through bytes when small enough to materialize.
        if s.len() < 1 << 20 {
            let bytes = s.to_bytes();
            let want: Vec<u8> = (0..s.len()).map(|i| byte(&model, i)).collect();
            prop_assert_eq!(&bytes, &want);
            let back = SparseBitmap::from_bytes(&bytes);
            prop_assert_eq!(back.to_bytes(), want);
            prop_assert_eq!(back.count_ones(0, u64::MAX), total);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn sparse_matches_bytes(ops in prop::collection::vec(op(), 1..150),
                                burst in prop::sample::select(vec![0u64, 4090, 6200])) {
            check(ops, burst)?;
        }

        #[test]
        fn many_chunks_match_bytes(ops in prop::collection::vec(op_over(spread_offset().boxed()), 1..400)) {
            check(ops, 0)?;
        }

        #[test]
        fn dense_helpers_match_model(bytes in prop::collection::vec(any::<u8>(), 0..64),
                                     a in 0u64..600, b in 0u64..600, bf in any::<bool>()) {
            let nbits = bytes.len() as u64 * 8;
            let want = (a..=b).filter(|&o| o < nbits && model_bit(&bytes, o)).count() as u64;
            prop_assert_eq!(count_ones(&bytes, a, b), want);
            let want = (a..=b).find(|&o| o < nbits && model_bit(&bytes, o) == bf);
            prop_assert_eq!(first_bit(&bytes, bf, a, b), want);
        }

        #[test]
        fn set_bits_like_a_vec(offs in prop::collection::vec((0u64..5000, any::<bool>()), 0..300)) {
            let mut s = SparseBitmap::new();
            let mut m = Vec::new();
            for (o, b) in offs {
                prop_assert_eq!(s.set_bit(o, b), model_set(&mut m, o, b));
            }
            prop_assert_eq!(s.to_bytes(), m);
        }
    }
}
