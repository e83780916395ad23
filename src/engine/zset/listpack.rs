//! The compact encoding of small sorted sets (OBJECT ENCODING `listpack`):
//! one contiguous byte buffer of entries in (score, member) order. Every
//! operation is a linear walk, which is what Redis does too and is fast while
//! the set is small (`zset-max-listpack-entries`, 128 by default).
//!
//! Entry layout:
//!
//! ```text
//! [member length: LEB128][member bytes][score tag][score payload][back length]
//! ```
//!
//! The back length is the entry's length without itself, written so that it
//! reads backwards from the entry's end (the last byte holds the low 7 bits,
//! a set high bit means another byte precedes), which gives reverse walks.
//! Scores that are integers below 2^53 in magnitude are stored in 0 to 7
//! bytes, others as the 8 bytes of the f64. Like Redis's listpack, -0 is
//! stored as the integer 0 and so reads back as 0. A `m:12345` member with
//! score 1000 takes 12 bytes.
//!
//! A set of a few members leaves the back lengths out (it is *narrow*): a
//! step backwards then walks forward from the first entry, which over at
//! most [`NARROW_MAX`] entries costs less than the byte an entry would
//! spend. Issue 20's million sets of five `playerN` members with scores
//! 10..50 take 45 bytes each so (a 48-byte jemalloc class) instead of 50
//! (a 64-byte one). A set gets back lengths when it grows past
//! [`NARROW_MAX`] entries and loses them when it shrinks to [`NARROW_AT`]
//! (the gap keeps a set that hovers at the limit from converting on every
//! change).

use super::range::Bounds;

/// "No entry" offset.
pub(super) const NONE: usize = usize::MAX;

/// Most entries a narrow listpack (no back lengths) holds.
pub(super) const NARROW_MAX: usize = 8;
/// A wide listpack that shrinks to this many entries becomes narrow.
pub(super) const NARROW_AT: usize = 4;

/// Tags 0..=SMALL_MAX are the score itself.
const SMALL_MAX: u8 = 0xDF;
/// Tags INT_TAG+w-1 (w = 1..=7) carry a w-byte little-endian signed integer.
const INT_TAG: u8 = 0xE0;
/// Tag of an 8-byte f64 payload.
const FLOAT_TAG: u8 = 0xFF;
/// Integers with a magnitude below this are exact in an f64.
const EXACT_INT: f64 = 9_007_199_254_740_992.0;

/// A sorted set as one byte buffer: one allocation of exactly the bytes in
/// use (every change reallocates it to its new size, as Redis's listpack
/// does), and 24 bytes inline, so a [`ZSet`](super::ZSet) in this encoding
/// lives inside its key's value without a box of its own.
#[derive(Clone, Default)]
pub(super) struct Listpack {
    buf: Box<[u8]>,
    /// Number of entries; below 2^30 since the buffer is (the caller keeps
    /// it under `LISTPACK_MAX_BYTES`) and an entry takes at least 2 bytes.
    len: u32,
    /// Whether the entries carry back lengths: always above
    /// [`NARROW_MAX`] entries, never at or below [`NARROW_AT`].
    wide: bool,
}

impl std::fmt::Debug for Listpack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listpack")
            .field("len", &self.len)
            .field("bytes", &self.buf.len())
            .field("wide", &self.wide)
            .finish()
    }
}

/// One decoded entry and the offset just past it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry<'a> {
    pub member: &'a [u8],
    pub score: f64,
    pub end: usize,
}

#[derive(Clone, Copy)]
enum ScoreEnc {
    Small(u8),
    Int(i64, usize),
    Float(f64),
}

impl ScoreEnc {
    fn of(score: f64) -> ScoreEnc {
        if score.fract() == 0.0 && score.abs() < EXACT_INT {
            let v = score as i64;
            if (0..=SMALL_MAX as i64).contains(&v) {
                return ScoreEnc::Small(v as u8);
            }
            let width = (1..=7usize)
                .find(|&w| {
                    let half = 1i64 << (8 * w - 1);
                    (-half..half).contains(&v)
                })
                .unwrap_or(7);
            ScoreEnc::Int(v, width)
        } else {
            ScoreEnc::Float(score)
        }
    }

    fn len(self) -> usize {
        match self {
            ScoreEnc::Small(_) => 1,
            ScoreEnc::Int(_, w) => 1 + w,
            ScoreEnc::Float(_) => 9,
        }
    }

    fn write(self, out: &mut [u8]) {
        match self {
            ScoreEnc::Small(v) => out[0] = v,
            ScoreEnc::Int(v, w) => {
                out[0] = INT_TAG + (w as u8 - 1);
                out[1..=w].copy_from_slice(&v.to_le_bytes()[..w]);
            }
            ScoreEnc::Float(f) => {
                out[0] = FLOAT_TAG;
                out[1..9].copy_from_slice(&f.to_le_bytes());
            }
        }
    }
}

fn varint_len(mut v: usize) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn write_varint(out: &mut [u8], mut v: usize) -> usize {
    let mut n = 0;
    loop {
        let low = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out[n] = low;
            return n + 1;
        }
        out[n] = low | 0x80;
        n += 1;
    }
}

fn read_varint(buf: &[u8], mut off: usize) -> (usize, usize) {
    let mut v = 0usize;
    let mut shift = 0;
    while let Some(&b) = buf.get(off) {
        off += 1;
        if shift < usize::BITS {
            v |= ((b & 0x7f) as usize) << shift;
        }
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (v, off)
}

/// Writes `v` so that it reads backwards from the end of `out`.
fn write_backlen(out: &mut [u8], v: usize) {
    let n = out.len();
    for (j, slot) in out.iter_mut().rev().enumerate() {
        let group = ((v >> (7 * j)) & 0x7f) as u8;
        *slot = if j + 1 < n { group | 0x80 } else { group };
    }
}

/// Reads a back length ending at `end`: (value, bytes used).
fn read_backlen(buf: &[u8], end: usize) -> (usize, usize) {
    let mut v = 0usize;
    let mut n = 0;
    let mut i = end;
    while i > 0 {
        i -= 1;
        let b = buf.get(i).copied().unwrap_or(0);
        if 7 * n < usize::BITS as usize {
            v |= ((b & 0x7f) as usize) << (7 * n);
        }
        n += 1;
        if b & 0x80 == 0 {
            break;
        }
    }
    (v, n)
}

fn read_score(buf: &[u8], off: usize) -> (f64, usize) {
    let tag = buf.get(off).copied().unwrap_or(0);
    match tag {
        0..=SMALL_MAX => (tag as f64, off + 1),
        FLOAT_TAG => {
            let mut b = [0u8; 8];
            if let Some(src) = buf.get(off + 1..off + 9) {
                b.copy_from_slice(src);
            }
            (f64::from_le_bytes(b), off + 9)
        }
        _ => {
            let w = ((tag - INT_TAG) as usize + 1).min(8);
            let mut b = [0u8; 8];
            if let Some(src) = buf.get(off + 1..off + 1 + w) {
                b[..w].copy_from_slice(src);
            }
            let shift = 64 - 8 * w as u32;
            let v = (i64::from_le_bytes(b) << shift) >> shift;
            (v as f64, off + 1 + w)
        }
    }
}

/// Bytes an entry takes: (without back length, total with one when `wide`).
fn entry_len(member_len: usize, enc: ScoreEnc, wide: bool) -> (usize, usize) {
    let body = varint_len(member_len) + member_len + enc.len();
    (body, if wide { body + varint_len(body) } else { body })
}

/// The end of the entry at `off` without its back length (its member and
/// score skipped, not decoded).
#[inline]
fn body_end(buf: &[u8], off: usize) -> usize {
    let (mlen, p) = read_varint(buf, off);
    let tag_at = p.saturating_add(mlen);
    let width = match buf.get(tag_at).copied().unwrap_or(0) {
        0..=SMALL_MAX => 0,
        FLOAT_TAG => 8,
        tag => (tag - INT_TAG) as usize + 1,
    };
    tag_at.saturating_add(1 + width)
}

impl Listpack {
    /// An empty listpack.
    pub fn new() -> Listpack {
        Listpack::default()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Bytes in use (and allocated: the buffer is exact).
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Offset of the last entry, or [`NONE`].
    pub fn last(&self) -> usize {
        self.prev(self.buf.len())
    }

    /// The entry at `off` (an entry start), or `None` at the end.
    #[inline]
    pub fn entry(&self, off: usize) -> Option<Entry<'_>> {
        if off >= self.buf.len() {
            return None;
        }
        let (mlen, p) = read_varint(&self.buf, off);
        let member = self.buf.get(p..p.checked_add(mlen)?)?;
        let (score, q) = read_score(&self.buf, p + mlen);
        let end = if self.wide {
            q + varint_len(q - off)
        } else {
            q
        };
        Some(Entry { member, score, end })
    }

    /// Offset of the entry after the one at `off`, or [`NONE`].
    #[inline]
    pub fn next(&self, off: usize) -> usize {
        match self.entry(off) {
            Some(e) if e.end < self.buf.len() => e.end,
            _ => NONE,
        }
    }

    /// Offset of the entry before the one starting at `off` (or before the
    /// end when `off` is the buffer length), or [`NONE`].
    #[inline]
    pub fn prev(&self, off: usize) -> usize {
        if off == 0 || off > self.buf.len() {
            return NONE;
        }
        if !self.wide {
            // Narrow: the entry whose end is `off`, walking from the first.
            let mut at = 0;
            loop {
                let end = body_end(&self.buf, at);
                if end >= off {
                    return if end == off { at } else { NONE };
                }
                at = end;
            }
        }
        let (body, n) = read_backlen(&self.buf, off);
        off.checked_sub(n + body).unwrap_or(NONE)
    }

    /// Offset of the entry at 0-based `index`, or [`NONE`].
    pub fn offset_of(&self, index: usize) -> usize {
        let len = self.len();
        if index >= len {
            return NONE;
        }
        if index <= len / 2 || !self.wide {
            let mut off = 0;
            for _ in 0..index {
                off = self.next(off);
            }
            off
        } else {
            let mut off = self.buf.len();
            for _ in index..len {
                off = self.prev(off);
            }
            off
        }
    }

    /// Iterates the entries from the first: (offset, entry).
    pub fn entries(&self) -> impl Iterator<Item = (usize, Entry<'_>)> + '_ {
        let mut off = 0;
        std::iter::from_fn(move || {
            let e = self.entry(off)?;
            let at = off;
            off = e.end;
            Some((at, e))
        })
    }

    /// Finds `member`: (offset, index, score).
    pub fn find(&self, member: &[u8]) -> Option<(usize, usize, f64)> {
        self.entries()
            .enumerate()
            .find(|(_, (_, e))| e.member == member)
            .map(|(i, (off, e))| (off, i, e.score))
    }

    /// Inserts a member that is not in the set, at its sorted place.
    pub fn insert(&mut self, member: &[u8], score: f64) {
        self.widen_for_one_more();
        let at = self
            .entries()
            .find(|(_, e)| e.score > score || (e.score == score && e.member > member))
            .map_or(self.buf.len(), |(off, _)| off);
        self.insert_at(at, member, score);
    }

    /// Appends an entry that sorts after every other one.
    pub fn push_back(&mut self, member: &[u8], score: f64) {
        self.widen_for_one_more();
        self.insert_at(self.buf.len(), member, score);
    }

    /// Gives a narrow listpack back lengths when one more entry would take
    /// it past [`NARROW_MAX`] (before an insert picks its offset).
    fn widen_for_one_more(&mut self) {
        if !self.wide && self.len() >= NARROW_MAX {
            self.relayout(true);
        }
    }

    /// Writes every entry again with (`wide`) or without back lengths, in
    /// one allocation of the new exact size.
    fn relayout(&mut self, wide: bool) {
        if wide == self.wide {
            return;
        }
        let mut bodies: Vec<(usize, usize)> = Vec::with_capacity(self.len());
        let mut at = 0;
        while at < self.buf.len() {
            let body = body_end(&self.buf, at).min(self.buf.len());
            bodies.push((at, body));
            at = if self.wide {
                body + varint_len(body - at)
            } else {
                body
            };
        }
        let size: usize = bodies
            .iter()
            .map(|&(a, b)| {
                if wide {
                    b - a + varint_len(b - a)
                } else {
                    b - a
                }
            })
            .sum();
        let mut buf = Vec::with_capacity(size);
        for (a, b) in bodies {
            buf.extend_from_slice(&self.buf[a..b]);
            if wide {
                let n = buf.len();
                buf.resize(n + varint_len(b - a), 0);
                write_backlen(&mut buf[n..], b - a);
            }
        }
        self.buf = buf.into_boxed_slice();
        self.wide = wide;
    }

    fn insert_at(&mut self, at: usize, member: &[u8], score: f64) {
        let enc = ScoreEnc::of(score);
        let (body, total) = entry_len(member.len(), enc, self.wide);
        let old = self.buf.len();
        let at = at.min(old);
        // One allocation of the new size: the bytes before `at`, the new
        // entry, the bytes after (`Vec::into_boxed_slice` keeps an exact
        // capacity as it is).
        let mut buf = Vec::with_capacity(old + total);
        buf.extend_from_slice(&self.buf[..at]);
        buf.resize(at + total, 0);
        buf.extend_from_slice(&self.buf[at..]);
        let out = &mut buf[at..at + total];
        let p = write_varint(out, member.len());
        out[p..p + member.len()].copy_from_slice(member);
        let q = p + member.len();
        enc.write(&mut out[q..]);
        if self.wide {
            write_backlen(&mut out[body..], body);
        }
        self.buf = buf.into_boxed_slice();
        self.len += 1;
    }

    /// Removes the `count` entries in bytes `start..end`.
    pub fn remove_bytes(&mut self, start: usize, end: usize, count: usize) {
        let end = end.min(self.buf.len());
        if start >= end {
            return;
        }
        let mut buf = Vec::with_capacity(self.buf.len() - (end - start));
        buf.extend_from_slice(&self.buf[..start]);
        buf.extend_from_slice(&self.buf[end..]);
        self.buf = buf.into_boxed_slice();
        self.len -= u32::try_from(count).unwrap_or(u32::MAX).min(self.len);
        if self.wide && self.len() <= NARROW_AT {
            self.relayout(false);
        }
    }

    /// Removes the entry starting at `off`.
    pub fn remove_at(&mut self, off: usize) {
        if let Some(e) = self.entry(off) {
            self.remove_bytes(off, e.end, 1);
        }
    }

    /// Removes entries with 0-based indexes `start..=end`; returns how many.
    pub fn remove_range_by_rank(&mut self, start: usize, end: usize) -> usize {
        let len = self.len();
        if start > end || start >= len {
            return 0;
        }
        let end = end.min(len - 1);
        let from = self.offset_of(start);
        let mut to = from;
        for _ in start..=end {
            to = self.entry(to).map_or(self.buf.len(), |e| e.end);
        }
        let n = end - start + 1;
        self.remove_bytes(from, to, n);
        n
    }

    /// Redis's `zzlIsInRange` / `zzlIsInLexRange`: the range is not empty,
    /// the last entry is not below it and the first not above it.
    fn may_hold<B: Bounds>(&self, range: &B) -> bool {
        if range.is_empty() {
            return false;
        }
        match (self.entry(self.last()), self.entry(0)) {
            (Some(last), Some(first)) => {
                range.gte_min(last.score, last.member) && range.lte_max(first.score, first.member)
            }
            _ => false,
        }
    }

    /// The first entry in `range` walking from the start: (offset, index).
    pub fn first_in_range<B: Bounds>(&self, range: &B) -> Option<(usize, usize)> {
        if !self.may_hold(range) {
            return None;
        }
        for (i, (off, e)) in self.entries().enumerate() {
            if range.gte_min(e.score, e.member) {
                return range.lte_max(e.score, e.member).then_some((off, i));
            }
        }
        None
    }

    /// The last entry in `range` walking from the end: (offset, index).
    pub fn last_in_range<B: Bounds>(&self, range: &B) -> Option<(usize, usize)> {
        if !self.may_hold(range) {
            return None;
        }
        let mut off = self.last();
        let mut i = self.len();
        while let Some(e) = self.entry(off) {
            i -= 1;
            if range.lte_max(e.score, e.member) {
                return range.gte_min(e.score, e.member).then_some((off, i));
            }
            off = self.prev(off);
        }
        None
    }

    /// Entries from the first in `range` while they stay below its maximum.
    fn run_in_range<B: Bounds>(&self, range: &B) -> Option<(usize, usize, usize)> {
        let (start, _) = self.first_in_range(range)?;
        let mut end = start;
        let mut n = 0;
        while let Some(e) = self.entry(end) {
            if !range.lte_max(e.score, e.member) {
                break;
            }
            n += 1;
            end = e.end;
        }
        Some((start, end, n))
    }

    /// Number of entries in `range` (Redis's ZCOUNT / ZLEXCOUNT walk).
    pub fn count_in_range<B: Bounds>(&self, range: &B) -> usize {
        self.run_in_range(range).map_or(0, |(_, _, n)| n)
    }

    /// Removes the entries in `range`; returns how many.
    pub fn remove_range<B: Bounds>(&mut self, range: &B) -> usize {
        match self.run_in_range(range) {
            Some((start, end, n)) => {
                self.remove_bytes(start, end, n);
                n
            }
            None => 0,
        }
    }

    /// Calls `f` on up to `count` lowest entries, lowest first, and removes them.
    pub fn pop_min(&mut self, count: usize, mut f: impl FnMut(&[u8], f64)) -> usize {
        let mut end = 0;
        let mut n = 0;
        while n < count {
            let Some(e) = self.entry(end) else { break };
            f(e.member, e.score);
            end = e.end;
            n += 1;
        }
        self.remove_bytes(0, end, n);
        n
    }

    /// Calls `f` on up to `count` highest entries, highest first, and removes them.
    pub fn pop_max(&mut self, count: usize, mut f: impl FnMut(&[u8], f64)) -> usize {
        let mut start = self.buf.len();
        let mut n = 0;
        while n < count {
            let off = self.prev(start);
            let Some(e) = self.entry(off) else { break };
            f(e.member, e.score);
            start = off;
            n += 1;
        }
        self.remove_bytes(start, self.buf.len(), n);
        n
    }

    /// Whether the entries carry back lengths (tests only).
    #[cfg(test)]
    pub fn is_wide(&self) -> bool {
        self.wide
    }

    /// Checks order, count, the back-length rule and the backward walk
    /// (tests only).
    #[cfg(test)]
    pub fn check(&self) {
        assert!(self.len() <= NARROW_MAX || self.wide);
        assert!(self.len() > NARROW_AT || !self.wide);
        let fwd: Vec<(usize, Entry<'_>)> = self.entries().collect();
        assert_eq!(fwd.len(), self.len());
        assert_eq!(fwd.last().map_or(0, |(_, e)| e.end), self.buf.len());
        for w in fwd.windows(2) {
            let (a, b) = (w[0].1, w[1].1);
            assert!(a.score < b.score || (a.score == b.score && a.member < b.member));
        }
        let mut off = self.last();
        for (at, _) in fwd.iter().rev() {
            assert_eq!(off, *at);
            off = self.prev(off);
        }
        assert_eq!(off, NONE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(lp: &Listpack) -> Vec<(Vec<u8>, f64)> {
        lp.entries()
            .map(|(_, e)| (e.member.to_vec(), e.score))
            .collect()
    }

    #[test]
    fn scores_round_trip_in_every_width() {
        let scores = [
            0.0,
            1.0,
            223.0,
            224.0,
            -1.0,
            -128.0,
            -129.0,
            32767.0,
            -32768.0,
            8_388_607.0,
            1e9,
            -1e12,
            2f64.powi(47),
            2f64.powi(53) - 1.0,
            -(2f64.powi(53) - 1.0),
            2f64.powi(53),
            1e300,
            0.1,
            -2.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            5e-324,
        ];
        let mut lp = Listpack::new();
        for (i, &s) in scores.iter().enumerate() {
            lp.insert(format!("m{i}").as_bytes(), s);
        }
        for (i, &s) in scores.iter().enumerate() {
            let (_, _, got) = lp.find(format!("m{i}").as_bytes()).unwrap();
            assert_eq!(got.to_bits(), s.to_bits(), "{s}");
        }
        // Sorted, and walkable backwards to the same entries.
        let fwd = members(&lp);
        assert!(fwd.windows(2).all(|w| w[0].1 <= w[1].1));
        let mut back = vec![];
        let mut off = lp.last();
        while let Some(e) = lp.entry(off) {
            back.push((e.member.to_vec(), e.score));
            off = lp.prev(off);
        }
        back.reverse();
        assert_eq!(back, fwd);
    }

    #[test]
    fn negative_zero_is_stored_as_zero() {
        let mut lp = Listpack::new();
        lp.insert(b"a", -0.0);
        let (_, _, s) = lp.find(b"a").unwrap();
        assert!(s == 0.0 && s.is_sign_positive());
    }

    #[test]
    fn long_members_use_multi_byte_lengths() {
        let mut lp = Listpack::new();
        let long = vec![b'x'; 300];
        let longer = vec![b'y'; 20_000];
        lp.insert(&long, 2.0);
        lp.insert(b"a", 1.0);
        lp.insert(&longer, 3.0);
        assert_eq!(lp.len(), 3);
        assert_eq!(lp.find(&longer).map(|f| f.1), Some(2));
        assert_eq!(lp.entry(lp.last()).unwrap().member, &longer[..]);
        assert_eq!(lp.entry(lp.prev(lp.last())).unwrap().member, &long[..]);
        assert_eq!(lp.offset_of(2), lp.last());
        lp.remove_at(lp.offset_of(1));
        assert_eq!(members(&lp), vec![(b"a".to_vec(), 1.0), (longer, 3.0)]);
    }

    #[test]
    fn compact_size_of_a_typical_entry() {
        let mut lp = Listpack::new();
        lp.insert(b"m:12345", 1000.0);
        // Narrow: no back length.
        assert_eq!(lp.buf.len(), 11);
        for i in 0..NARROW_MAX as u32 {
            lp.insert(format!("m:{i:05}").as_bytes(), 2000.0 + i as f64);
        }
        // Wide: 12 bytes an entry.
        assert!(lp.is_wide());
        assert_eq!(lp.buf.len(), 12 * (NARROW_MAX + 1));
    }

    /// Issue 20's small set: five `playerN` members, scores 10..50, in 45
    /// bytes (a 48-byte jemalloc class).
    #[test]
    fn five_players_take_45_bytes() {
        let mut lp = Listpack::new();
        for i in 1..=5u8 {
            lp.insert(format!("player{i}").as_bytes(), 10.0 * i as f64);
        }
        assert_eq!(lp.bytes(), 45);
        assert!(!lp.is_wide());
        lp.check();
        let back: Vec<&[u8]> = std::iter::successors(Some(lp.last()), |&o| Some(lp.prev(o)))
            .take_while(|&o| o != NONE)
            .map(|o| lp.entry(o).unwrap().member)
            .collect();
        assert_eq!(
            back,
            [
                &b"player5"[..],
                b"player4",
                b"player3",
                b"player2",
                b"player1"
            ]
        );
        assert_eq!(lp.offset_of(4), lp.last());
    }

    /// Back lengths come past NARROW_MAX entries and go at NARROW_AT, and
    /// the entries read the same on both sides of each change.
    #[test]
    fn back_lengths_follow_the_entry_count() {
        let mut lp = Listpack::new();
        let mut want = vec![];
        for i in 0..=NARROW_MAX as i32 {
            assert!(!lp.is_wide());
            let m = vec![b'a'; i as usize * 20];
            lp.insert(&m, -i as f64 * 1000.5);
            want.insert(0, (m, -i as f64 * 1000.5));
            lp.check();
        }
        assert!(lp.is_wide());
        assert_eq!(members(&lp), want);
        let mut n = lp.len();
        while n > NARROW_AT {
            assert!(lp.is_wide());
            lp.pop_max(1, |_, _| {});
            want.pop();
            n -= 1;
            lp.check();
        }
        assert!(!lp.is_wide());
        assert_eq!(members(&lp), want);
        // Growing again stays narrow up to NARROW_MAX.
        for i in 0..(NARROW_MAX - NARROW_AT) as i32 {
            lp.insert(format!("z{i:02}").as_bytes(), 1e9);
            assert!(!lp.is_wide());
        }
        lp.push_back(b"zz", 2e9);
        assert!(lp.is_wide());
        lp.check();
    }

    mod model {
        use super::*;
        use proptest::prelude::*;

        /// Scores of every encoding width, and floats, infinities, -0.
        fn score() -> impl Strategy<Value = f64> {
            prop_oneof![
                (0i64..300).prop_map(|v| v as f64),
                any::<i32>().prop_map(|v| v as f64),
                (-(1i64 << 53) + 1..1i64 << 53).prop_map(|v| v as f64),
                any::<f64>().prop_filter("not NaN", |f| !f.is_nan()),
                Just(-0.0),
                Just(f64::INFINITY),
                Just(f64::NEG_INFINITY),
            ]
        }

        /// Short members, and a few long enough for two-byte lengths.
        fn member() -> impl Strategy<Value = Vec<u8>> {
            prop_oneof![
                6 => prop::collection::vec(any::<u8>(), 0..4),
                1 => prop::collection::vec(b'a'..b'c', 120..300),
            ]
        }

        #[derive(Debug, Clone)]
        enum Op {
            Insert(Vec<u8>, f64),
            Remove(usize),
            RemoveRank(usize, usize),
            PopMin(usize),
            PopMax(usize),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                6 => (member(), score()).prop_map(|(m, s)| Op::Insert(m, s)),
                2 => any::<usize>().prop_map(Op::Remove),
                1 => (0usize..40, 0usize..40).prop_map(|(a, b)| Op::RemoveRank(a, b)),
                1 => (0usize..4).prop_map(Op::PopMin),
                1 => (0usize..4).prop_map(Op::PopMax),
            ]
        }

        /// What the listpack stores for `s`: -0 as the integer 0.
        fn stored(s: f64) -> f64 {
            if s == 0.0 {
                0.0
            } else {
                s
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(300))]

            /// The listpack against a plain sorted Vec: contents in both
            /// directions, lookups, ranks, exact buffer size after each step.
            #[test]
            fn listpack_matches_a_sorted_vec(ops in prop::collection::vec(op(), 1..120)) {
                let mut lp = Listpack::new();
                let mut model: Vec<(Vec<u8>, f64)> = vec![];
                for op in ops {
                    match op {
                        Op::Insert(m, s) => {
                            if model.iter().any(|(x, _)| *x == m) {
                                continue;
                            }
                            lp.insert(&m, s);
                            model.push((m, stored(s)));
                            model.sort_by(|a, b| {
                                a.1.partial_cmp(&b.1).unwrap().then_with(|| a.0.cmp(&b.0))
                            });
                        }
                        Op::Remove(i) if !model.is_empty() => {
                            let (m, _) = model.remove(i % model.len());
                            let (off, _, _) = lp.find(&m).unwrap();
                            lp.remove_at(off);
                        }
                        Op::Remove(_) => {}
                        Op::RemoveRank(a, b) => {
                            let want = if a > b || a >= model.len() {
                                0
                            } else {
                                let end = b.min(model.len() - 1);
                                model.drain(a..=end).count()
                            };
                            prop_assert_eq!(lp.remove_range_by_rank(a, b), want);
                        }
                        Op::PopMin(n) => {
                            let mut got = vec![];
                            lp.pop_min(n, |m, s| got.push((m.to_vec(), s)));
                            let k = n.min(model.len());
                            let want: Vec<_> = model.drain(..k).collect();
                            prop_assert_eq!(got, want);
                        }
                        Op::PopMax(n) => {
                            let mut got = vec![];
                            lp.pop_max(n, |m, s| got.push((m.to_vec(), s)));
                            let k = n.min(model.len());
                            let mut want: Vec<_> = model.drain(model.len() - k..).collect();
                            want.reverse();
                            prop_assert_eq!(got, want);
                        }
                    }
                    lp.check();
                    prop_assert_eq!(lp.len(), model.len());
                    let got: Vec<(Vec<u8>, u64)> =
                        members(&lp).into_iter().map(|(m, s)| (m, s.to_bits())).collect();
                    let want: Vec<(Vec<u8>, u64)> =
                        model.iter().map(|(m, s)| (m.clone(), s.to_bits())).collect();
                    prop_assert_eq!(got, want);
                    let size: usize = model
                        .iter()
                        .map(|(m, s)| entry_len(m.len(), ScoreEnc::of(*s), lp.is_wide()).1)
                        .sum();
                    prop_assert_eq!(lp.bytes(), size);
                    for (i, (m, s)) in model.iter().enumerate() {
                        let (off, at, got) = lp.find(m).unwrap();
                        prop_assert_eq!((at, got.to_bits()), (i, s.to_bits()));
                        prop_assert_eq!(lp.offset_of(i), off);
                    }
                }
            }
        }
    }

    #[test]
    fn pops_and_rank_removal() {
        let mut lp = Listpack::new();
        for i in 0..10u8 {
            lp.insert(&[b'a' + i], i as f64);
        }
        let mut got = vec![];
        assert_eq!(lp.pop_max(2, |m, s| got.push((m.to_vec(), s))), 2);
        assert_eq!(got, vec![(b"j".to_vec(), 9.0), (b"i".to_vec(), 8.0)]);
        assert_eq!(lp.pop_min(1, |_, _| {}), 1);
        assert_eq!(lp.remove_range_by_rank(1, 2), 2);
        let left: Vec<u8> = members(&lp).iter().map(|(m, _)| m[0]).collect();
        assert_eq!(left, b"befgh");
        assert_eq!(lp.pop_min(100, |_, _| {}), 5);
        assert_eq!(lp.len(), 0);
        assert!(lp.entry(0).is_none());
        assert_eq!(lp.last(), NONE);
    }
}
