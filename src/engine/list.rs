//! Lists: the engine behind the L* commands (LPUSH, LRANGE, LPOS, ...).
//! What lives here is the data structure alone; argument parsing, replies,
//! blocking pops and keyspace events belong to the commands layer.
//!
//! A [`ListValue`] is a sequence of byte strings, kept in *nodes*: compact
//! byte buffers of entries, each at most `list-max-listpack-size` big
//! ([`ListLimits`]: -2, the default, is 8 KB; a positive n is n entries).
//!
//! # Layouts
//! - `listpack`: one node, held inline. Every new list starts here.
//! - `quicklist`: a deque of nodes. A list moves here in one place,
//!   `ListValue::convert_to_quicklist`, when its one node would pass the
//!   limit (an element bigger than the limit does that on its own), and
//!   never moves back, as in Redis.
//!
//! Redis 7.0 answers OBJECT ENCODING with `quicklist` for every list (checked
//! against redis-server 7.0.15: `RPUSH k a` then `OBJECT ENCODING k`); the
//! `listpack` encoding of small lists came with 7.2. So
//! [`ListValue::encoding`] always answers `quicklist`, and
//! [`ListValue::layout`] names the form the list is really in, with 7.2's
//! names.
//!
//! # Costs
//! Pushes and pops at either end are O(1) amortised (a push or pop at the
//! front moves the bytes of one node, as Redis's listpack does). Reaching
//! index i (LINDEX, LSET, the start of LRANGE) walks the nodes' counts from
//! the nearer end, then inside one node jumps to the nearest *mark* (an entry
//! recorded every 256 bytes) and walks at most that many bytes.
//!
//! # Entries
//! A node is `[base length][base][entry][entry]...`: the *base* is up to 31
//! bytes taken from the node's first element, and an entry may store only
//! what follows a prefix it shares with the base. There is no back length
//! (Redis's listpack spends a byte per entry on one); walking backwards goes
//! through the marks. One header byte `h` starts each entry:
//!
//! ```text
//! 0x00..=0x7F  the integer h (0..=127)
//! 0x80..=0xA7  a string of h - 0x80 (0..=39) bytes, which follow
//! 0xA8..=0xAF  an integer in [-2^26, 2^26): (h - 0xA8) and 3 bytes
//! 0xB0..=0xCF  an integer in [-2^20, 2^20): (h - 0xB0) and 2 bytes
//! 0xD0..=0xDB  an integer in [-1024, 2048): (h - 0xD0) and 1 byte
//! 0xDC / 0xDD / 0xDE  an integer in 4 / 6 / 8 bytes, two's complement
//! 0xDF         a string: LEB128 length, then the bytes
//! 0xE0..=0xFF  base[..h - 0xE0] followed by a suffix: LEB128 length, bytes
//! ```
//!
//! The 2- to 4-byte integers store `v - min` of their range, the header's
//! part as the high digit; bytes are little-endian. Only canonical integer
//! strings (`12`, not `012` or `+12`) are stored as integers, so every
//! element reads back byte for byte. Each element takes the shortest form.
//! `list-compress-depth` is not implemented (inner nodes stay uncompressed).
//!
//! # Memory
//! [`ListValue::memory_usage`] counts buffers by jemalloc size class. Bytes
//! per element for 1,000,000 elements pushed with RPUSH
//! (`tests::bytes_per_element_1m`), against redis-server 7.0.15's growth of
//! `used_memory` for the same list: `xxx` 2.05 (Redis 5.07), the integers
//! 1..=1,000,000 3.08 (5.00), random integers below 1,000,000 3.08 (5.00),
//! `user:<random id below 10^8>` 10.05 (15.01), `m:<12 digits>` 5.87
//! (16.12).

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::engine::zset::alloc_size;
use crate::protocol::number::parse_i64;

/// Redis's default `list-max-listpack-size`: nodes of at most 8 KB.
pub const DEFAULT_MAX_LISTPACK_SIZE: i64 = -2;

/// A node records one of its entries as a mark at least every this many
/// bytes, and at least every [`MARK_ENTRIES`] entries; walks inside a node
/// start from the nearest mark.
const MARK_SPACING: usize = 256;
/// Entries one mark's stretch holds at most. Bytes alone let a stretch of
/// one-byte entries (small integers, values equal to the node's base) hold
/// 256 of them, and RPOP of such a list walked up to that many entries
/// from the last mark to find the last one (1,800 instructions a pop).
const MARK_ENTRIES: usize = 32;

/// The byte limit of a node under a positive (count) limit, Redis's
/// `SIZE_SAFETY_LIMIT`.
const SIZE_SAFETY_LIMIT: usize = 8192;

/// Redis's largest count limit (`FILL_MAX`).
const FILL_MAX: usize = 32767;

/// The longest base a node keeps (the prefix length lives in 5 bits).
const MAX_BASE: usize = 31;

/// The longest string whose length fits in its header byte.
const MAX_SHORT_STRING: usize = 39;

/// The node limits, from the configuration (`list-max-listpack-size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListLimits {
    /// Negative: a node of at most 4 KB (-1), 8 KB (-2), 16 KB (-3), 32 KB
    /// (-4) or 64 KB (-5 and below). Positive: at most that many entries
    /// (and 8 KB). 0 holds one entry a node.
    pub max_listpack_size: i64,
}

impl Default for ListLimits {
    fn default() -> Self {
        ListLimits {
            max_listpack_size: DEFAULT_MAX_LISTPACK_SIZE,
        }
    }
}

impl ListLimits {
    fn node(self) -> NodeLimit {
        let n = self.max_listpack_size;
        if n < 0 {
            let shift = n.unsigned_abs().min(5) - 1;
            NodeLimit {
                bytes: 4096 << shift,
                entries: usize::MAX,
            }
        } else {
            NodeLimit {
                bytes: SIZE_SAFETY_LIMIT,
                entries: usize::try_from(n).unwrap_or(FILL_MAX).clamp(1, FILL_MAX),
            }
        }
    }
}

/// What one node may hold: at most `bytes` bytes and `entries` entries,
/// except that a node always takes one entry, however big.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NodeLimit {
    bytes: usize,
    entries: usize,
}

/// Why a list operation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListError {
    /// LSET past either end (`ERR index out of range`).
    IndexOutOfRange,
}

impl ListError {
    /// The message after `ERR ` that Redis sends.
    pub fn message(self) -> &'static str {
        match self {
            ListError::IndexOutOfRange => "index out of range",
        }
    }
}

impl fmt::Display for ListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ERR {}", self.message())
    }
}

impl std::error::Error for ListError {}

/// LINSERT's BEFORE / AFTER.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertWhere {
    /// Insert in front of the pivot.
    Before,
    /// Insert behind the pivot.
    After,
}

// ---------------------------------------------------------------------------
// elements

/// One element as the list holds it, borrowed from a node. Its bytes may be
/// an integer to format or two pieces (a prefix shared with its node and the
/// rest), so they are read through [`Element::parts`], [`Element::write_to`]
/// or [`Element::to_vec`].
#[derive(Debug, Clone, Copy)]
pub struct Element<'a> {
    repr: Repr<'a>,
}

#[derive(Debug, Clone, Copy)]
enum Repr<'a> {
    Int(i64),
    Bytes(&'a [u8]),
    Prefixed(&'a [u8], &'a [u8]),
}

impl<'a> Element<'a> {
    /// The element's length in bytes.
    pub fn len(&self) -> usize {
        match self.repr {
            Repr::Int(n) => itoa::Buffer::new().format(n).len(),
            Repr::Bytes(b) => b.len(),
            Repr::Prefixed(p, s) => p.len() + s.len(),
        }
    }

    /// Whether the element is the empty string.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element's bytes as two pieces to write one after the other (the
    /// second is often empty); an integer is formatted into `buf`, so no
    /// allocation either way.
    pub fn parts<'b>(&'b self, buf: &'b mut itoa::Buffer) -> (&'b [u8], &'b [u8])
    where
        'a: 'b,
    {
        match self.repr {
            Repr::Int(n) => (buf.format(n).as_bytes(), &[]),
            Repr::Bytes(b) => (b, &[]),
            Repr::Prefixed(p, s) => (p, s),
        }
    }

    /// Appends the element's bytes to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let mut buf = itoa::Buffer::new();
        let (a, b) = self.parts(&mut buf);
        out.extend_from_slice(a);
        out.extend_from_slice(b);
    }

    /// The element's bytes in a new vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        self.write_to(&mut out);
        out
    }

    /// The element as an integer, if it is a canonical one.
    pub fn as_int(&self) -> Option<i64> {
        match self.repr {
            Repr::Int(n) => Some(n),
            Repr::Bytes(b) => parse_i64(b),
            Repr::Prefixed(..) => parse_i64(&self.to_vec()),
        }
    }

    /// Whether the element's bytes are `value`.
    pub fn eq_bytes(&self, value: &[u8]) -> bool {
        Needle::new(value).matches(self)
    }
}

/// A value searched for (LPOS, LREM, LINSERT's pivot), parsed once.
struct Needle<'v> {
    bytes: &'v [u8],
    int: Option<i64>,
}

impl<'v> Needle<'v> {
    fn new(bytes: &'v [u8]) -> Needle<'v> {
        Needle {
            bytes,
            int: parse_i64(bytes),
        }
    }

    /// Integers are stored only when canonical, so an integer entry equals
    /// exactly the one string that parses to it.
    fn matches(&self, e: &Element<'_>) -> bool {
        match e.repr {
            Repr::Int(n) => self.int == Some(n),
            Repr::Bytes(b) => b == self.bytes,
            Repr::Prefixed(p, s) => {
                self.bytes.len() == p.len() + s.len()
                    && self.bytes.starts_with(p)
                    && self.bytes.ends_with(s)
            }
        }
    }
}

// ---------------------------------------------------------------------------
// entry encoding

/// One element encoded for a node: a header of up to 11 bytes, then a slice
/// of the element (empty for integers).
struct Enc<'v> {
    head: [u8; 11],
    head_len: usize,
    body: &'v [u8],
}

impl<'v> Enc<'v> {
    fn len(&self) -> usize {
        self.head_len + self.body.len()
    }

    fn head(&self) -> &[u8] {
        self.head.get(..self.head_len).unwrap_or(&[])
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.head());
        out.extend_from_slice(self.body);
    }

    fn string(tag: u8, len_in_tag: bool, body: &'v [u8]) -> Enc<'v> {
        let mut head = [0u8; 11];
        head[0] = tag;
        let head_len = if len_in_tag {
            1
        } else {
            1 + write_leb(&mut head[1..], body.len())
        };
        Enc {
            head,
            head_len,
            body,
        }
    }

    fn int(v: i64) -> Enc<'v> {
        let mut head = [0u8; 11];
        if let Ok(small) = u8::try_from(v) {
            if small <= 0x7F {
                head[0] = small;
                return Enc {
                    head,
                    head_len: 1,
                    body: &[],
                };
            }
        }
        let packed = INT_FORMS.iter().find_map(|f| {
            let n = u64::try_from(v.checked_sub(f.min)?).ok()?;
            let digit = u8::try_from(n >> (8 * f.extra)).ok()?;
            (digit < f.codes).then_some((f, digit, n))
        });
        let head_len = match packed {
            Some((f, digit, n)) => {
                head[0] = f.first + digit;
                head[1..=f.extra].copy_from_slice(&n.to_le_bytes()[..f.extra]);
                1 + f.extra
            }
            None => {
                let (tag, width) = if fits(v, 32) {
                    (0xDC, 4)
                } else if fits(v, 48) {
                    (0xDD, 6)
                } else {
                    (0xDE, 8)
                };
                head[0] = tag;
                head[1..=width].copy_from_slice(&v.to_le_bytes()[..width]);
                1 + width
            }
        };
        Enc {
            head,
            head_len,
            body: &[],
        }
    }
}

/// An integer form of 2 to 4 bytes: headers `first..first + codes` hold the
/// high digit of `v - min`, and `extra` bytes follow with the rest.
struct IntForm {
    first: u8,
    codes: u8,
    extra: usize,
    min: i64,
}

/// The 2-, 3- and 4-byte integer forms, shortest first.
const INT_FORMS: [IntForm; 3] = [
    IntForm {
        first: 0xD0,
        codes: 12,
        extra: 1,
        min: -1024,
    },
    IntForm {
        first: 0xB0,
        codes: 32,
        extra: 2,
        min: -(1 << 20),
    },
    IntForm {
        first: 0xA8,
        codes: 8,
        extra: 3,
        min: -(1 << 26),
    },
];

/// Whether `v` fits a signed integer of `bits` bits.
fn fits(v: i64, bits: u32) -> bool {
    let half = 1i64 << (bits - 1);
    (-half..half).contains(&v)
}

/// `raw`'s low `bits` bits read as a signed integer.
fn sign_extend(raw: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((raw << shift) as i64) >> shift
}

/// The shortest encoding of `value` in a node whose base is `base`: an
/// integer when `value` is a canonical one, else the string whole or after
/// the prefix it shares with the base.
fn encode<'v>(value: &'v [u8], base: &[u8]) -> Enc<'v> {
    let mut best = if value.len() <= MAX_SHORT_STRING {
        Enc::string(0x80 + value.len() as u8, true, value)
    } else {
        Enc::string(0xDF, false, value)
    };
    if let Some(n) = parse_i64(value) {
        let e = Enc::int(n);
        if e.len() <= best.len() {
            best = e;
        }
    }
    let shared = value
        .iter()
        .zip(base)
        .take(MAX_BASE)
        .take_while(|(a, b)| a == b)
        .count();
    if shared > 0 {
        let e = Enc::string(
            0xE0 + shared as u8,
            false,
            value.get(shared..).unwrap_or(&[]),
        );
        if e.len() < best.len() {
            best = e;
        }
    }
    best
}

fn write_leb(out: &mut [u8], mut v: usize) -> usize {
    let mut n = 0;
    while let Some(slot) = out.get_mut(n) {
        let low = (v & 0x7F) as u8;
        v >>= 7;
        n += 1;
        if v == 0 {
            *slot = low;
            break;
        }
        *slot = low | 0x80;
    }
    n
}

/// The LEB128 number at `at`: its value and its size.
#[inline]
fn read_leb(buf: &[u8], at: usize) -> Option<(usize, usize)> {
    // One byte (below 128) is by far the most common: walks go through
    // here for every suffix entry they pass.
    match *buf.get(at)? {
        b if b < 0x80 => Some((b as usize, 1)),
        _ => read_leb_long(buf, at),
    }
}

/// [`read_leb`] for a number of more than one byte.
fn read_leb_long(buf: &[u8], at: usize) -> Option<(usize, usize)> {
    let mut v = 0usize;
    let mut shift = 0;
    let mut n = 0;
    loop {
        let b = *buf.get(at + n)?;
        n += 1;
        v |= ((b & 0x7F) as usize).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some((v, n));
        }
        shift += 7;
        if shift >= usize::BITS {
            return None;
        }
    }
}

/// `n` little-endian bytes at `at`.
fn read_le(buf: &[u8], at: usize, n: usize) -> Option<u64> {
    let bytes = buf.get(at..at + n)?;
    Some(
        bytes
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)),
    )
}

/// The size of the entry at `at`, without reading its bytes.
#[inline]
fn entry_size(buf: &[u8], at: usize) -> Option<usize> {
    let h = *buf.get(at)?;
    Some(match h {
        0x00..=0x7F => 1,
        0x80..=0xA7 => 1 + (h - 0x80) as usize,
        0xA8..=0xAF => 4,
        0xB0..=0xCF => 3,
        0xD0..=0xDB => 2,
        0xDC => 5,
        0xDD => 7,
        0xDE => 9,
        0xDF..=0xFF => {
            let (len, n) = read_leb(buf, at + 1)?;
            1 + n + len
        }
    })
}

/// The entry at `at` in `buf`, whose base is `base`, and its size.
fn decode<'a>(buf: &'a [u8], base: &'a [u8], at: usize) -> Option<(Repr<'a>, usize)> {
    let h = *buf.get(at)?;
    let packed = |form: usize| -> Option<(Repr<'a>, usize)> {
        let f = INT_FORMS.get(form)?;
        let low = read_le(buf, at + 1, f.extra)?;
        let n = (u64::from(h - f.first) << (8 * f.extra)) | low;
        Some((Repr::Int(f.min + n as i64), 1 + f.extra))
    };
    let wide = |width: usize| -> Option<(Repr<'a>, usize)> {
        let raw = read_le(buf, at + 1, width)?;
        Some((Repr::Int(sign_extend(raw, 8 * width as u32)), 1 + width))
    };
    match h {
        0x00..=0x7F => Some((Repr::Int(i64::from(h)), 1)),
        0x80..=0xA7 => {
            let n = (h - 0x80) as usize;
            Some((Repr::Bytes(buf.get(at + 1..at + 1 + n)?), 1 + n))
        }
        0xA8..=0xAF => packed(2),
        0xB0..=0xCF => packed(1),
        0xD0..=0xDB => packed(0),
        0xDC => wide(4),
        0xDD => wide(6),
        0xDE => wide(8),
        0xDF => {
            let (len, n) = read_leb(buf, at + 1)?;
            let from = at + 1 + n;
            Some((Repr::Bytes(buf.get(from..from + len)?), 1 + n + len))
        }
        0xE0..=0xFF => {
            let prefix = base.get(..(h - 0xE0) as usize)?;
            let (len, n) = read_leb(buf, at + 1)?;
            let from = at + 1 + n;
            let suffix = buf.get(from..from + len)?;
            Some((Repr::Prefixed(prefix, suffix), 1 + n + len))
        }
    }
}

/// Makes room for `extra` more bytes, growing to the next jemalloc size
/// class (a quarter more at most) rather than doubling.
fn reserve(buf: &mut Vec<u8>, extra: usize) {
    let need = buf.len() + extra;
    if need <= buf.capacity() {
        return;
    }
    let want = need.max(buf.capacity() + buf.capacity() / 8);
    buf.reserve_exact(alloc_size(want) - buf.len());
}

/// The gap a node of `bytes` keeps in front after a push at the front had
/// to move its entries: an eighth of it from 1 KB up, so that a run of
/// front pushes (LPUSH to a queue) moves the entries once per eighth of a
/// node pushed instead of once a push; none below, where a move is short
/// and a small list stays its size. Never so much that the node's buffer
/// passes what a mark's offset holds (a 64 KB node would lose its marks).
fn front_gap(bytes: usize) -> usize {
    if bytes >= 1024 {
        (bytes / 8).min(usize::from(u16::MAX).saturating_sub(bytes))
    } else {
        0
    }
}

/// Gives back capacity once a buffer is less than half full.
fn shrink(buf: &mut Vec<u8>) {
    if buf.capacity() > 64 && buf.len() < buf.capacity() / 2 {
        buf.shrink_to(alloc_size(buf.len()));
    }
}

// ---------------------------------------------------------------------------
// nodes

/// An entry recorded for walks: its byte offset and its index in the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mark {
    off: u16,
    idx: u16,
}

impl Mark {
    /// A mark, if both numbers fit (nodes past 64 KB hold a single entry, or
    /// just walk further).
    fn at(off: usize, idx: usize) -> Option<Mark> {
        Some(Mark {
            off: u16::try_from(off).ok()?,
            idx: u16::try_from(idx).ok()?,
        })
    }
}

/// One node: `[base length][base][gap][entries]`, and its marks (ascending;
/// the first entry is never one). The gap is room left for pushes at the
/// front (see [`front_gap`]): they write into it instead of moving the
/// node's entries each time. Between consecutive marks (and the node's
/// first entry and end) lie less than [`MARK_SPACING`] bytes plus one entry,
/// and at most [`MARK_ENTRIES`] entries.
#[derive(Debug, Clone)]
struct Node {
    buf: Vec<u8>,
    marks: Vec<Mark>,
    len: u32,
    /// Bytes of the gap before the first entry.
    gap: u32,
}

impl Default for Node {
    /// An empty node, which allocates nothing (its header is written with
    /// its first entry).
    fn default() -> Self {
        Node {
            buf: Vec::new(),
            marks: Vec::new(),
            len: 0,
            gap: 0,
        }
    }
}

impl Node {
    fn len(&self) -> usize {
        self.len as usize
    }

    /// The node's size as Redis counts it (the listpack's): its header
    /// and entries, not the gap.
    fn bytes(&self) -> usize {
        self.buf.len() - self.gap as usize
    }

    fn base(&self) -> &[u8] {
        let n = self.buf.first().map_or(0, |&n| n as usize);
        self.buf.get(1..1 + n).unwrap_or(&[])
    }

    /// The header's bytes: the base's length and the base.
    fn header_len(&self) -> usize {
        self.buf.first().map_or(0, |&n| 1 + n as usize)
    }

    /// The offset of the first entry (0 in a node without a header yet).
    fn start(&self) -> usize {
        self.header_len() + self.gap as usize
    }

    fn end(&self) -> usize {
        self.buf.len()
    }

    fn heap_bytes(&self) -> usize {
        alloc_size(self.buf.capacity()) + alloc_size(self.marks.capacity() * 4)
    }

    /// An empty node takes its base from the first element it gets.
    fn set_base_from(&mut self, value: &[u8]) {
        let base = value.get(..value.len().min(MAX_BASE)).unwrap_or(&[]);
        self.buf.clear();
        self.buf
            .reserve_exact(alloc_size(1 + base.len() + value.len() + 2));
        self.buf.push(base.len() as u8);
        self.buf.extend_from_slice(base);
        self.marks.clear();
        self.gap = 0;
    }

    /// The node's bytes after pushing `value` at either end.
    fn bytes_after_push(&self, value: &[u8]) -> usize {
        if self.len == 0 {
            let base = value.len().min(MAX_BASE);
            1 + base + encode(value, value.get(..base).unwrap_or(&[])).len()
        } else {
            self.bytes() + encode(value, self.base()).len()
        }
    }

    /// Whether pushing `value` keeps the node within `lim`.
    fn room_for(&self, value: &[u8], lim: NodeLimit) -> bool {
        self.len() < lim.entries && self.bytes_after_push(value) <= lim.bytes
    }

    /// Whether the node is within `lim`, a single entry however big
    /// counting as within (a quicklist node).
    fn within(&self, lim: NodeLimit) -> bool {
        self.len <= 1 || self.within_strictly(lim)
    }

    /// Whether the node is within `lim` (a listpack).
    fn within_strictly(&self, lim: NodeLimit) -> bool {
        self.len() <= lim.entries && self.bytes() <= lim.bytes
    }

    fn element_at(&self, at: usize) -> Option<(Element<'_>, usize)> {
        decode(&self.buf, self.base(), at).map(|(repr, size)| (Element { repr }, size))
    }

    fn size_at(&self, at: usize) -> usize {
        entry_size(&self.buf, at).unwrap_or(0)
    }

    /// The offset of entry `j` (the end offset when `j` is the length).
    fn seek(&self, j: usize) -> usize {
        if j >= self.len() {
            return self.end();
        }
        let i = self.marks.partition_point(|m| (m.idx as usize) <= j);
        let (mut off, mut idx) = match i.checked_sub(1).and_then(|i| self.marks.get(i)) {
            Some(m) => (m.off as usize, m.idx as usize),
            None => (self.start(), 0),
        };
        while idx < j {
            let size = self.size_at(off);
            if size == 0 {
                break;
            }
            off += size;
            idx += 1;
        }
        off
    }

    /// The node's entries from offset `at` on, with their offsets and sizes.
    fn entries_from(
        &self,
        mut at: usize,
    ) -> impl Iterator<Item = (usize, Element<'_>, usize)> + '_ {
        std::iter::from_fn(move || {
            let (e, size) = self.element_at(at)?;
            let off = at;
            at += size;
            Some((off, e, size))
        })
    }

    fn entries(&self) -> impl Iterator<Item = (usize, Element<'_>, usize)> + '_ {
        self.entries_from(self.start())
    }

    fn push_back(&mut self, value: &[u8]) {
        if self.len == 0 {
            self.set_base_from(value);
        }
        let enc = encode(value, self.base());
        let off = self.buf.len();
        let (last, last_idx) = self
            .marks
            .last()
            .map_or((self.start(), 0), |m| (m.off as usize, m.idx as usize));
        if self.len > 0 && (off - last >= MARK_SPACING || self.len() - last_idx >= MARK_ENTRIES) {
            self.marks.extend(Mark::at(off, self.len()));
        }
        reserve(&mut self.buf, enc.len());
        enc.write(&mut self.buf);
        self.len += 1;
    }

    /// Pushes values from `values` at the front in turn (`a b c` gives
    /// `c b a ...`) while each has room ([`Node::room_for`]); returns how
    /// many. All of them go in with one move of the node's bytes (one
    /// LPUSH of many values, or a pipelined run of LPUSHes), and the node
    /// ends exactly as after pushing them one at a time: same bytes, same
    /// marks.
    fn push_front_run<'v, I: Iterator<Item = &'v [u8]>>(
        &mut self,
        values: &mut std::iter::Peekable<I>,
        lim: NodeLimit,
    ) -> usize {
        let mut pushed = 0;
        if self.len == 0 {
            match values.peek() {
                Some(&v) if self.room_for(v, lim) => self.push_back(v),
                _ => return 0,
            }
            values.next();
            pushed = 1;
        }
        let mut encs: SmallVec<[Enc<'v>; 16]> = SmallVec::new();
        let (mut bytes, mut len) = (self.bytes(), self.len());
        while let Some(&v) = values.peek() {
            let enc = encode(v, self.base());
            if !(len < lim.entries && bytes + enc.len() <= lim.bytes) {
                break;
            }
            values.next();
            bytes += enc.len();
            len += 1;
            pushed += 1;
            encs.push(enc);
        }
        if encs.is_empty() {
            return pushed;
        }
        let start = self.start();
        let total = bytes - self.bytes();
        let old_len = self.buf.len();
        // The run goes into the gap when it fits; otherwise the entries
        // move once, by the run and a new gap (`shift`).
        let shift = if total <= self.gap as usize {
            self.gap -= total as u32;
            0
        } else {
            let gap = front_gap(bytes);
            let shift = total + gap - self.gap as usize;
            reserve(&mut self.buf, shift);
            self.buf.resize(old_len + shift, 0);
            self.buf.copy_within(start..old_len, start + shift);
            self.gap = gap as u32;
            shift
        };
        // The first value pushed ends nearest the old first entry. The
        // marks one-at-a-time pushes would add (`first` is the distance
        // from the front entry to the first mark, or the end): a mark on
        // the entry behind the one pushed when that distance passes the
        // spacing; `added` collects them back to front.
        let k = encs.len();
        let mut first = self.marks.first().map_or(old_len, |m| m.off as usize) - start;
        // And `first_n` the entries before the first mark.
        let mut first_n = self.marks.first().map_or(self.len(), |m| m.idx as usize);
        let mut at = start + shift;
        let mut added: SmallVec<[Mark; 4]> = SmallVec::new();
        for (i, enc) in encs.iter().enumerate() {
            let size = enc.len();
            first += size;
            first_n += 1;
            if first > MARK_SPACING || first_n > MARK_ENTRIES {
                if let Some(m) = Mark::at(at, k - i) {
                    added.push(m);
                    first = size;
                    first_n = 1;
                }
            }
            at -= size;
            if let Some(slot) = self.buf.get_mut(at..at + size) {
                let (head, body) = slot.split_at_mut(enc.head_len);
                head.copy_from_slice(enc.head());
                body.copy_from_slice(enc.body);
            }
        }
        self.len += k as u32;
        if self.buf.len() <= u16::MAX as usize && self.len() <= u16::MAX as usize {
            // Every mark still fits: a plain shift.
            for m in &mut self.marks {
                m.off += shift as u16;
                m.idx += k as u16;
            }
        } else {
            self.marks.retain_mut(
                |m| match Mark::at(m.off as usize + shift, m.idx as usize + k) {
                    Some(moved) => {
                        *m = moved;
                        true
                    }
                    None => false,
                },
            );
        }
        if !added.is_empty() {
            added.reverse();
            self.marks.splice(0..0, added);
        }
        pushed
    }

    /// Replaces the `old` bytes at `at` with the encoding of `value` (marks
    /// are left to the caller) and counts the entry if `old` is 0.
    fn splice(&mut self, at: usize, old: usize, value: &[u8]) {
        let enc = encode(value, self.base());
        let new = enc.len();
        let len = self.buf.len();
        if new > old {
            reserve(&mut self.buf, new - old);
            self.buf.resize(len + new - old, 0);
            self.buf.copy_within(at + old..len, at + new);
        } else {
            self.buf.copy_within(at + old..len, at + new);
            self.buf.truncate(len - (old - new));
        }
        if let Some(slot) = self.buf.get_mut(at..at + new) {
            let (head, body) = slot.split_at_mut(enc.head_len);
            head.copy_from_slice(enc.head());
            body.copy_from_slice(enc.body);
        }
        if old == 0 {
            self.len += 1;
        }
    }

    /// Inserts `value` as entry `idx`, at offset `at`.
    fn insert_at(&mut self, at: usize, idx: usize, value: &[u8]) {
        self.splice(at, 0, value);
        let size = self.size_at(at);
        self.shift_marks(idx, size as isize, 1);
        self.remark_stretch(idx);
    }

    /// Replaces entry `idx`, at offset `at`, with `value`.
    fn replace_at(&mut self, at: usize, idx: usize, value: &[u8]) {
        let old = self.size_at(at);
        self.splice(at, old, value);
        let new = self.size_at(at);
        self.shift_marks(idx + 1, new as isize - old as isize, 0);
        self.remark_stretch(idx);
        shrink(&mut self.buf);
    }

    /// Moves the marks from entry `from` on by `bytes` and `entries` (after
    /// a change before them).
    fn shift_marks(&mut self, from: usize, bytes: isize, entries: usize) {
        self.marks.retain_mut(|m| {
            if (m.idx as usize) < from {
                return true;
            }
            let moved = (m.off as usize)
                .checked_add_signed(bytes)
                .and_then(|off| Mark::at(off, m.idx as usize + entries));
            if let Some(moved) = moved {
                *m = moved;
            }
            moved.is_some()
        });
    }

    /// Marks the stretch that holds entry `idx` anew, after it changed.
    fn remark_stretch(&mut self, idx: usize) {
        let i = self.marks.partition_point(|m| (m.idx as usize) <= idx);
        let (mut last, mut k) = match i.checked_sub(1).and_then(|i| self.marks.get(i)) {
            Some(m) => (m.off as usize, m.idx as usize),
            None => (self.start(), 0),
        };
        let hi = self.marks.get(i).map_or(self.end(), |m| m.off as usize);
        let mut off = last;
        let mut last_k = k;
        let mut added = Vec::new();
        while off < hi {
            if off - last >= MARK_SPACING || k - last_k >= MARK_ENTRIES {
                added.extend(Mark::at(off, k));
                last = off;
                last_k = k;
            }
            let size = self.size_at(off);
            if size == 0 {
                break;
            }
            off += size;
            k += 1;
        }
        if !added.is_empty() {
            self.marks.splice(i..i, added);
        }
    }

    /// Removes the first `j` entries.
    fn drain_front(&mut self, j: usize) {
        if j >= self.len() {
            *self = Node::default();
            return;
        }
        let start = self.start();
        let cut = self.seek(j) - start;
        self.buf.drain(start..start + cut);
        self.marks.retain_mut(|m| {
            let moved = (m.idx as usize > j)
                .then(|| Mark::at(m.off as usize - cut, m.idx as usize - j))
                .flatten();
            if let Some(moved) = moved {
                *m = moved;
            }
            moved.is_some()
        });
        self.len -= j as u32;
        shrink(&mut self.buf);
    }

    /// Keeps the first `j` entries.
    fn keep_front(&mut self, j: usize) {
        let at = self.seek(j);
        self.truncate_at(j, at);
    }

    /// Removes the last `take` entries, appending them to `out` last first.
    fn take_back(&mut self, take: usize, out: &mut Vec<Vec<u8>>) {
        let keep = self.len().saturating_sub(take);
        let at = self.seek(keep);
        let from = out.len();
        out.extend(self.entries_from(at).map(|(_, e, _)| e.to_vec()));
        if let Some(taken) = out.get_mut(from..) {
            taken.reverse();
        }
        self.truncate_at(keep, at);
    }

    /// Keeps the first `j` entries, which end at offset `at`.
    fn truncate_at(&mut self, j: usize, at: usize) {
        if j == 0 {
            *self = Node::default();
            return;
        }
        self.buf.truncate(at);
        // Marks are in ascending order: the first one at or past `j` ends
        // those kept (RPOP must not scan them all).
        let kept = self.marks.partition_point(|m| (m.idx as usize) < j);
        self.marks.truncate(kept);
        self.len = j as u32;
        shrink(&mut self.buf);
    }

    /// Removes the entries at the given offsets (ascending).
    fn remove_offsets(&mut self, offs: &[usize]) {
        let mut kept = Vec::with_capacity(alloc_size(self.buf.len()));
        let mut from = 0;
        for &off in offs {
            let size = self.size_at(off);
            kept.extend_from_slice(self.buf.get(from..off).unwrap_or(&[]));
            from = off + size;
        }
        kept.extend_from_slice(self.buf.get(from..).unwrap_or(&[]));
        self.buf = kept;
        self.len -= offs.len() as u32;
        self.reindex();
        shrink(&mut self.buf);
    }

    /// Recomputes the marks with one walk.
    fn reindex(&mut self) {
        let mut marks = std::mem::take(&mut self.marks);
        marks.clear();
        let mut last = self.start();
        let mut off = last;
        let (mut idx, mut last_idx) = (0, 0);
        while off < self.end() {
            if off - last >= MARK_SPACING || idx - last_idx >= MARK_ENTRIES {
                marks.extend(Mark::at(off, idx));
                last = off;
                last_idx = idx;
            }
            let size = self.size_at(off);
            if size == 0 {
                break;
            }
            off += size;
            idx += 1;
        }
        marks.shrink_to_fit();
        self.marks = marks;
    }

    /// Cuts the node into pieces within `lim`, copying entries as they are
    /// (every piece keeps the base). The pieces are of about equal size, so
    /// that the next insert or replace there finds room; an entry bigger
    /// than the limit gets a piece of its own.
    fn split(&self, lim: NodeLimit) -> Vec<Node> {
        // The pieces have no gap: their size is the header and entries.
        let body = self.bytes().saturating_sub(self.header_len());
        let pieces = 2
            .max(self.bytes().div_ceil(lim.bytes.max(1)))
            .max(self.len().div_ceil(lim.entries.max(1)));
        let target = NodeLimit {
            bytes: self.header_len() + body.div_ceil(pieces),
            entries: self.len().div_ceil(pieces),
        };
        let header = match self.buf.get(..self.header_len()) {
            Some(h) if !h.is_empty() => h,
            _ => &[0],
        };
        let mut pieces = Vec::new();
        let mut cur = Node {
            buf: header.to_vec(),
            marks: Vec::new(),
            len: 0,
            gap: 0,
        };
        for (off, _, size) in self.entries() {
            let full = cur.len() >= lim.entries
                || cur.bytes() + size > lim.bytes
                || cur.len() >= target.entries
                || cur.bytes() >= target.bytes;
            if cur.len > 0 && full {
                let done = std::mem::replace(
                    &mut cur,
                    Node {
                        buf: header.to_vec(),
                        marks: Vec::new(),
                        len: 0,
                        gap: 0,
                    },
                );
                pieces.push(done);
            }
            cur.buf
                .extend_from_slice(self.buf.get(off..off + size).unwrap_or(&[]));
            cur.len += 1;
        }
        if cur.len > 0 {
            pieces.push(cur);
        }
        for p in &mut pieces {
            p.buf.shrink_to(alloc_size(p.buf.len()));
            p.reindex();
        }
        pieces
    }

    /// The node's bytes once `other`'s entries are appended to it.
    fn bytes_after_append(&self, other: &Node) -> usize {
        let mut scratch = Vec::new();
        let mut total = self.bytes();
        for (_, e, _) in other.entries() {
            scratch.clear();
            e.write_to(&mut scratch);
            total += encode(&scratch, self.base()).len();
        }
        total
    }

    /// Appends `other`'s entries, re-encoded against this node's base.
    fn append(&mut self, other: &Node) {
        let mut scratch = Vec::new();
        for (_, e, _) in other.entries() {
            scratch.clear();
            e.write_to(&mut scratch);
            self.push_back(&scratch);
        }
    }
}

// ---------------------------------------------------------------------------
// the list

/// A list value.
#[derive(Debug, Clone)]
pub struct ListValue {
    layout: Layout,
}

#[derive(Debug, Clone)]
enum Layout {
    Listpack(Node),
    Quicklist(Quicklist),
}

/// The `quicklist` layout: nodes, none of them empty, and their total.
#[derive(Debug, Clone, Default)]
struct Quicklist {
    /// Shared with a snapshot's capture while one reads them: a write
    /// copies a shared node first ([`Arc::make_mut`]).
    nodes: VecDeque<Arc<Node>>,
    len: usize,
}

/// A list's nodes, read-only, whichever the layout.
#[derive(Debug, Clone, Copy)]
enum Nodes<'a> {
    One(&'a Node),
    Many(&'a VecDeque<Arc<Node>>),
}

impl<'a> Nodes<'a> {
    fn count(self) -> usize {
        match self {
            Nodes::One(_) => 1,
            Nodes::Many(d) => d.len(),
        }
    }

    fn get(self, i: usize) -> Option<&'a Node> {
        match self {
            Nodes::One(n) => (i == 0).then_some(n),
            Nodes::Many(d) => d.get(i).map(|n| &**n),
        }
    }
}

impl Default for ListValue {
    fn default() -> Self {
        ListValue::new()
    }
}

/// LRANGE's and LTRIM's clamping: the first and last index of the range
/// `start..=stop` (negative counts from the end), or `None` when it is empty.
fn clamp_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = i64::try_from(len).ok()?;
    let start = if start < 0 {
        start.saturating_add(len)
    } else {
        start
    }
    .max(0);
    let stop = if stop < 0 {
        stop.saturating_add(len)
    } else {
        stop
    }
    .min(len - 1);
    if start > stop || start >= len {
        return None;
    }
    Some((usize::try_from(start).ok()?, usize::try_from(stop).ok()?))
}

/// Redis's index normalisation: negative counts from the end.
fn normalize(i: i64, len: usize) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let i = if i < 0 { i.checked_add(len)? } else { i };
    if (0..len).contains(&i) {
        usize::try_from(i).ok()
    } else {
        None
    }
}

impl ListValue {
    /// An empty list (`listpack` layout, as every new list).
    pub fn new() -> ListValue {
        ListValue {
            layout: Layout::Listpack(Node::default()),
        }
    }

    /// A new list of `values`, front to back (RPUSH order).
    pub fn from_values<'v>(
        values: impl IntoIterator<Item = &'v [u8]>,
        limits: ListLimits,
    ) -> ListValue {
        let mut l = ListValue::new();
        l.push_back(values, limits);
        l
    }

    /// Number of elements (LLEN).
    pub fn len(&self) -> usize {
        match &self.layout {
            Layout::Listpack(n) => n.len(),
            Layout::Quicklist(q) => q.len,
        }
    }

    /// Whether the list has no elements (such a list must not stay in the
    /// keyspace).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name OBJECT ENCODING answers: `quicklist`, for every list, as in
    /// Redis 7.0 (see the module docs; [`ListValue::layout`] tells the two
    /// layouts apart).
    pub fn encoding(&self) -> &'static str {
        "quicklist"
    }

    /// The layout the list is in, by Redis 7.2's names: `listpack` (one
    /// node) or `quicklist` (a deque of nodes).
    pub fn layout(&self) -> &'static str {
        match &self.layout {
            Layout::Listpack(_) => "listpack",
            Layout::Quicklist(_) => "quicklist",
        }
    }

    /// A copy (COPY). A `quicklist`'s nodes are shared, and copied by
    /// whichever side writes to a shared one first.
    pub fn duplicate(&self) -> ListValue {
        self.clone()
    }

    /// A point-in-time copy for a snapshot: O(nodes), the nodes shared
    /// (see `engine::cow`).
    pub fn share(&self) -> ListValue {
        self.clone()
    }

    /// Bytes of the nodes only this value holds (for a snapshot's copy:
    /// what the list copied or let go of since the copy was made).
    pub fn unshared_bytes(&self) -> usize {
        match &self.layout {
            Layout::Listpack(_) => 0,
            Layout::Quicklist(q) => q
                .nodes
                .iter()
                .filter(|n| Arc::strong_count(n) == 1)
                .map(|n| n.heap_bytes())
                .sum(),
        }
    }

    /// Approximate bytes used (buffers by jemalloc size class, plus the
    /// struct).
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<ListValue>()
            + match &self.layout {
                Layout::Listpack(n) => n.heap_bytes(),
                Layout::Quicklist(q) => {
                    alloc_size(q.nodes.capacity() * std::mem::size_of::<Node>())
                        + q.nodes.iter().map(|n| n.heap_bytes()).sum::<usize>()
                }
            }
    }

    fn nodes(&self) -> Nodes<'_> {
        match &self.layout {
            Layout::Listpack(n) => Nodes::One(n),
            Layout::Quicklist(q) => Nodes::Many(&q.nodes),
        }
    }

    /// The one place a `listpack` becomes a `quicklist` (its node, if not
    /// empty, becomes the first); gives the quicklist either way.
    fn convert_to_quicklist(&mut self) -> Option<&mut Quicklist> {
        if let Layout::Listpack(node) = &mut self.layout {
            let node = std::mem::take(node);
            let len = node.len();
            let mut nodes = VecDeque::with_capacity(4);
            if len > 0 {
                nodes.push_back(Arc::new(node));
            }
            self.layout = Layout::Quicklist(Quicklist { nodes, len });
        }
        match &mut self.layout {
            Layout::Quicklist(q) => Some(q),
            Layout::Listpack(_) => None,
        }
    }

    /// Node `k` and the index inside it of element `i` (in range), walking
    /// node counts from the nearer end.
    fn locate(&self, i: usize) -> Option<(usize, usize)> {
        match &self.layout {
            Layout::Listpack(_) => Some((0, i)),
            Layout::Quicklist(q) => {
                if i < q.len / 2 {
                    let mut i = i;
                    for (k, n) in q.nodes.iter().enumerate() {
                        if i < n.len() {
                            return Some((k, i));
                        }
                        i -= n.len();
                    }
                    None
                } else {
                    let mut back = q.len.checked_sub(i + 1)?;
                    for (k, n) in q.nodes.iter().enumerate().rev() {
                        if back < n.len() {
                            return Some((k, n.len() - 1 - back));
                        }
                        back -= n.len();
                    }
                    None
                }
            }
        }
    }

    fn node_mut(&mut self, k: usize) -> Option<&mut Node> {
        match &mut self.layout {
            Layout::Listpack(n) => (k == 0).then_some(n),
            Layout::Quicklist(q) => q.nodes.get_mut(k).map(Arc::make_mut),
        }
    }

    /// Pushes each value at the front in turn (LPUSH: `a b c` gives
    /// `c b a ...`).
    pub fn push_front<'v>(
        &mut self,
        values: impl IntoIterator<Item = &'v [u8]>,
        limits: ListLimits,
    ) {
        let lim = limits.node();
        let mut values = values.into_iter().peekable();
        while let Some(&v) = values.peek() {
            if let Layout::Listpack(node) = &mut self.layout {
                if node.push_front_run(&mut values, lim) > 0 {
                    continue;
                }
            }
            let Some(q) = self.convert_to_quicklist() else {
                return;
            };
            if let Some(head) = q.nodes.front_mut() {
                // A node shared with a snapshot is copied only to take a
                // value.
                let n = if Arc::get_mut(head).is_some() || head.room_for(v, lim) {
                    Arc::make_mut(head).push_front_run(&mut values, lim)
                } else {
                    0
                };
                if n > 0 {
                    q.len += n;
                    continue;
                }
            }
            values.next();
            q.len += 1;
            let mut node = Node::default();
            node.push_back(v);
            q.nodes.push_front(Arc::new(node));
        }
    }

    /// Pushes each value at the back in turn (RPUSH).
    pub fn push_back<'v>(
        &mut self,
        values: impl IntoIterator<Item = &'v [u8]>,
        limits: ListLimits,
    ) {
        let lim = limits.node();
        for v in values {
            if let Layout::Listpack(node) = &mut self.layout {
                if node.room_for(v, lim) {
                    node.push_back(v);
                    continue;
                }
            }
            let Some(q) = self.convert_to_quicklist() else {
                return;
            };
            q.len += 1;
            if let Some(tail) = q.nodes.back_mut() {
                if tail.room_for(v, lim) {
                    Arc::make_mut(tail).push_back(v);
                    continue;
                }
            }
            let mut node = Node::default();
            node.push_back(v);
            q.nodes.push_back(Arc::new(node));
        }
    }

    /// Removes up to `count` elements from the front and returns them in
    /// the order popped (LPOP).
    pub fn pop_front(&mut self, count: usize) -> Vec<Vec<u8>> {
        let want = count.min(self.len());
        let mut out = Vec::with_capacity(want);
        while out.len() < want {
            let Some(node) = self.node_mut(0) else {
                break;
            };
            let take = (want - out.len()).min(node.len());
            out.extend(node.entries().take(take).map(|(_, e, _)| e.to_vec()));
            node.drain_front(take);
            self.end_node_shrank(true, take);
        }
        out
    }

    /// Removes up to `count` elements from the back and returns them in the
    /// order popped, last element first (RPOP).
    pub fn pop_back(&mut self, count: usize) -> Vec<Vec<u8>> {
        let want = count.min(self.len());
        let mut out = Vec::with_capacity(want);
        while out.len() < want {
            let last = self.nodes().count().saturating_sub(1);
            let Some(node) = self.node_mut(last) else {
                break;
            };
            let take = (want - out.len()).min(node.len());
            node.take_back(take, &mut out);
            self.end_node_shrank(false, take);
        }
        out
    }

    /// Counts `j` entries gone from the first (`front`) or last node, and
    /// drops that node if it is empty now.
    fn end_node_shrank(&mut self, front: bool, j: usize) {
        let Layout::Quicklist(q) = &mut self.layout else {
            return;
        };
        q.len -= j;
        if front {
            if q.nodes.front().is_some_and(|n| n.len == 0) {
                q.nodes.pop_front();
            }
        } else if q.nodes.back().is_some_and(|n| n.len == 0) {
            q.nodes.pop_back();
        }
    }

    /// The element at index `i`, negative counting from the end (LINDEX).
    pub fn index(&self, i: i64) -> Option<Element<'_>> {
        let i = normalize(i, self.len())?;
        let (k, j) = self.locate(i)?;
        let node = self.nodes().get(k)?;
        node.element_at(node.seek(j)).map(|(e, _)| e)
    }

    /// Replaces the element at index `i`, negative counting from the end
    /// (LSET).
    pub fn set(&mut self, i: i64, value: &[u8], limits: ListLimits) -> Result<(), ListError> {
        let i = normalize(i, self.len()).ok_or(ListError::IndexOutOfRange)?;
        let (k, j) = self.locate(i).ok_or(ListError::IndexOutOfRange)?;
        let node = self.node_mut(k).ok_or(ListError::IndexOutOfRange)?;
        let at = node.seek(j);
        node.replace_at(at, j, value);
        self.fit_node(k, limits.node());
        Ok(())
    }

    /// Splits node `k` if it has grown past `lim` (converting a `listpack`
    /// first).
    fn fit_node(&mut self, k: usize, lim: NodeLimit) {
        let fits = match &self.layout {
            Layout::Listpack(n) => n.within_strictly(lim),
            Layout::Quicklist(q) => q.nodes.get(k).is_none_or(|n| n.within(lim)),
        };
        if fits {
            return;
        }
        let Some(q) = self.convert_to_quicklist() else {
            return;
        };
        let Some(node) = q.nodes.get(k) else {
            return;
        };
        let pieces = node.split(lim);
        let tail = q.nodes.split_off(k + 1);
        q.nodes.pop_back();
        q.nodes.extend(pieces.into_iter().map(Arc::new));
        q.nodes.extend(tail);
    }

    /// The elements from `start` to `stop` inclusive, clamped as LRANGE
    /// clamps them (negative counts from the end; an empty range when
    /// `start` is past `stop` or the end).
    pub fn range(&self, start: i64, stop: i64) -> Iter<'_> {
        match clamp_range(start, stop, self.len()) {
            Some((first, last)) => self.iter_from(first, last - first + 1),
            None => self.iter_from(0, 0),
        }
    }

    /// Every element, front to back.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0, self.len())
    }

    fn iter_from(&self, i: usize, count: usize) -> Iter<'_> {
        let nodes = self.nodes();
        let (node, off) = match self.locate(i).filter(|_| count > 0) {
            Some((k, j)) => (k, nodes.get(k).map_or(0, |n| n.seek(j))),
            None => (nodes.count(), 0),
        };
        Iter {
            nodes,
            node,
            off,
            remaining: count,
        }
    }

    /// Every element, back to front.
    pub fn iter_rev(&self) -> RevIter<'_> {
        let nodes = self.nodes();
        RevIter {
            nodes,
            node: nodes.count(),
            segment: 0,
            offsets: Vec::new(),
            remaining: self.len(),
        }
    }

    /// Inserts `value` before or after the first element equal to `pivot`
    /// (LINSERT); the new length, or `None` when there is no such element.
    pub fn insert(
        &mut self,
        place: InsertWhere,
        pivot: &[u8],
        value: &[u8],
        limits: ListLimits,
    ) -> Option<usize> {
        let needle = Needle::new(pivot);
        let nodes = self.nodes();
        let (k, idx, at) = (0..nodes.count()).find_map(|k| {
            let node = nodes.get(k)?;
            node.entries()
                .enumerate()
                .find_map(|(idx, (off, e, size))| {
                    needle.matches(&e).then_some(match place {
                        InsertWhere::Before => (k, idx, off),
                        InsertWhere::After => (k, idx + 1, off + size),
                    })
                })
        })?;
        self.node_mut(k)?.insert_at(at, idx, value);
        if let Layout::Quicklist(q) = &mut self.layout {
            q.len += 1;
        }
        self.fit_node(k, limits.node());
        Some(self.len())
    }

    /// Removes elements equal to `value` (LREM): the first `count` from the
    /// front when `count` is positive, the last `-count` when negative, all
    /// of them when 0. Returns how many were removed.
    pub fn remove(&mut self, count: i64, value: &[u8], limits: ListLimits) -> usize {
        let needle = Needle::new(value);
        let mut left = if count == 0 {
            usize::MAX
        } else {
            usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX)
        };
        let nodes = self.nodes().count();
        let mut removed = 0;
        let mut touched = Vec::new();
        for step in 0..nodes {
            let k = if count < 0 { nodes - 1 - step } else { step };
            if left == 0 {
                break;
            }
            let Some(node) = self.node_mut(k) else {
                break;
            };
            let mut hits: Vec<usize> = node
                .entries()
                .filter(|(_, e, _)| needle.matches(e))
                .map(|(off, _, _)| off)
                .collect();
            if hits.len() > left {
                if count < 0 {
                    hits.drain(..hits.len() - left);
                } else {
                    hits.truncate(left);
                }
            }
            if hits.is_empty() {
                continue;
            }
            node.remove_offsets(&hits);
            left -= hits.len();
            removed += hits.len();
            touched.push(k);
        }
        if let Layout::Quicklist(q) = &mut self.layout {
            q.len -= removed;
            touched.sort_unstable();
            q.compact(&touched, limits.node());
        }
        removed
    }

    /// Keeps only the elements from `start` to `stop` inclusive, clamped as
    /// LTRIM clamps them (everything goes when the range is empty). Returns
    /// how many were removed.
    pub fn trim(&mut self, start: i64, stop: i64) -> usize {
        let len = self.len();
        let (front, back) = match clamp_range(start, stop, len) {
            Some((first, last)) => (first, len - 1 - last),
            None => (len, 0),
        };
        self.discard_front(front);
        self.discard_back(back);
        front + back
    }

    /// Removes the first `n` elements.
    fn discard_front(&mut self, mut n: usize) {
        while n > 0 {
            let Some(node) = self.node_mut(0) else {
                return;
            };
            let j = n.min(node.len());
            if j == 0 {
                return;
            }
            node.drain_front(j);
            self.end_node_shrank(true, j);
            n -= j;
        }
    }

    /// Removes the last `n` elements.
    fn discard_back(&mut self, mut n: usize) {
        while n > 0 {
            let last = self.nodes().count().saturating_sub(1);
            let Some(node) = self.node_mut(last) else {
                return;
            };
            let j = n.min(node.len());
            if j == 0 {
                return;
            }
            node.keep_front(node.len() - j);
            self.end_node_shrank(false, j);
            n -= j;
        }
    }

    /// LPOS: the indexes (from the front) of elements equal to `value`.
    /// `rank` picks the first match to report: 1 the first from the front,
    /// 2 the second, -1 the first from the back... (0 is read as 1; the
    /// commands layer rejects it). At most `count` indexes (0: all), found
    /// comparing at most `maxlen` elements (0: all), in the order found.
    pub fn positions(&self, value: &[u8], rank: i64, count: usize, maxlen: usize) -> Vec<usize> {
        let skip = usize::try_from(rank.unsigned_abs().saturating_sub(1)).unwrap_or(usize::MAX);
        let count = if count == 0 { usize::MAX } else { count };
        let maxlen = if maxlen == 0 { usize::MAX } else { maxlen };
        let needle = Needle::new(value);
        let found = |elements: &mut dyn Iterator<Item = Element<'_>>| -> Vec<usize> {
            elements
                .take(maxlen)
                .enumerate()
                .filter(|(_, e)| needle.matches(e))
                .skip(skip)
                .take(count)
                .map(|(seen, _)| seen)
                .collect()
        };
        if rank < 0 {
            let last = self.len().saturating_sub(1);
            let mut from_back = found(&mut self.iter_rev());
            from_back.iter_mut().for_each(|seen| *seen = last - *seen);
            from_back
        } else {
            found(&mut self.iter())
        }
    }
}

impl Quicklist {
    /// After removals from the nodes at `touched` (ascending): drops those
    /// left empty and merges each with a neighbour when both fit in one node.
    fn compact(&mut self, touched: &[usize], lim: NodeLimit) {
        // Backwards, so that the indexes still to visit stay valid.
        for &k in touched.iter().rev() {
            if self.nodes.get(k).is_some_and(|n| n.len == 0) {
                self.nodes.remove(k);
            } else {
                self.merge_with_next(k, lim);
            }
            if let Some(prev) = k.checked_sub(1) {
                self.merge_with_next(prev, lim);
            }
        }
    }

    /// Appends node `k + 1` to node `k` if the result is within `lim`.
    fn merge_with_next(&mut self, k: usize, lim: NodeLimit) {
        let (Some(a), Some(b)) = (self.nodes.get(k), self.nodes.get(k + 1)) else {
            return;
        };
        // Re-encoding against another base changes sizes a little: check the
        // raw sizes first (cheap), then the real one.
        let fits = a.len() + b.len() <= lim.entries
            && a.bytes() + b.bytes() <= lim.bytes + 1 + MAX_BASE
            && a.bytes_after_append(b) <= lim.bytes;
        if !fits {
            return;
        }
        if let Some(b) = self.nodes.remove(k + 1) {
            if let Some(a) = self.nodes.get_mut(k) {
                Arc::make_mut(a).append(&b);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// iterators

/// Elements front to back; see [`ListValue::range`] and [`ListValue::iter`].
/// `Clone`: `range.clone().count()` or `len()` gives the reply length first.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    nodes: Nodes<'a>,
    node: usize,
    off: usize,
    remaining: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Element<'a>;

    fn next(&mut self) -> Option<Element<'a>> {
        if self.remaining == 0 {
            return None;
        }
        loop {
            let node = self.nodes.get(self.node)?;
            if self.off < node.end() {
                let (e, size) = node.element_at(self.off)?;
                self.off += size;
                self.remaining -= 1;
                return Some(e);
            }
            self.node += 1;
            self.off = self.nodes.get(self.node)?.start();
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// Elements back to front; see [`ListValue::iter_rev`]. Each stretch of a
/// node between two marks is walked forwards once, its offsets kept, then
/// given out backwards.
#[derive(Debug, Clone)]
pub struct RevIter<'a> {
    nodes: Nodes<'a>,
    /// The node being read; `nodes.count()` before the first.
    node: usize,
    /// Stretches of that node still to read (the next is `segment - 1`).
    segment: usize,
    offsets: Vec<usize>,
    remaining: usize,
}

impl<'a> RevIter<'a> {
    /// Loads the offsets of the next stretch back; false at the front.
    fn load(&mut self) -> bool {
        while self.segment == 0 {
            if self.node == 0 {
                return false;
            }
            self.node -= 1;
            self.segment = self.nodes.get(self.node).map_or(0, |n| n.marks.len() + 1);
        }
        let Some(node) = self.nodes.get(self.node) else {
            return false;
        };
        self.segment -= 1;
        let s = self.segment;
        let lo = match s.checked_sub(1) {
            Some(i) => node.marks.get(i).map_or(node.start(), |m| m.off as usize),
            None => node.start(),
        };
        let hi = node.marks.get(s).map_or(node.end(), |m| m.off as usize);
        let mut off = lo;
        while off < hi {
            self.offsets.push(off);
            let size = node.size_at(off);
            if size == 0 {
                break;
            }
            off += size;
        }
        true
    }
}

impl<'a> Iterator for RevIter<'a> {
    type Item = Element<'a>;

    fn next(&mut self) -> Option<Element<'a>> {
        if self.remaining == 0 {
            return None;
        }
        loop {
            if let Some(off) = self.offsets.pop() {
                let (e, _) = self.nodes.get(self.node)?.element_at(off)?;
                self.remaining -= 1;
                return Some(e);
            }
            if !self.load() {
                return None;
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for RevIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn limits(n: i64) -> ListLimits {
        ListLimits {
            max_listpack_size: n,
        }
    }

    fn list(values: &[&str]) -> ListValue {
        ListValue::from_values(values.iter().map(|v| v.as_bytes()), ListLimits::default())
    }

    fn strings<'a>(it: impl Iterator<Item = Element<'a>>) -> Vec<String> {
        it.map(|e| String::from_utf8_lossy(&e.to_vec()).into_owned())
            .collect()
    }

    fn all(l: &ListValue) -> Vec<String> {
        strings(l.iter())
    }

    /// Checks the structure: counts, limits, every node's entries and marks.
    fn check_invariants(l: &ListValue, lim: NodeLimit) {
        let nodes = l.nodes();
        let mut total = 0;
        for k in 0..nodes.count() {
            let Some(node) = nodes.get(k) else {
                panic!("node {k} missing");
            };
            match &l.layout {
                Layout::Listpack(_) => assert!(node.within_strictly(lim)),
                Layout::Quicklist(_) => {
                    assert!(node.len > 0, "empty node {k}");
                    assert!(node.within(lim), "node {k} past the limit");
                }
            }
            let offs: Vec<usize> = node.entries().map(|(off, _, _)| off).collect();
            assert_eq!(offs.len(), node.len(), "node {k} count");
            // An emptied node may have given back its header too.
            let end = node
                .entries()
                .last()
                .map_or(node.start(), |(o, _, s)| o + s);
            assert_eq!(end, node.end(), "node {k} ends with its last entry");
            let mut lo = node.start();
            let mut lo_idx = 0;
            for (i, m) in node.marks.iter().enumerate() {
                assert!(m.idx > 0, "a mark on the first entry");
                assert_eq!(
                    offs.get(m.idx as usize),
                    Some(&(m.off as usize)),
                    "mark {i}"
                );
                assert!(i == 0 || node.marks[i - 1].idx < m.idx);
                let last_in_stretch = offs[m.idx as usize - 1];
                assert!(last_in_stretch < lo + MARK_SPACING, "stretch {i} too long");
                assert!(
                    m.idx as usize - lo_idx <= MARK_ENTRIES,
                    "stretch {i} holds too many entries"
                );
                lo = m.off as usize;
                lo_idx = m.idx as usize;
            }
            if let Some(&last) = offs.last() {
                assert!(last < lo + MARK_SPACING, "last stretch too long");
                assert!(
                    node.len() - lo_idx <= MARK_ENTRIES,
                    "last stretch holds too many entries"
                );
            }
            for j in 0..=node.len() {
                assert_eq!(node.seek(j), offs.get(j).copied().unwrap_or(node.end()));
            }
            total += node.len();
        }
        assert_eq!(total, l.len());
    }

    #[test]
    fn integers_take_the_shortest_form_and_read_back() {
        let cases: [(i64, usize); 22] = [
            (0, 1),
            (127, 1),
            (128, 2),
            (-1, 2),
            (2047, 2),
            (-1024, 2),
            (2048, 3),
            (-1025, 3),
            (1_048_575, 3),
            (-1_048_576, 3),
            (1_048_576, 4),
            (-1_048_577, 4),
            (67_108_863, 4),
            (-67_108_864, 4),
            (67_108_864, 5),
            (i32::MAX as i64, 5),
            (i32::MIN as i64, 5),
            (i32::MAX as i64 + 1, 7),
            ((1 << 47) - 1, 7),
            (1 << 47, 9),
            (i64::MIN, 9),
            (i64::MAX, 9),
        ];
        for (n, size) in cases {
            let s = n.to_string();
            assert_eq!(Enc::int(n).len(), size, "{n}");
            // After a first element that is not a number, so that the number
            // shares nothing with the node's base.
            let l = list(&["base", &s]);
            let Layout::Listpack(node) = &l.layout else {
                panic!("not a listpack");
            };
            assert_eq!(node.size_at(node.seek(1)), size, "{n}");
            let e = l.index(1).map(|e| (e.to_vec(), e.as_int(), e.len()));
            assert_eq!(e, Some((s.clone().into_bytes(), Some(n), s.len())), "{n}");
            assert!(l
                .index(1)
                .is_some_and(|e| matches!(e.repr, Repr::Int(m) if m == n)));
        }
        let max = list(&["base", &i64::MAX.to_string()]);
        assert_eq!(max.index(1).and_then(|e| e.as_int()), Some(i64::MAX));
    }

    #[test]
    fn non_canonical_integers_stay_strings() {
        let odd = [
            "01",
            "-0",
            "+1",
            " 1",
            "1 ",
            "9223372036854775808",
            "",
            "1.5",
            "-",
        ];
        let l = list(&odd);
        assert_eq!(all(&l), odd.map(String::from).to_vec());
        for (i, v) in odd.iter().enumerate() {
            let e = l.index(i as i64);
            assert!(
                e.is_some_and(|e| e.eq_bytes(v.as_bytes()) && e.as_int().is_none()),
                "{v}"
            );
        }
        assert_eq!(l.positions(b"1", 1, 0, 0), Vec::<usize>::new());
        assert_eq!(l.positions(b"01", 1, 0, 0), vec![0]);
    }

    #[test]
    fn strings_share_the_node_prefix() {
        let long = "x".repeat(300);
        let vals = [
            "user:1001",
            "user:1002",
            "user:",
            "use",
            "other",
            &long,
            "user:1001",
        ];
        let mut l = list(&vals);
        assert_eq!(all(&l), vals.map(String::from).to_vec());
        let Layout::Listpack(node) = &l.layout else {
            panic!("not a listpack");
        };
        assert_eq!(node.base(), b"user:1001");
        // "user:1002" is base[..8] and "2": header, length, one byte.
        assert_eq!(node.size_at(node.seek(1)), 3);
        let mut buf = itoa::Buffer::new();
        let e = l.index(1).unwrap_or_else(|| panic!("no element"));
        assert_eq!(e.parts(&mut buf), (&b"user:100"[..], &b"2"[..]));
        assert!(e.eq_bytes(b"user:1002") && !e.eq_bytes(b"user:1003") && !e.eq_bytes(b"user:100"));
        assert_eq!(l.remove(0, b"user:1001", ListLimits::default()), 2);
        assert_eq!(l.len(), 5);
    }

    #[test]
    fn pushes_and_pops_keep_redis_order() {
        let lim = ListLimits::default();
        let mut l = ListValue::new();
        l.push_front(["a", "b", "c"].map(str::as_bytes), lim);
        l.push_back(["d", "e"].map(str::as_bytes), lim);
        assert_eq!(all(&l), ["c", "b", "a", "d", "e"]);
        assert_eq!(l.pop_front(2), vec![b"c".to_vec(), b"b".to_vec()]);
        assert_eq!(l.pop_back(2), vec![b"e".to_vec(), b"d".to_vec()]);
        assert_eq!(l.pop_back(0), Vec::<Vec<u8>>::new());
        assert_eq!(l.pop_back(10), vec![b"a".to_vec()]);
        assert!(l.is_empty());
        assert_eq!(l.pop_front(1), Vec::<Vec<u8>>::new());
        assert_eq!(strings(l.iter_rev()), Vec::<String>::new());
    }

    #[test]
    fn index_and_set() {
        let mut l = list(&["a", "b", "c"]);
        assert!(l.index(-1).is_some_and(|e| e.eq_bytes(b"c")));
        assert!(l.index(-3).is_some_and(|e| e.eq_bytes(b"a")));
        assert!(l.index(-4).is_none() && l.index(3).is_none());
        assert!(l.index(i64::MIN).is_none() && l.index(i64::MAX).is_none());
        assert_eq!(l.set(-1, b"z", ListLimits::default()), Ok(()));
        let err = l.set(3, b"z", ListLimits::default());
        assert_eq!(err, Err(ListError::IndexOutOfRange));
        assert_eq!(
            ListError::IndexOutOfRange.to_string(),
            "ERR index out of range"
        );
        assert_eq!(all(&l), ["a", "b", "z"]);
    }

    // The expectations below are redis-server 7.0.15's replies.
    fn sample() -> ListValue {
        list(&["a", "b", "c", "1", "2", "3", "c", "1", "2", "3"])
    }

    #[test]
    fn range_clamps_like_lrange() {
        let l = sample();
        assert_eq!(strings(l.range(-100, 2)), ["a", "b", "c"]);
        assert_eq!(strings(l.range(8, 100)), ["2", "3"]);
        assert!(strings(l.range(5, 3)).is_empty());
        assert!(strings(l.range(10, 20)).is_empty());
        assert!(strings(l.range(0, -11)).is_empty());
        assert_eq!(strings(l.range(-2, -1)), ["2", "3"]);
        assert_eq!(l.range(1, -2).len(), 8);
        assert_eq!(strings(l.range(i64::MIN, i64::MAX)).len(), 10);
    }

    #[test]
    fn positions_follow_lpos() {
        let l = sample();
        assert_eq!(l.positions(b"c", 1, 1, 0), vec![2]);
        assert_eq!(l.positions(b"c", -1, 1, 0), vec![6]);
        assert_eq!(l.positions(b"c", 1, 0, 0), vec![2, 6]);
        assert_eq!(l.positions(b"3", -1, 0, 5), vec![9, 5]);
        assert_eq!(l.positions(b"3", 2, 0, 0), vec![9]);
        assert_eq!(l.positions(b"c", -2, 5, 4), Vec::<usize>::new());
        assert_eq!(l.positions(b"1", -1, 0, 0), vec![7, 3]);
        assert_eq!(l.positions(b"1", i64::MIN, 0, 0), Vec::<usize>::new());
        assert_eq!(l.positions(b"zz", 1, 0, 0), Vec::<usize>::new());
    }

    #[test]
    fn insert_remove_trim() {
        let lim = ListLimits::default();
        let mut l = sample();
        assert_eq!(l.remove(-1, b"c", lim), 1);
        assert_eq!(all(&l), ["a", "b", "c", "1", "2", "3", "1", "2", "3"]);
        assert_eq!(l.insert(InsertWhere::Before, b"zz", b"x", lim), None);
        assert_eq!(l.insert(InsertWhere::After, b"3", b"x", lim), Some(10));
        assert_eq!(l.set(-1, b"y", lim), Ok(()));
        assert_eq!(all(&l), ["a", "b", "c", "1", "2", "3", "x", "1", "2", "y"]);
        assert_eq!(l.trim(-3, -2), 8);
        assert_eq!(all(&l), ["1", "2"]);
        assert_eq!(l.insert(InsertWhere::Before, b"1", b"0", lim), Some(3));
        assert_eq!(l.remove(2, b"1", lim), 1);
        assert_eq!(l.remove(0, b"nothing", lim), 0);
        assert_eq!(all(&l), ["0", "2"]);
        assert_eq!(l.trim(5, 10), 2);
        assert!(l.is_empty());
    }

    #[test]
    fn count_limit_converts_once_and_never_back() {
        let lim = limits(3);
        let mut l = ListValue::from_values(["a", "b", "c"].map(str::as_bytes), lim);
        assert_eq!((l.layout(), l.encoding()), ("listpack", "quicklist"));
        l.push_back([b"d".as_slice()], lim);
        assert_eq!(l.layout(), "quicklist");
        l.pop_front(3);
        assert_eq!((l.layout(), l.len()), ("quicklist", 1));
        let mut m = ListValue::from_values(["a", "b", "c"].map(str::as_bytes), lim);
        assert_eq!(m.insert(InsertWhere::After, b"a", b"x", lim), Some(4));
        assert_eq!(m.layout(), "quicklist");
        assert_eq!(all(&m), ["a", "x", "b", "c"]);
        check_invariants(&m, lim.node());
    }

    #[test]
    fn byte_limit_and_big_values() {
        let lim = ListLimits::default();
        let big = vec![b'v'; 9000];
        let l = ListValue::from_values([big.as_slice()], lim);
        assert_eq!(l.layout(), "quicklist");
        assert!(l.index(0).is_some_and(|e| e.eq_bytes(&big)));
        let mut l = ListValue::new();
        let mut n = 0;
        while l.layout() == "listpack" {
            l.push_back([format!("value-{n:05}").as_bytes()], lim);
            n += 1;
        }
        // About 8 KB of 5- and 6-byte entries went into the one node.
        assert!((1000..2000).contains(&n), "{n}");
        let mut s = ListValue::from_values([b"a".as_slice()], lim);
        assert_eq!(s.set(0, &big, lim), Ok(()));
        assert_eq!(s.layout(), "quicklist");
        s.push_front([b"b".as_slice()], lim);
        assert_eq!(s.insert(InsertWhere::After, b"b", &big, lim), Some(3));
        check_invariants(&s, lim.node());
        assert_eq!(s.nodes().count(), 3);
    }

    #[test]
    fn fill_values_map_to_redis_node_limits() {
        let node = |n| limits(n).node();
        assert_eq!(node(-1).bytes, 4096);
        assert_eq!(node(-2).bytes, 8192);
        assert_eq!(node(-5).bytes, 65536);
        assert_eq!(node(-100).bytes, 65536);
        assert_eq!((node(5).entries, node(5).bytes), (5, 8192));
        assert_eq!(node(0).entries, 1);
        assert_eq!(node(1 << 40).entries, FILL_MAX);
    }

    /// Pushes at the front write into a gap left before the entries once a
    /// node passes 1 KB; the list reads as a plain deque through pushes,
    /// pops, inserts, sets and trims at both ends.
    #[test]
    fn front_pushes_fill_a_gap() {
        let lim = ListLimits::default();
        let mut l = ListValue::new();
        let mut model = std::collections::VecDeque::new();
        let mut n = 0u32;
        let mut fresh = || {
            n += 1;
            format!("job:{n}:{}", "x".repeat((n % 23) as usize))
        };
        for round in 0..60 {
            for _ in 0..40 {
                let v = fresh();
                l.push_front([v.as_bytes()], lim);
                model.push_front(v);
            }
            let batch: Vec<String> = (0..7).map(|_| fresh()).collect();
            l.push_front(batch.iter().map(|v| v.as_bytes()), lim);
            for v in &batch {
                model.push_front(v.clone());
            }
            if round % 3 == 0 {
                l.pop_front(3);
                model.drain(..3);
                l.pop_back(2);
                model.truncate(model.len() - 2);
            }
            if round % 5 == 0 {
                let v = fresh();
                let pivot = model[1].clone();
                l.insert(InsertWhere::Before, pivot.as_bytes(), v.as_bytes(), lim);
                model.insert(1, v);
                let v = fresh();
                assert!(l.set(2, v.as_bytes(), lim).is_ok());
                model[2] = v;
            }
            check_invariants(&l, lim.node());
        }
        l.trim(5, -6);
        model.drain(..5);
        model.truncate(model.len() - 5);
        check_invariants(&l, lim.node());
        assert_eq!(all(&l), Vec::from(model));
        let gaps = (0..l.nodes().count())
            .filter_map(|k| l.nodes().get(k))
            .filter(|n| n.gap > 0)
            .count();
        assert!(gaps > 0, "no node kept a gap");
    }

    /// Nodes of 64 KB (`list-max-listpack-size -5`) pushed at the front
    /// keep every mark: the gap never takes a node's bytes past what a
    /// mark's offset can hold.
    #[test]
    fn a_64_kb_node_keeps_its_marks_with_a_gap() {
        let lim = ListLimits {
            max_listpack_size: -5,
        };
        let mut l = ListValue::new();
        for i in 0..20_000 {
            l.push_front([format!("item:{i}").as_bytes()], lim);
        }
        check_invariants(&l, lim.node());
        assert_eq!(l.len(), 20_000);
        assert!(l.index(-1).is_some_and(|e| e.eq_bytes(b"item:0")));
    }

    /// A node with a gap splits by its header and entries alone: the
    /// pieces keep every entry in order, have no gap, and the first is
    /// about half the node (its header and entries), not half plus the
    /// gap.
    #[test]
    fn a_node_with_a_gap_splits_by_its_entries() {
        let lim = ListLimits::default().node();
        let mut node = Node::default();
        let mut i = 0;
        loop {
            let v = format!("entry:{i:06}");
            i += 1;
            if node.push_front_run(&mut [v.as_bytes()].into_iter().peekable(), lim) == 0 {
                break;
            }
            if node.bytes() > lim.bytes / 2 && node.gap > 64 {
                break;
            }
        }
        assert!(node.gap > 64, "a node pushed at the front keeps a gap");
        let pieces = node.split(lim);
        let body = node.bytes() - node.header_len();
        let first = pieces.first().map_or(0, Node::bytes);
        assert!(
            first <= node.header_len() + body.div_ceil(2) + 16,
            "{first} of {body}"
        );
        for p in &pieces {
            assert_eq!(p.gap, 0);
            assert_eq!(p.start(), p.header_len());
        }
        let entries: Vec<Vec<u8>> = pieces
            .iter()
            .flat_map(|p| p.entries().map(|(_, e, _)| e.to_vec()))
            .collect();
        let whole: Vec<Vec<u8>> = node.entries().map(|(_, e, _)| e.to_vec()).collect();
        assert_eq!(entries, whole);
    }

    /// One-byte entries (small integers, values equal to the node's base)
    /// get a mark every [`MARK_ENTRIES`] entries, whichever end they are
    /// pushed at, batched or not, and after inserts: a walk from the
    /// nearest mark (RPOP's to the last entry) stays short.
    #[test]
    fn one_byte_entries_are_marked_by_count() {
        let lim = ListLimits::default();
        let mut l = ListValue::new();
        for _ in 0..3_000 {
            l.push_back([b"7".as_slice()], lim);
        }
        for _ in 0..300 {
            l.push_front([b"foo".as_slice(); 10], lim);
        }
        for _ in 0..50 {
            assert!(l.insert(InsertWhere::Before, b"7", b"9", lim).is_some());
        }
        check_invariants(&l, lim.node());
        let marks: usize = (0..l.nodes().count())
            .filter_map(|k| l.nodes().get(k))
            .map(|n| n.marks.len())
            .sum();
        assert!(
            marks >= l.len() / MARK_ENTRIES - l.nodes().count(),
            "{marks} marks"
        );
        let popped = l.pop_back(5);
        assert_eq!(popped.len(), 5);
        check_invariants(&l, lim.node());
    }

    #[test]
    fn a_big_list_walks_nodes_and_marks() {
        let lim = ListLimits::default();
        let mut l = ListValue::new();
        let n = 200_000;
        for i in 0..n {
            if i % 2 == 0 {
                l.push_back([format!("item:{i}").as_bytes()], lim);
            } else {
                l.push_front([format!("item:{i}").as_bytes()], lim);
            }
        }
        check_invariants(&l, lim.node());
        // Odd numbers descending, then even numbers ascending.
        let at = |k: usize| {
            if k < n / 2 {
                format!("item:{}", n - 1 - 2 * k)
            } else {
                format!("item:{}", 2 * (k - n / 2))
            }
        };
        for k in [0, 1, 777, n / 2 - 1, n / 2, n / 2 + 5, n - 2, n - 1] {
            assert!(
                l.index(k as i64)
                    .is_some_and(|e| e.eq_bytes(at(k).as_bytes())),
                "{k}"
            );
        }
        let got = strings(l.range(99_990, 100_009));
        assert_eq!(got, (99_990..=100_009).map(at).collect::<Vec<_>>());
        let fwd = all(&l);
        let mut back = strings(l.iter_rev());
        back.reverse();
        assert_eq!(fwd, back);
        assert_eq!(l.set(123_456, b"here", lim), Ok(()));
        assert_eq!(l.positions(b"here", 1, 0, 0), vec![123_456]);
        assert_eq!(l.positions(b"here", -1, 0, 0), vec![123_456]);
        assert_eq!(l.trim(1000, -1001), 2000);
        assert_eq!(l.len(), n - 2000);
        check_invariants(&l, lim.node());
        let copy = l.duplicate();
        l.pop_back(50_000);
        assert_eq!(copy.len(), n - 2000);
        assert_eq!(l.len(), n - 52_000);
        check_invariants(&l, lim.node());
    }

    #[test]
    fn lrem_merges_thinned_nodes() {
        let lim = ListLimits::default();
        let mut l = ListValue::new();
        for i in 0..20_000 {
            let v = if i % 10 == 0 { "keep" } else { "drop" };
            l.push_back([format!("{v}{i}").as_bytes()], lim);
        }
        let before = l.nodes().count();
        let removed: usize = (0..20_000)
            .filter(|i| i % 10 != 0)
            .map(|i| l.remove(1, format!("drop{i}").as_bytes(), lim))
            .sum();
        assert_eq!(removed, 18_000);
        check_invariants(&l, lim.node());
        assert!(
            l.nodes().count() * 5 < before,
            "{} of {before}",
            l.nodes().count()
        );
    }

    /// Bytes per element of `n` elements of four shapes, with Redis 7.0.15's
    /// figures (growth of used_memory, RPUSH of 1,000,000).
    fn measure(n: usize) -> Vec<(&'static str, f64, f64)> {
        let lim = ListLimits::default();
        let mut rng = StdRng::seed_from_u64(1);
        let shapes: [(&str, f64); 5] = [
            ("xxx", 5.07),
            ("1..=n", 5.00),
            ("random 0..1,000,000", 5.00),
            ("user:<random id>", 15.01),
            ("m:<12 digits>", 16.12),
        ];
        let mut out = Vec::new();
        for (k, (shape, redis)) in shapes.into_iter().enumerate() {
            let mut l = ListValue::new();
            for i in 1..=n {
                let v = match k {
                    0 => "xxx".to_string(),
                    1 => i.to_string(),
                    2 => rng.random_range(0..1_000_000).to_string(),
                    3 => format!("user:{}", rng.random_range(1..100_000_000)),
                    _ => format!("m:{i:012}"),
                };
                l.push_back([v.as_bytes()], lim);
            }
            let per = l.memory_usage() as f64 / n as f64;
            println!(
                "{n} {shape}: {per:.2} B/element (Redis {redis}, {:.2}x)",
                per / redis
            );
            out.push((shape, per, redis));
        }
        out
    }

    #[test]
    fn bytes_per_element() {
        for (shape, per, redis) in measure(100_000) {
            assert!(
                per < 0.8 * redis,
                "{shape}: {per:.2} B against Redis's {redis}"
            );
        }
    }

    /// The 1,000,000-element figures: `cargo test --lib
    /// bytes_per_element_1m -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn bytes_per_element_1m() {
        measure(1_000_000);
    }

    // -----------------------------------------------------------------------
    // against a model

    #[derive(Debug, Clone)]
    enum Op {
        PushFront(Vec<Vec<u8>>),
        PushBack(Vec<Vec<u8>>),
        PopFront(usize),
        PopBack(usize),
        Set(i64, Vec<u8>),
        Insert(bool, Vec<u8>, Vec<u8>),
        Remove(i64, Vec<u8>),
        Trim(i64, i64),
    }

    fn value() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => prop_oneof![Just("a"), Just("b"), Just("ab"), Just(""), Just("user:1"), Just("user:12")]
                .prop_map(|s| s.as_bytes().to_vec()),
            3 => (-3000i64..3000).prop_map(|n| n.to_string().into_bytes()),
            1 => any::<i64>().prop_map(|n| n.to_string().into_bytes()),
            1 => prop_oneof![Just("01"), Just("-0"), Just("+3")].prop_map(|s| s.as_bytes().to_vec()),
            2 => "(user:|item:)?[a-c0-9]{0,12}".prop_map(String::into_bytes),
            1 => (40usize..300, any::<u8>()).prop_map(|(n, b)| {
                let mut v = b"long-value-".to_vec();
                v.resize(n, b'a' + b % 3);
                v
            }),
        ]
    }

    fn index() -> impl Strategy<Value = i64> {
        prop_oneof![6 => -40i64..40, 1 => any::<i64>()]
    }

    fn op() -> impl Strategy<Value = Op> {
        let values = || proptest::collection::vec(value(), 1..5);
        prop_oneof![
            4 => values().prop_map(Op::PushFront),
            5 => values().prop_map(Op::PushBack),
            1 => (0usize..6).prop_map(Op::PopFront),
            1 => (0usize..6).prop_map(Op::PopBack),
            1 => (index(), value()).prop_map(|(i, v)| Op::Set(i, v)),
            1 => (any::<bool>(), value(), value()).prop_map(|(b, p, v)| Op::Insert(b, p, v)),
            1 => (-3i64..3, value()).prop_map(|(c, v)| Op::Remove(c, v)),
            1 => (index(), index()).prop_map(|(a, b)| Op::Trim(a, b)),
        ]
    }

    fn model_clamp(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
        let len = len as i128;
        let (mut s, mut e) = (start as i128, stop as i128);
        if s < 0 {
            s += len;
        }
        if e < 0 {
            e += len;
        }
        s = s.max(0);
        if s > e || s >= len {
            return None;
        }
        Some((s as usize, e.min(len - 1) as usize))
    }

    fn model_index(i: i64, len: usize) -> Option<usize> {
        let j = if i < 0 {
            i as i128 + len as i128
        } else {
            i as i128
        };
        (0..len as i128).contains(&j).then_some(j as usize)
    }

    fn model_pos(
        m: &VecDeque<Vec<u8>>,
        v: &[u8],
        rank: i64,
        count: usize,
        maxlen: usize,
    ) -> Vec<usize> {
        let len = m.len();
        let order: Vec<usize> = if rank < 0 {
            (0..len).rev().collect()
        } else {
            (0..len).collect()
        };
        let mut skip = rank.unsigned_abs().saturating_sub(1);
        let mut out = Vec::new();
        for (seen, &i) in order.iter().enumerate() {
            if maxlen != 0 && seen >= maxlen {
                break;
            }
            if m[i] == v {
                if skip > 0 {
                    skip -= 1;
                } else {
                    out.push(i);
                    if count != 0 && out.len() == count {
                        break;
                    }
                }
            }
        }
        out
    }

    fn apply(
        l: &mut ListValue,
        m: &mut VecDeque<Vec<u8>>,
        o: &Op,
        lim: ListLimits,
    ) -> Result<(), TestCaseError> {
        match o {
            Op::PushFront(vs) => {
                l.push_front(vs.iter().map(Vec::as_slice), lim);
                vs.iter().for_each(|v| m.push_front(v.clone()));
            }
            Op::PushBack(vs) => {
                l.push_back(vs.iter().map(Vec::as_slice), lim);
                vs.iter().for_each(|v| m.push_back(v.clone()));
            }
            Op::PopFront(n) => {
                let want: Vec<Vec<u8>> = (0..*n).map_while(|_| m.pop_front()).collect();
                prop_assert_eq!(l.pop_front(*n), want);
            }
            Op::PopBack(n) => {
                let want: Vec<Vec<u8>> = (0..*n).map_while(|_| m.pop_back()).collect();
                prop_assert_eq!(l.pop_back(*n), want);
            }
            Op::Set(i, v) => {
                let got = l.set(*i, v, lim);
                match model_index(*i, m.len()) {
                    Some(j) => {
                        prop_assert_eq!(got, Ok(()));
                        m[j] = v.clone();
                    }
                    None => prop_assert_eq!(got, Err(ListError::IndexOutOfRange)),
                }
            }
            Op::Insert(before, pivot, v) => {
                let place = if *before {
                    InsertWhere::Before
                } else {
                    InsertWhere::After
                };
                let got = l.insert(place, pivot, v, lim);
                match m.iter().position(|x| x == pivot) {
                    Some(j) => {
                        m.insert(if *before { j } else { j + 1 }, v.clone());
                        prop_assert_eq!(got, Some(m.len()));
                    }
                    None => prop_assert_eq!(got, None),
                }
            }
            Op::Remove(count, v) => {
                let mut hits: Vec<usize> = (0..m.len()).filter(|&i| m[i] == *v).collect();
                let k = count.unsigned_abs() as usize;
                if *count > 0 {
                    hits.truncate(k);
                } else if *count < 0 {
                    hits.drain(..hits.len().saturating_sub(k));
                }
                for &i in hits.iter().rev() {
                    m.remove(i);
                }
                prop_assert_eq!(l.remove(*count, v, lim), hits.len());
            }
            Op::Trim(a, b) => {
                let before = m.len();
                match model_clamp(*a, *b, m.len()) {
                    Some((s, e)) => {
                        m.truncate(e + 1);
                        m.drain(..s);
                    }
                    None => m.clear(),
                }
                prop_assert_eq!(l.trim(*a, *b), before - m.len());
            }
        }
        Ok(())
    }

    fn check_against_model(
        ops: &[Op],
        probes: &[(i64, i64)],
        fill: i64,
    ) -> Result<(), TestCaseError> {
        let lim = limits(fill);
        let mut l = ListValue::new();
        let mut m: VecDeque<Vec<u8>> = VecDeque::new();
        let mut converted = false;
        for o in ops {
            let was_quicklist = l.layout() == "quicklist";
            apply(&mut l, &mut m, o, lim)?;
            // A count limit makes the conversion exact: the list first
            // passed `fill` elements. A byte limit is checked as a limit.
            if fill > 0 {
                converted |= m.len() > fill as usize;
            } else {
                converted = l.layout() == "quicklist";
            }
            prop_assert!(
                !was_quicklist || l.layout() == "quicklist",
                "went back to listpack"
            );
            prop_assert_eq!(l.layout(), if converted { "quicklist" } else { "listpack" });
            prop_assert_eq!(l.encoding(), "quicklist");
            prop_assert_eq!(l.len(), m.len());
            check_invariants(&l, lim.node());
        }
        let all: Vec<Vec<u8>> = l.iter().map(|e| e.to_vec()).collect();
        prop_assert_eq!(&all, &m.iter().cloned().collect::<Vec<_>>());
        let back: Vec<Vec<u8>> = l.iter_rev().map(|e| e.to_vec()).collect();
        prop_assert_eq!(back, m.iter().rev().cloned().collect::<Vec<_>>());
        for &(a, b) in probes {
            prop_assert_eq!(
                l.index(a).map(|e| e.to_vec()),
                model_index(a, m.len()).map(|j| m[j].clone())
            );
            let want: Vec<Vec<u8>> = match model_clamp(a, b, m.len()) {
                Some((s, e)) => m.range(s..=e).cloned().collect(),
                None => Vec::new(),
            };
            let got = l.range(a, b);
            prop_assert_eq!(got.len(), want.len());
            prop_assert_eq!(got.map(|e| e.to_vec()).collect::<Vec<_>>(), want);
        }
        let mut needles: Vec<Vec<u8>> = m.iter().take(3).cloned().collect();
        needles.push(b"a".to_vec());
        needles.push(b"1".to_vec());
        for v in &needles {
            for (rank, count, maxlen) in [
                (1, 1, 0),
                (1, 0, 0),
                (-1, 0, 0),
                (2, 2, 0),
                (-2, 0, 7),
                (1, 0, 5),
                (-3, 1, 0),
            ] {
                prop_assert_eq!(
                    l.positions(v, rank, count, maxlen),
                    model_pos(&m, v, rank, count, maxlen)
                );
            }
        }
        let copy = l.duplicate();
        prop_assert_eq!(copy.iter().map(|e| e.to_vec()).collect::<Vec<_>>(), all);
        prop_assert!(l.memory_usage() >= m.iter().map(Vec::len).sum::<usize>() / 4);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn matches_model_with_count_limits(
            ops in proptest::collection::vec(op(), 0..200),
            probes in proptest::collection::vec((index(), index()), 8),
            fill in prop_oneof![Just(1i64), Just(2), Just(3), Just(5), Just(16)],
        ) {
            check_against_model(&ops, &probes, fill)?;
        }

        #[test]
        fn matches_model_with_byte_limits(
            ops in proptest::collection::vec(op(), 0..300),
            probes in proptest::collection::vec((index(), index()), 8),
            fill in prop_oneof![Just(-1i64), Just(-2)],
        ) {
            check_against_model(&ops, &probes, fill)?;
        }
    }
}
