//! String values, with the encodings OBJECT ENCODING reports (`int`,
//! `embstr`, `raw`). A string is kept either as its bytes (so GET never
//! formats) or, when it is a sparse bitmap, compressed as a
//! [`SparseBitmap`]; the two forms read the same through every method here,
//! and the switch between them happens in one place ([`StrValue::settle`]
//! and [`StrValue::make_room`]). The encoding is a tag that follows Redis's
//! rules; a compressed string is `raw`, as SETBIT makes it in Redis.

use std::borrow::Cow;

use super::bitmap::{self, SparseBitmap};

/// Longest string Redis stores as `embstr`.
pub const EMBSTR_MAX: usize = 44;

/// A write that would zero-fill at least this many bytes (and more than the
/// string already holds) switches a plain string to the compressed form.
const SPARSE_MIN_GAP: u64 = 4096;

/// Most room a growing string reserves beyond its new length (Redis's
/// `SDS_MAX_PREALLOC`).
const MAX_PREALLOC: usize = 1024 * 1024;

/// How Redis would encode the string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrEncoding {
    /// A canonical integer of at most 20 characters.
    Int,
    /// A short string stored with its object header.
    Embstr,
    /// A string buffer (long, or changed in place).
    Raw,
}

/// Longest string kept inside the value itself, with no allocation of its
/// own (as Redis's `embstr` keeps a short string in its object header).
/// The inline bytes fit beside the `Vec`'s niche, so a value stays 32
/// bytes: a key holding `SET k v` is one 64-byte table node and nothing
/// else.
pub const INLINE_MAX: usize = 15;

/// Where a string's bytes are.
#[derive(Debug, Clone)]
enum Repr {
    /// A short string, inside the value.
    Inline { len: u8, bytes: [u8; INLINE_MAX] },
    /// The bytes themselves.
    Bytes(Vec<u8>),
    /// A mostly-zero string, compressed.
    Sparse(Box<SparseBitmap>),
}

/// A string's bytes for reading, whatever the form of plain ones.
enum View<'a> {
    Plain(&'a [u8]),
    Sparse(&'a SparseBitmap),
}

impl Repr {
    /// Plain bytes: inside the value when short.
    fn plain(b: &[u8]) -> Repr {
        match b.len() {
            len @ 0..=INLINE_MAX => {
                let mut bytes = [0; INLINE_MAX];
                bytes[..len].copy_from_slice(b);
                Repr::Inline {
                    len: len as u8,
                    bytes,
                }
            }
            _ => Repr::Bytes(b.to_vec()),
        }
    }

    /// Plain bytes from a buffer: kept unless short.
    fn from_vec(v: Vec<u8>) -> Repr {
        if v.len() <= INLINE_MAX {
            Repr::plain(&v)
        } else {
            Repr::Bytes(v)
        }
    }

    fn view(&self) -> View<'_> {
        match self {
            Repr::Inline { len, bytes } => View::Plain(bytes.get(..*len as usize).unwrap_or(&[])),
            Repr::Bytes(b) => View::Plain(b),
            Repr::Sparse(s) => View::Sparse(s),
        }
    }
}

/// A string value.
#[derive(Debug, Clone)]
pub struct StrValue {
    repr: Repr,
    enc: StrEncoding,
}

impl PartialEq for StrValue {
    fn eq(&self, other: &Self) -> bool {
        self.enc == other.enc && self.len() == other.len() && self.as_bytes() == other.as_bytes()
    }
}

impl Eq for StrValue {}

impl StrValue {
    /// A value as SET stores it: `int` when the bytes are a canonical
    /// integer of at most 20 characters, else `embstr`/`raw` by length.
    pub fn from_bytes(b: &[u8]) -> Self {
        StrValue {
            repr: Repr::plain(b),
            enc: encoding_for(b),
        }
    }

    /// The value of an integer (INCR and friends).
    pub fn from_i64(n: i64) -> Self {
        StrValue {
            repr: Repr::plain(itoa::Buffer::new().format(n).as_bytes()),
            enc: StrEncoding::Int,
        }
    }

    /// Replaces the value by the integer `n` in place (INCR), reusing the
    /// buffer.
    pub fn set_i64(&mut self, n: i64) {
        let mut buf = itoa::Buffer::new();
        let text = buf.format(n).as_bytes();
        match &mut self.repr {
            Repr::Bytes(v) if text.len() > INLINE_MAX => {
                v.clear();
                v.extend_from_slice(text);
            }
            _ => self.repr = Repr::plain(text),
        }
        self.enc = StrEncoding::Int;
    }

    /// A value built by changing bytes in place (APPEND, SETRANGE, SETBIT,
    /// BITOP): always `raw`, as in Redis.
    pub fn raw(data: Vec<u8>) -> Self {
        StrValue {
            repr: Repr::Bytes(data),
            enc: StrEncoding::Raw,
        }
    }

    /// A value as Redis's `createStringObject` makes it from computed bytes
    /// (INCRBYFLOAT results): `embstr` or `raw` by length, never `int`.
    pub fn from_computed(b: &[u8]) -> Self {
        let mut v = StrValue::from_bytes(b);
        if v.enc == StrEncoding::Int {
            v.enc = StrEncoding::Embstr;
        }
        v
    }

    /// A `raw` value holding the string `bitmap` stands for, in whichever
    /// form is smaller.
    pub fn from_bitmap(bitmap: SparseBitmap) -> Self {
        let mut v = StrValue {
            repr: Repr::Sparse(Box::new(bitmap)),
            enc: StrEncoding::Raw,
        };
        v.settle();
        v
    }

    /// The bytes of the value, as GET returns them. Borrowed for plain
    /// strings; a compressed bitmap is materialized, so hot paths should
    /// prefer the length-aware accessors ([`StrValue::len`],
    /// [`StrValue::range_bytes`], [`StrValue::read_bytes`]).
    pub fn as_bytes(&self) -> Cow<'_, [u8]> {
        match self.repr.view() {
            View::Plain(b) => Cow::Borrowed(b),
            View::Sparse(s) => Cow::Owned(s.to_bytes()),
        }
    }

    /// Starts loading the bytes of a string kept outside the value (an
    /// inline one is in the value already). Changes nothing.
    #[inline]
    pub fn prefetch(&self) {
        if let Repr::Bytes(b) = &self.repr {
            super::prefetch::read_bytes(b.as_ptr(), b.len(), 2);
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self.repr.view() {
            View::Plain(b) => b.len(),
            View::Sparse(s) => s.len() as usize,
        }
    }

    /// Whether the value is the empty string.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes for in-place change; the value becomes `raw` (and a
    /// compressed bitmap becomes plain bytes).
    pub fn make_raw(&mut self) -> &mut Vec<u8> {
        self.enc = StrEncoding::Raw;
        loop {
            match self.repr {
                Repr::Bytes(ref mut b) => return b,
                Repr::Inline { len, bytes } => {
                    self.repr = Repr::Bytes(bytes.get(..len as usize).unwrap_or(&[]).to_vec())
                }
                Repr::Sparse(ref s) => self.repr = Repr::Bytes(s.to_bytes()),
            }
        }
    }

    /// The value as an integer, if it is one (INCR and friends).
    pub fn as_i64(&self) -> Option<i64> {
        match self.repr.view() {
            View::Plain(b) => crate::protocol::number::parse_i64(b),
            // An integer has at most 20 characters.
            View::Sparse(s) if s.len() <= 20 => crate::protocol::number::parse_i64(&s.to_bytes()),
            View::Sparse(_) => None,
        }
    }

    /// The name OBJECT ENCODING answers.
    pub fn encoding(&self) -> &'static str {
        match self.enc {
            StrEncoding::Int => "int",
            StrEncoding::Embstr => "embstr",
            StrEncoding::Raw => "raw",
        }
    }

    /// Approximate bytes used.
    pub fn memory_usage(&self) -> usize {
        16 + match self.repr.view() {
            View::Plain(_) => match &self.repr {
                Repr::Bytes(v) => v.capacity(),
                _ => 0,
            },
            View::Sparse(s) => s.memory_usage(),
        }
    }

    /// Whether the value is held compressed (a sparse bitmap).
    pub fn is_compressed(&self) -> bool {
        matches!(self.repr, Repr::Sparse(_))
    }

    /// Bytes `start..end` (clamped to the string), as GETRANGE returns them,
    /// without materializing a compressed bitmap.
    pub fn range_bytes(&self, start: usize, end: usize) -> Cow<'_, [u8]> {
        let end = end.min(self.len());
        if start >= end {
            return Cow::Borrowed(&[]);
        }
        match self.repr.view() {
            View::Plain(b) => Cow::Borrowed(b.get(start..end).unwrap_or(&[])),
            View::Sparse(s) => {
                let mut out = vec![0u8; end - start];
                s.read(start as u64, &mut out);
                Cow::Owned(out)
            }
        }
    }

    /// Copies the bytes from `start` into `out`, zero past the end.
    pub fn read_bytes(&self, start: u64, out: &mut [u8]) {
        match self.repr.view() {
            View::Plain(b) => {
                out.fill(0);
                let from = usize::try_from(start).unwrap_or(usize::MAX);
                if let Some(src) = b.get(from.min(b.len())..) {
                    let n = src.len().min(out.len());
                    if let (Some(d), Some(s)) = (out.get_mut(..n), src.get(..n)) {
                        d.copy_from_slice(s);
                    }
                }
            }
            View::Sparse(s) => s.read(start, out),
        }
    }

    /// Overwrites the bytes from `start` with `data`, zero-filling any gap
    /// (SETRANGE); the value becomes `raw`. Writing nothing changes nothing.
    pub fn write_bytes(&mut self, start: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let end = start + data.len() as u64;
        self.make_room(end, start.saturating_sub(self.len() as u64));
        match self.plain_or_sparse() {
            Ok(b) => {
                zero_extend(b, end as usize);
                if let Some(d) = b.get_mut(start as usize..end as usize) {
                    d.copy_from_slice(data);
                }
            }
            Err(s) => s.write(start, data),
        }
        self.settle();
    }

    /// Appends `data` (APPEND); returns the new length. The value becomes
    /// `raw`.
    pub fn append(&mut self, data: &[u8]) -> usize {
        let len = self.len() as u64;
        self.enc = StrEncoding::Raw;
        self.write_bytes(len, data);
        self.len()
    }

    /// Zero-extends the string to at least `len` bytes; the value becomes
    /// `raw` (Redis unshares it even when it does not grow).
    pub fn grow(&mut self, len: u64) {
        let cur = self.len() as u64;
        self.make_room(len, len.saturating_sub(cur));
        match self.plain_or_sparse() {
            Ok(b) => zero_extend(b, len as usize),
            Err(s) => s.grow(len),
        }
    }

    /// The bit at `offset` (SETBIT numbering; zero past the end).
    pub fn get_bit(&self, offset: u64) -> bool {
        match self.repr.view() {
            View::Plain(b) => usize::try_from(offset / 8)
                .ok()
                .and_then(|i| b.get(i))
                .is_some_and(|&v| v & (0x80 >> (offset & 7)) != 0),
            View::Sparse(s) => s.get_bit(offset),
        }
    }

    /// Sets or clears the bit at `offset`, growing the string to cover it
    /// (SETBIT); returns the old bit. The value becomes `raw`.
    pub fn set_bit(&mut self, offset: u64, on: bool) -> bool {
        self.grow(offset / 8 + 1);
        let old = match self.plain_or_sparse() {
            Ok(b) => {
                let m = 0x80u8 >> (offset & 7);
                match b.get_mut((offset / 8) as usize) {
                    Some(v) => {
                        let old = *v & m != 0;
                        if on {
                            *v |= m;
                        } else {
                            *v &= !m;
                        }
                        old
                    }
                    None => false,
                }
            }
            Err(s) => s.set_bit(offset, on),
        };
        self.settle();
        old
    }

    /// Ones between bit offsets `first` and `last`, both included (BITCOUNT).
    pub fn count_ones(&self, first: u64, last: u64) -> u64 {
        match self.repr.view() {
            View::Plain(b) => bitmap::count_ones(b, first, last),
            View::Sparse(s) => s.count_ones(first, last),
        }
    }

    /// The first bit offset in `first..=last` holding `bit` (BITPOS); only
    /// offsets inside the string are searched.
    pub fn first_bit(&self, bit: bool, first: u64, last: u64) -> Option<u64> {
        match self.repr.view() {
            View::Plain(b) => bitmap::first_bit(b, bit, first, last),
            View::Sparse(s) => {
                let last = last.min((s.len() * 8).checked_sub(1)?);
                s.first_bit(bit, first, last)
            }
        }
    }

    /// The raw `bits` (1..=64) bits at bit `offset` (BITFIELD GET), reading
    /// zeros past the end.
    pub fn get_field(&self, offset: u64, bits: u32) -> u64 {
        let mut window = [0u8; 9];
        self.read_bytes(offset / 8, &mut window);
        bitmap::window_get(&window, (offset & 7) as u32, bits)
    }

    /// Stores the low `bits` bits of `value` at bit `offset` (BITFIELD SET
    /// and INCRBY), growing the string to cover them.
    pub fn set_field(&mut self, offset: u64, bits: u32, value: u64) {
        let mut window = [0u8; 9];
        self.read_bytes(offset / 8, &mut window);
        let shift = (offset & 7) as u32;
        bitmap::window_set(&mut window, shift, bits, value);
        let used = (shift + bits).div_ceil(8) as usize;
        self.write_bytes(offset / 8, window.get(..used).unwrap_or(&window));
    }

    /// Numbers of the 8 KiB blocks (of [`bitmap::CHUNK_BYTES`]) that may hold
    /// a set bit, in order (BITOP skips the others).
    pub fn nonzero_blocks(&self) -> Vec<u64> {
        match self.repr.view() {
            View::Plain(b) => b
                .chunks(bitmap::CHUNK_BYTES)
                .enumerate()
                .filter(|(_, c)| c.iter().any(|&x| x != 0))
                .map(|(k, _)| k as u64)
                .collect(),
            View::Sparse(s) => s.chunk_numbers().collect(),
        }
    }

    /// The plain bytes in a buffer of their own for change (a short string
    /// leaves the value), or the compressed form.
    fn plain_or_sparse(&mut self) -> Result<&mut Vec<u8>, &mut SparseBitmap> {
        loop {
            match self.repr {
                Repr::Bytes(ref mut b) => return Ok(b),
                Repr::Sparse(ref mut s) => return Err(s),
                Repr::Inline { len, bytes } => {
                    self.repr = Repr::Bytes(bytes.get(..len as usize).unwrap_or(&[]).to_vec())
                }
            }
        }
    }

    /// Before the string grows to `new_len` bytes of which `zero_gap` are
    /// zero fill: a plain string about to become mostly zeros is
    /// compressed. The value becomes `raw`.
    fn make_room(&mut self, new_len: u64, zero_gap: u64) {
        self.enc = StrEncoding::Raw;
        if let View::Plain(b) = self.repr.view() {
            let cur = b.len() as u64;
            if new_len > cur && zero_gap >= SPARSE_MIN_GAP && zero_gap > cur {
                self.repr = Repr::Sparse(Box::new(SparseBitmap::from_bytes(b)));
            }
        }
    }

    /// After a change to a compressed string: back to plain bytes once they
    /// would take no more room.
    fn settle(&mut self) {
        if let Repr::Sparse(s) = &self.repr {
            if s.denser_than_bytes() {
                self.repr = Repr::from_vec(s.to_bytes());
            }
        }
    }
}

/// Zero-extends `b` to `len` bytes. When the buffer must grow it reserves
/// room as Redis's `sdsMakeRoomFor` does for SETBIT, SETRANGE and APPEND:
/// twice the new length below 1 MiB, 1 MiB more above (a doubling `Vec`
/// would hold up to twice a big string's length).
fn zero_extend(b: &mut Vec<u8>, len: usize) {
    if len <= b.len() {
        return;
    }
    if len > b.capacity() {
        let room = if len < MAX_PREALLOC {
            len.saturating_mul(2)
        } else {
            len.saturating_add(MAX_PREALLOC)
        };
        b.reserve_exact(room - b.len());
    }
    b.resize(len, 0);
}

fn encoding_for(b: &[u8]) -> StrEncoding {
    if b.len() <= 20 && crate::protocol::number::parse_i64(b).is_some() {
        StrEncoding::Int
    } else if b.len() <= EMBSTR_MAX {
        StrEncoding::Embstr
    } else {
        StrEncoding::Raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_strings_stay_inside_a_32_byte_value() {
        assert_eq!(std::mem::size_of::<StrValue>(), 32);
        let v = StrValue::from_bytes(&[b'x'; INLINE_MAX]);
        assert!(matches!(v.repr, Repr::Inline { .. }));
        assert_eq!(v.as_bytes().as_ref(), &[b'x'; INLINE_MAX]);
        assert_eq!(v.memory_usage(), 16);
        let v = StrValue::from_bytes(&[b'x'; INLINE_MAX + 1]);
        assert!(matches!(v.repr, Repr::Bytes(_)));
        let mut n = StrValue::from_i64(i64::MIN);
        assert!(matches!(n.repr, Repr::Bytes(_)));
        n.set_i64(7);
        assert!(matches!(n.repr, Repr::Inline { .. }));
        assert_eq!((n.as_i64(), n.encoding()), (Some(7), "int"));
        // Changes in place move a short string to a buffer of its own.
        let mut a = StrValue::from_bytes(b"ab");
        assert_eq!(a.append(b"cd"), 4);
        assert!(matches!(a.repr, Repr::Bytes(_)));
        assert_eq!((a.as_bytes().as_ref(), a.encoding()), (&b"abcd"[..], "raw"));
        let mut b = StrValue::from_bytes(b"\x00");
        assert!(!b.set_bit(7, true));
        assert_eq!(b.as_bytes().as_ref(), b"\x01");
        b.write_bytes(3, b"z");
        assert_eq!(b.as_bytes().as_ref(), b"\x01\0\0z");
    }

    #[test]
    fn encodings() {
        assert_eq!(StrValue::from_bytes(b"123").encoding(), "int");
        assert_eq!(StrValue::from_bytes(b"0123").encoding(), "embstr");
        assert_eq!(StrValue::from_bytes(&[b'a'; 45]).encoding(), "raw");
        let mut v = StrValue::from_bytes(b"12");
        v.make_raw().push(b'3');
        assert_eq!(v.as_bytes().as_ref(), b"123");
        assert_eq!(v.encoding(), "raw");
        assert_eq!(StrValue::from_i64(-5).as_i64(), Some(-5));
    }

    #[test]
    fn far_setbit_compresses_and_reads_the_same() {
        let mut v = StrValue::from_bytes(b"1");
        assert!(!v.set_bit(1_000_000, true));
        assert!(v.is_compressed());
        assert_eq!(v.encoding(), "raw");
        assert_eq!(v.len(), 125_001);
        let bytes = v.as_bytes().into_owned();
        assert_eq!(bytes[0], b'1');
        assert_eq!(bytes[125_000], 0x80);
        assert_eq!(bytes.iter().filter(|&&b| b != 0).count(), 2);
        assert_eq!(v.range_bytes(124_999, 200_000).as_ref(), &[0, 0x80]);
        assert_eq!(v.count_ones(0, u64::MAX), 3 + 1);
        assert_eq!(v.first_bit(true, 8, u64::MAX), Some(1_000_000));
        assert_eq!(v.first_bit(false, 1_000_000, u64::MAX), Some(1_000_001));
        assert_eq!(v.first_bit(false, 1_000_001, 1_000_007), Some(1_000_001));
        assert_eq!(v.first_bit(false, 1_000_008, u64::MAX), None);
        assert_eq!(v.append(b"xy"), 125_003);
        assert_eq!(v.range_bytes(125_000, 125_003).as_ref(), b"\x80xy");
        assert!(v.is_compressed());
        assert_eq!(v.as_i64(), None);
        assert!(v.memory_usage() < 1000);
    }

    #[test]
    fn filling_a_compressed_string_turns_it_plain() {
        let mut v = StrValue::raw(Vec::new());
        v.set_bit(80_000, true);
        assert!(v.is_compressed());
        for o in 0..80_000 {
            v.set_bit(o, true);
        }
        assert!(!v.is_compressed());
        assert_eq!(v.len(), 10_001);
        assert_eq!(v.count_ones(0, u64::MAX), 80_001);
        let mut plain = vec![0xffu8; 10_000];
        plain.push(0x80);
        assert_eq!(v.as_bytes().as_ref(), plain.as_slice());
    }

    #[test]
    fn plain_growth_stays_plain() {
        let mut v = StrValue::raw(Vec::new());
        for o in (0..100_000).step_by(3) {
            v.set_bit(o, true);
        }
        assert!(!v.is_compressed());
        v.write_bytes(20_000, b"");
        assert_eq!(v.len(), 12_500);
        v.write_bytes(20_000, b"ab");
        assert!(!v.is_compressed());
        assert_eq!(v.len(), 20_002);
    }

    #[test]
    fn growth_reserves_as_redis() {
        let mut dense = StrValue::raw(Vec::new());
        for o in 0..1_000_000 {
            dense.set_bit(o, true);
        }
        assert!(!dense.is_compressed());
        assert_eq!(dense.len(), 125_000);
        // Last grown at 65,535 bytes, to twice that.
        assert_eq!(dense.memory_usage(), 16 + 131_070);
        let mut big = StrValue::raw(Vec::new());
        for i in 0..3000 {
            big.write_bytes(i * 1000, &[1; 1000]);
        }
        assert_eq!(big.len(), 3_000_000);
        assert!(big.memory_usage() <= 16 + 3_000_000 + MAX_PREALLOC);
    }

    #[test]
    fn fields_across_bytes() {
        let mut v = StrValue::raw(Vec::new());
        v.grow(1 << 20);
        assert!(v.is_compressed());
        v.set_field(13, 64, 0x0123_4567_89ab_cdef);
        assert_eq!(v.get_field(13, 64), 0x0123_4567_89ab_cdef);
        assert_eq!(v.get_field(13 + 60, 4), 0xf);
        let mut w = StrValue::raw(vec![0u8; 10]);
        w.set_field(13, 64, 0x0123_4567_89ab_cdef);
        assert_eq!(v.range_bytes(0, 10), w.range_bytes(0, 10));
        assert_eq!(v.get_field((1 << 23) - 4, 8), 0);
        assert_eq!(v.len(), 1 << 20);
    }
}
