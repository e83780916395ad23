//! Hashes, in the two encodings Redis 7.0 reports with OBJECT ENCODING:
//!
//! - `listpack`: every field and value back to back in one exactly sized
//!   byte buffer, in insertion order (HGETALL on a small hash answers in that
//!   order; an overwritten field keeps its place), found by a linear scan.
//!   A field name that many hashes repeat is stored once for the process
//!   (`field_names`) and as a one-byte id in each buffer.
//!   Used while the hash has at most `hash-max-listpack-entries` fields and
//!   every field and value is at most `hash-max-listpack-value` bytes.
//! - `hashtable`: an open-addressing table over entries stored back to back
//!   in one byte arena, built for memory (see `FieldTable`).
//!
//! A hash moves from `listpack` to `hashtable` in one place,
//! `HashValue::convert_to_hashtable`, and never back (Redis never converts a
//! hash back either).
//!
//! Nothing here knows about RESP or commands: the limits come from the
//! caller ([`HashLimits`]), randomness from the caller's `Rng`, and the
//! number type HINCRBYFLOAT adds with from the caller ([`HashFloat`]; an
//! `f64` version is provided here).

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use ahash::RandomState;
use rand::seq::{index, SliceRandom};
use rand::Rng;

use super::cow::{ArenaCapture, ArenaEntries, CapturedArena, CowCounter, SharedArenaLog};
use super::field_names;
use crate::protocol::number::{parse_i64, strtod};

/// Redis's default `hash-max-listpack-entries`.
pub const DEFAULT_MAX_LISTPACK_ENTRIES: usize = 512;

/// Redis's default `hash-max-listpack-value`.
pub const DEFAULT_MAX_LISTPACK_VALUE: usize = 64;

/// Redis's `LISTPACK_MAX_SAFETY_SIZE`: a listpack that would grow past 1 GiB
/// becomes a `hashtable` whatever the other limits say.
const LISTPACK_MAX_SAFETY_SIZE: usize = 1 << 30;

/// The two `hash-max-listpack-*` parameters, as the caller's configuration
/// holds them when a command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashLimits {
    /// `hash-max-listpack-entries`: most fields a `listpack` hash holds.
    pub max_listpack_entries: usize,
    /// `hash-max-listpack-value`: longest field or value (bytes) a
    /// `listpack` hash holds.
    pub max_listpack_value: usize,
}

impl Default for HashLimits {
    fn default() -> Self {
        HashLimits {
            max_listpack_entries: DEFAULT_MAX_LISTPACK_ENTRIES,
            max_listpack_value: DEFAULT_MAX_LISTPACK_VALUE,
        }
    }
}

/// Why HINCRBY or HINCRBYFLOAT refused; `Display` is Redis's error line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashError {
    /// `ERR hash value is not an integer`: HINCRBY on a value that is not a
    /// canonical 64-bit integer (Redis's `string2ll`).
    NotAnInteger,
    /// `ERR increment or decrement would overflow`: HINCRBY past the i64
    /// range.
    Overflow,
    /// `ERR hash value is not a float`: HINCRBYFLOAT on a value that does not
    /// parse as a number.
    NotAFloat,
    /// `ERR increment would produce NaN or Infinity`: HINCRBYFLOAT whose sum
    /// is not finite.
    NanOrInfinity,
}

impl fmt::Display for HashError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HashError::NotAnInteger => "ERR hash value is not an integer",
            HashError::Overflow => "ERR increment or decrement would overflow",
            HashError::NotAFloat => "ERR hash value is not a float",
            HashError::NanOrInfinity => "ERR increment would produce NaN or Infinity",
        })
    }
}

impl std::error::Error for HashError {}

/// The number type HINCRBYFLOAT adds with. Redis uses the x87 long double
/// (`string2ld` to read, `+`, `%.17Lf` with trailing zeros removed to
/// write); the command layer can supply that type, and `f64` is provided
/// for everything else (it follows the same rules at double precision, so
/// its last digits can differ from Redis's: `10.5 + 0.1` is
/// `10.59999999999999964` in `f64` and `10.6` in long double, and values
/// past `f64`'s range such as `1e400` are not floats to it).
pub trait HashFloat: Copy {
    /// The value of an absent field.
    fn zero() -> Self;
    /// Reads a stored value; `None` when Redis would answer "hash value is
    /// not a float".
    fn parse(bytes: &[u8]) -> Option<Self>;
    /// The sum of two numbers.
    fn add(self, other: Self) -> Self;
    /// Whether the number is neither NaN nor infinite.
    fn is_finite(self) -> bool;
    /// The bytes HINCRBYFLOAT stores and replies with.
    fn format(self) -> Vec<u8>;
}

/// Redis's `MAX_LONG_DOUBLE_CHARS`: `string2ld` reads shorter strings only.
const MAX_LONG_DOUBLE_CHARS: usize = 5 * 1024;

impl HashFloat for f64 {
    fn zero() -> Self {
        0.0
    }

    /// `string2ld`'s rules: not empty, shorter than 5 KiB, no leading space,
    /// the whole string read, no NaN, no overflow or underflow to zero.
    fn parse(bytes: &[u8]) -> Option<Self> {
        if bytes.is_empty() || bytes.len() >= MAX_LONG_DOUBLE_CHARS {
            return None;
        }
        if bytes.first().is_some_and(|&b| is_c_space(b)) {
            return None;
        }
        let r = strtod(bytes);
        if r.consumed != bytes.len() || r.value.is_nan() {
            return None;
        }
        if r.range_error && (r.value.is_infinite() || r.value == 0.0) {
            return None;
        }
        Some(r.value)
    }

    fn add(self, other: Self) -> Self {
        self + other
    }

    fn is_finite(self) -> bool {
        f64::is_finite(self)
    }

    /// `%.17f`, trailing zeros (and a bare `.`) removed, `-0` written `0`.
    fn format(self) -> Vec<u8> {
        let mut s = format!("{self:.17}").into_bytes();
        if s.contains(&b'.') {
            while s.last() == Some(&b'0') {
                s.pop();
            }
            if s.last() == Some(&b'.') {
                s.pop();
            }
        }
        if s == b"-0" {
            s = b"0".to_vec();
        }
        s
    }
}

/// C's `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// A hash value.
#[derive(Debug, Clone)]
pub struct HashValue {
    enc: Encoding,
}

#[derive(Debug, Clone)]
enum Encoding {
    Listpack(Listpack),
    // Boxed so a small hash does not carry the table's fields.
    Table(Box<FieldTable>),
}

impl Default for HashValue {
    fn default() -> Self {
        HashValue::new()
    }
}

impl HashValue {
    /// An empty hash (a `listpack`, as Redis creates every new hash).
    pub fn new() -> HashValue {
        HashValue {
            enc: Encoding::Listpack(Listpack::default()),
        }
    }

    /// Number of fields (HLEN).
    pub fn len(&self) -> usize {
        match &self.enc {
            Encoding::Listpack(l) => l.len(),
            Encoding::Table(t) => t.len,
        }
    }

    /// Whether the hash has no fields (such a hash must not stay in the
    /// keyspace).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name OBJECT ENCODING answers: `listpack` or `hashtable`.
    pub fn encoding(&self) -> &'static str {
        match &self.enc {
            Encoding::Listpack(_) => "listpack",
            Encoding::Table(_) => "hashtable",
        }
    }

    /// A deep copy (COPY).
    pub fn duplicate(&self) -> HashValue {
        self.clone()
    }

    /// Approximate bytes used (heap buffers by capacity, plus the struct).
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<HashValue>()
            + match &self.enc {
                Encoding::Listpack(l) => l.heap_bytes(),
                Encoding::Table(t) => std::mem::size_of::<FieldTable>() + t.heap_bytes(),
            }
    }

    /// The value of `field` (HGET).
    pub fn get(&self, field: &[u8]) -> Option<ValueRef<'_>> {
        match &self.enc {
            Encoding::Listpack(l) => l.find(field).map(|(_, p)| p.value.value()),
            Encoding::Table(t) => t.get(field).map(ValueRef::bytes),
        }
    }

    /// Starts loading what a field lookup reads first (a `listpack`'s
    /// first cache lines; nothing for a `hashtable`, whose lookup goes
    /// straight to one bucket). Changes nothing.
    #[inline]
    pub fn prefetch(&self) {
        if let Encoding::Listpack(l) = &self.enc {
            super::prefetch::read_bytes(l.bytes.as_ptr(), l.bytes.len(), 4);
        }
    }

    /// Whether `field` is in the hash (HEXISTS).
    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Length of the value of `field`, 0 when absent (HSTRLEN).
    pub fn strlen(&self, field: &[u8]) -> usize {
        self.get(field).map_or(0, |v| v.len())
    }

    /// Sets `field` to `value`; returns whether the field is new (HSET).
    /// A `listpack` becomes a `hashtable` first when `field` or `value` is
    /// longer than `hash-max-listpack-value` (or the buffer would pass
    /// 1 GiB), and afterwards when it holds more than
    /// `hash-max-listpack-entries` fields.
    pub fn set(&mut self, field: &[u8], value: &[u8], limits: HashLimits) -> bool {
        if let Encoding::Listpack(l) = &self.enc {
            let too_long =
                field.len() > limits.max_listpack_value || value.len() > limits.max_listpack_value;
            let too_big = l
                .heap_bytes()
                .saturating_add(field.len())
                .saturating_add(value.len())
                > LISTPACK_MAX_SAFETY_SIZE;
            if too_long || too_big {
                self.convert_to_hashtable(1);
            }
        }
        let (added, over) = match &mut self.enc {
            Encoding::Listpack(l) => {
                let added = l.set(field, value);
                (added, l.len() > limits.max_listpack_entries)
            }
            Encoding::Table(t) => (t.set(field, value), false),
        };
        if over {
            self.convert_to_hashtable(0);
        }
        added
    }

    /// Sets `field` only if it is absent; returns whether it was set
    /// (HSETNX). An existing field leaves the hash untouched, encoding
    /// included, as in Redis.
    pub fn set_nx(&mut self, field: &[u8], value: &[u8], limits: HashLimits) -> bool {
        if self.contains(field) {
            return false;
        }
        self.set(field, value, limits)
    }

    /// Removes `field`; returns whether it was there (HDEL). The encoding
    /// stays what it was.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match &mut self.enc {
            Encoding::Listpack(l) => l.remove(field),
            Encoding::Table(t) => t.remove(field),
        }
    }

    /// Adds `incr` to the integer value of `field` (an absent field counts
    /// as 0) and returns the new value (HINCRBY). Nothing changes on error.
    pub fn incr_by(
        &mut self,
        field: &[u8],
        incr: i64,
        limits: HashLimits,
    ) -> Result<i64, HashError> {
        if let Encoding::Listpack(l) = &mut self.enc {
            if let Some(done) = l.incr_in_place(field, incr) {
                return done;
            }
        }
        let old = match self.get(field) {
            Some(v) => parse_i64(&v).ok_or(HashError::NotAnInteger)?,
            None => 0,
        };
        let new = old.checked_add(incr).ok_or(HashError::Overflow)?;
        self.set(field, itoa::Buffer::new().format(new).as_bytes(), limits);
        Ok(new)
    }

    /// Adds `incr` to the number in `field` (an absent field counts as 0),
    /// stores the sum as [`HashFloat::format`] writes it and returns those
    /// bytes (HINCRBYFLOAT's reply). Nothing changes on error. Checking that
    /// `incr` itself is a finite number is the caller's (it is an argument).
    pub fn incr_by_float<F: HashFloat>(
        &mut self,
        field: &[u8],
        incr: F,
        limits: HashLimits,
    ) -> Result<Vec<u8>, HashError> {
        let old = match self.get(field) {
            Some(v) => F::parse(&v).ok_or(HashError::NotAFloat)?,
            None => F::zero(),
        };
        let sum = old.add(incr);
        if !sum.is_finite() {
            return Err(HashError::NanOrInfinity);
        }
        let bytes = sum.format();
        self.set(field, &bytes, limits);
        Ok(bytes)
    }

    /// The one place a `listpack` becomes a `hashtable` (room is made for
    /// `extra` more fields).
    fn convert_to_hashtable(&mut self, extra: usize) {
        let Encoding::Listpack(l) = &self.enc else {
            return;
        };
        // A table entry's two length prefixes take at most one byte more
        // than the pair's header would with the field's bytes in it.
        let arena = l
            .iter()
            .map(|(f, v)| pair_len(FieldAs::Bytes, f, &v) + 1)
            .sum();
        let mut table = FieldTable::with_capacity(l.len() + extra, arena);
        for (f, v) in l.iter() {
            table.set(f, &v);
        }
        self.enc = Encoding::Table(Box::new(table));
    }

    /// Every (field, value) pair: insertion order for a `listpack`, table
    /// order for a `hashtable` (HGETALL order).
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            inner: match &self.enc {
                Encoding::Listpack(l) => IterInner::Listpack(l.iter()),
                Encoding::Table(t) => IterInner::Table(t.iter()),
            },
        }
    }

    /// Every field, in [`HashValue::iter`] order (HKEYS).
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.iter().map(|(f, _)| f)
    }

    /// Every value, in [`HashValue::iter`] order (HVALS).
    pub fn values(&self) -> impl Iterator<Item = ValueRef<'_>> + '_ {
        self.iter().map(|(_, v)| v)
    }

    /// One (field, value) pair chosen uniformly at random (HRANDFIELD
    /// without a count).
    pub fn random_field<R: Rng + ?Sized>(&self, rng: &mut R) -> Option<(&[u8], ValueRef<'_>)> {
        match &self.enc {
            Encoding::Listpack(l) => {
                if l.len() == 0 {
                    return None;
                }
                l.iter().nth(rng.random_range(0..l.len()))
            }
            Encoding::Table(t) => t.random_slot(rng).map(|(_, f, v)| (f, ValueRef::bytes(v))),
        }
    }

    /// `count` distinct pairs chosen at random (HRANDFIELD with a positive
    /// count), or every pair in [`HashValue::iter`] order when the hash has
    /// no more than `count`. A `listpack` gives its picks in its own order.
    pub fn random_distinct<R: Rng + ?Sized>(
        &self,
        count: usize,
        rng: &mut R,
    ) -> Vec<(&[u8], ValueRef<'_>)> {
        let len = self.len();
        if count >= len {
            return self.iter().collect();
        }
        match &self.enc {
            Encoding::Listpack(l) => {
                let mut picks = index::sample(rng, len, count).into_vec();
                picks.sort_unstable();
                let mut picks = picks.into_iter().peekable();
                let mut out = Vec::with_capacity(count);
                for (i, pair) in l.iter().enumerate() {
                    if picks.peek() == Some(&i) {
                        picks.next();
                        out.push(pair);
                    }
                }
                out
            }
            // Many of the pairs: shuffle them all; the shuffled part is a
            // uniform pick.
            Encoding::Table(t) if count.saturating_mul(3) > len => {
                let mut all: Vec<(&[u8], &[u8])> = t.iter().collect();
                let (picked, _) = all.partial_shuffle(rng, count);
                picked
                    .iter()
                    .map(|&(f, v)| (f, ValueRef::bytes(v)))
                    .collect()
            }
            // Few of them: draw slots until enough distinct ones came up.
            Encoding::Table(t) => {
                let mut slots = std::collections::HashSet::with_capacity(count);
                let mut out = Vec::with_capacity(count);
                while out.len() < count {
                    let Some((slot, f, v)) = t.random_slot(rng) else {
                        break;
                    };
                    if slots.insert(slot) {
                        out.push((f, ValueRef::bytes(v)));
                    }
                }
                out
            }
        }
    }

    /// Calls `emit` `count` times with a pair chosen uniformly at random
    /// each time, repeats allowed (HRANDFIELD with a negative count).
    /// Nothing is emitted for an empty hash.
    pub fn random_with_repeats<R: Rng + ?Sized>(
        &self,
        count: usize,
        rng: &mut R,
        mut emit: impl FnMut(&[u8], &[u8]),
    ) {
        match &self.enc {
            Encoding::Listpack(l) => {
                let all: Vec<(&[u8], ValueRef<'_>)> = l.iter().collect();
                if all.is_empty() {
                    return;
                }
                for _ in 0..count {
                    if let Some((f, v)) = all.get(rng.random_range(0..all.len())) {
                        emit(f, v);
                    }
                }
            }
            Encoding::Table(t) => {
                for _ in 0..count {
                    let Some((_, f, v)) = t.random_slot(rng) else {
                        return;
                    };
                    emit(f, v);
                }
            }
        }
    }

    /// One step of HSCAN: calls `emit` for the pairs of at least `count`
    /// buckets' worth (a hint, as in Redis) starting at `cursor`, and returns
    /// the next cursor (0 when the iteration is complete). A `listpack` is
    /// returned whole in one step, whatever the cursor. Every field present
    /// for a whole iteration is emitted at least once, even if the table
    /// grows or shrinks between steps (and a hash can only become a
    /// `hashtable` before a scan's first step: the `listpack` step ends it).
    pub fn scan(&self, cursor: u64, count: usize, mut emit: impl FnMut(&[u8], &[u8])) -> u64 {
        match &self.enc {
            Encoding::Listpack(l) => {
                l.iter().for_each(|(f, v)| emit(f, &v));
                0
            }
            Encoding::Table(t) => t.scan(cursor, count, emit),
        }
    }

    /// Starts a point-in-time capture of this hash walked in steps
    /// ([`HashValue::snapshot_step`]; see `engine::cow`). `None` (and
    /// nothing started) for a `listpack`: write that out whole.
    pub fn begin_snapshot(&mut self, counter: Arc<CowCounter>) -> Option<SharedArenaLog> {
        match &mut self.enc {
            Encoding::Table(t) => Some(t.capture.begin(t.arena.len(), counter)),
            Encoding::Listpack(_) => None,
        }
    }

    /// Whether this hash is the one `log` captures.
    pub fn is_captured_by(&self, log: &SharedArenaLog) -> bool {
        matches!(&self.enc, Encoding::Table(t) if t.capture.is(log))
    }

    /// One step of the capture: emits the point-in-time pairs among the
    /// next `budget` entries of the arena. True when the walk is over (the
    /// hash no longer carries the log; pairs saved early are in the log).
    pub fn snapshot_step(&mut self, budget: usize, emit: &mut dyn FnMut(&[u8], &[u8])) -> bool {
        match &mut self.enc {
            Encoding::Table(t) => ArenaCapture::step_of(&mut **t, budget, &mut |raw| {
                for_each_saved_pair(raw, &mut *emit)
            }),
            _ => true,
        }
    }

    /// Ends a capture now (the hash leaves the keyspace): what the walk
    /// has not read is saved in the log.
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

/// Calls `emit` on each (field, value) of raw `hashtable` entries, as a
/// capture reads or saves them.
pub fn for_each_saved_pair(raw: &[u8], emit: &mut dyn FnMut(&[u8], &[u8])) {
    let mut at = 0;
    while at < raw.len() {
        let pair = (|| {
            let fl = read_varint(raw, &mut at)?;
            let field = raw.get(at..at.checked_add(fl)?)?;
            at += fl;
            let vl = read_varint(raw, &mut at)?;
            let value = raw.get(at..at.checked_add(vl)?)?;
            at += vl;
            Some((field, value))
        })();
        match pair {
            Some((f, v)) => emit(f, v),
            None => return,
        }
    }
}

/// Iterator over a hash's (field, value) pairs; see [`HashValue::iter`].
pub struct Iter<'a> {
    inner: IterInner<'a>,
}

enum IterInner<'a> {
    Listpack(ListpackIter<'a>),
    Table(TableIter<'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], ValueRef<'a>);

    fn next(&mut self) -> Option<(&'a [u8], ValueRef<'a>)> {
        match &mut self.inner {
            IterInner::Listpack(i) => i.next(),
            IterInner::Table(i) => i.next().map(|(f, v)| (f, ValueRef::bytes(v))),
        }
    }
}

// ---------------------------------------------------------------------------
// lengths

/// Bytes of `n` as LEB128.
fn varint_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

/// Appends `n` as LEB128.
fn push_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n & 0x7f) as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Reads a LEB128 number at `*at`, moving `*at` past it.
fn read_varint(bytes: &[u8], at: &mut usize) -> Option<usize> {
    let mut n = 0usize;
    let mut shift = 0;
    loop {
        let b = *bytes.get(*at)?;
        *at += 1;
        if shift >= usize::BITS {
            return None;
        }
        n |= ((b & 0x7f) as usize) << shift;
        if b & 0x80 == 0 {
            return Some(n);
        }
        shift += 7;
    }
}

// ---------------------------------------------------------------------------
// listpack

/// Longest field a one-byte pair header holds.
const SHORT_FIELD_MAX: usize = 14;
/// Longest value a one-byte pair header holds.
const SHORT_VALUE_MAX: usize = 15;
/// The header byte of every other pair with the field's bytes: two LEB128
/// lengths follow it.
const LONG_PAIR: u8 = 0xF0;
/// Header bytes `NAMED_PAIR..=NAMED_PAIR + 9`: a pair whose field is a
/// shared name (`field_names`), whose one-byte id follows, and whose value
/// has `header - NAMED_PAIR` bytes.
const NAMED_PAIR: u8 = 0xF1;
/// Longest value a one-byte named-pair header holds.
const NAMED_VALUE_MAX: usize = (NAMED_INT - NAMED_PAIR - 1) as usize;
/// Header bytes `NAMED_INT..NAMED_INT + 4`: a named pair whose value is a
/// canonical integer (the bytes `itoa` writes for it), kept as 1, 2, 4 or 8
/// little-endian bytes (`header - NAMED_INT` picks the width from
/// [`INT_WIDTHS`]): `1700000123` takes 4 bytes instead of 10.
const NAMED_INT: u8 = 0xFB;
/// The widths an integer value is kept in, smallest first.
const INT_WIDTHS: [usize; 4] = [1, 2, 4, 8];
/// The header of every other named pair: the id, then the value's length
/// as LEB128.
const NAMED_LONG_PAIR: u8 = 0xFF;

/// How a pair's field is written: its bytes, or the id of a shared name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldAs {
    Bytes,
    Name(u8),
}

impl FieldAs {
    /// How to write `field` in a pair written now (this counts as an offer
    /// of the name to the shared dictionary; see `field_names`). Decided
    /// once per write, since the answer can change between two calls.
    fn choose(field: &[u8]) -> FieldAs {
        match field_names::offer(field) {
            Some(id) => FieldAs::Name(id),
            None => FieldAs::Bytes,
        }
    }
}

/// Bytes of the header of a pair with these lengths and its field written
/// as its bytes.
fn header_len(field_len: usize, value_len: usize) -> usize {
    if field_len <= SHORT_FIELD_MAX && value_len <= SHORT_VALUE_MAX {
        1
    } else {
        1 + varint_len(field_len) + varint_len(value_len)
    }
}

/// The integer a value is kept as in a named pair, with the index of its
/// width in [`INT_WIDTHS`]: only when `value` is exactly what `itoa`
/// writes for it (no sign but `-`, no leading zero, not `-0`), so that
/// writing it back gives the same bytes.
fn int_value(value: &[u8]) -> Option<(i64, usize)> {
    let digits = value.strip_prefix(b"-").unwrap_or(value);
    let canonical = match digits {
        // `0`, but not `-0`.
        [b'0'] => digits.len() == value.len(),
        [first, rest @ ..] => (b'1'..=b'9').contains(first) && rest.iter().all(u8::is_ascii_digit),
        [] => false,
    };
    if !canonical || value.len() > 20 {
        return None;
    }
    // Digits only: this fails only past the i64 range.
    let n = parse_i64(value)?;
    Some((n, int_width(n)))
}

/// The index in [`INT_WIDTHS`] of the narrowest width that holds `n`.
fn int_width(n: i64) -> usize {
    if i8::try_from(n).is_ok() {
        0
    } else if i16::try_from(n).is_ok() {
        1
    } else if i32::try_from(n).is_ok() {
        2
    } else {
        3
    }
}

/// How a pair's value is written: an integer of a named pair, else bytes.
fn value_int(how: FieldAs, value: &[u8]) -> Option<(i64, usize)> {
    match how {
        FieldAs::Name(_) => int_value(value),
        FieldAs::Bytes => None,
    }
}

/// Bytes a pair takes in a listpack.
fn pair_len(how: FieldAs, field: &[u8], value: &[u8]) -> usize {
    NewPair::new(how, field, value).len()
}

/// A pair about to be written, with how its field and value are written
/// decided once.
struct NewPair<'a> {
    how: FieldAs,
    /// The value as an integer and its width, when kept so.
    int: Option<(i64, usize)>,
    field: &'a [u8],
    value: &'a [u8],
}

impl<'a> NewPair<'a> {
    fn new(how: FieldAs, field: &'a [u8], value: &'a [u8]) -> NewPair<'a> {
        NewPair {
            how,
            int: value_int(how, value),
            field,
            value,
        }
    }

    /// Bytes the pair takes.
    fn len(&self) -> usize {
        let vl = self.value.len();
        match (self.how, self.int) {
            (FieldAs::Bytes, _) => header_len(self.field.len(), vl) + self.field.len() + vl,
            (FieldAs::Name(_), Some((_, w))) => 2 + INT_WIDTHS[w],
            (FieldAs::Name(_), None) if vl <= NAMED_VALUE_MAX => 2 + vl,
            (FieldAs::Name(_), None) => 2 + varint_len(vl) + vl,
        }
    }

    /// Appends the pair: its header, the field (or its name's id), the
    /// value.
    fn push(&self, out: &mut Vec<u8>) {
        push_pair(out, self.how, self.int, self.field, self.value);
    }
}

/// Appends a pair: its header, the field (or its name's id), the value
/// (`int`: as [`value_int`] gives it for them).
fn push_pair(
    out: &mut Vec<u8>,
    how: FieldAs,
    int: Option<(i64, usize)>,
    field: &[u8],
    value: &[u8],
) {
    let (fl, vl) = (field.len(), value.len());
    match how {
        FieldAs::Bytes => {
            if fl <= SHORT_FIELD_MAX && vl <= SHORT_VALUE_MAX {
                out.push(((fl << 4) | vl) as u8);
            } else {
                out.push(LONG_PAIR);
                push_varint(out, fl);
                push_varint(out, vl);
            }
            out.extend_from_slice(field);
        }
        FieldAs::Name(id) => match int {
            Some((n, w)) => {
                out.push(NAMED_INT + w as u8);
                out.push(id);
                out.extend_from_slice(&n.to_le_bytes()[..INT_WIDTHS[w]]);
                return;
            }
            None if vl <= NAMED_VALUE_MAX => {
                out.push(NAMED_PAIR + vl as u8);
                out.push(id);
            }
            None => {
                out.push(NAMED_LONG_PAIR);
                out.push(id);
                push_varint(out, vl);
            }
        },
    }
    out.extend_from_slice(value);
}

/// Reads a little-endian signed integer of `bytes.len()` bytes (1 to 8).
fn read_int(bytes: &[u8]) -> i64 {
    let mut buf = [0u8; 8];
    buf[..bytes.len()].copy_from_slice(bytes);
    // Sign-extend from the top byte read.
    let shift = 64 - 8 * bytes.len() as u32;
    (i64::from_le_bytes(buf) << shift) >> shift
}

/// A field's value as a hash gives it out: bytes in the hash, or an integer
/// kept in binary and written out here (so it reads as the bytes it was
/// set with). Dereferences to the bytes.
#[derive(Clone, Copy)]
pub struct ValueRef<'a> {
    repr: ValueRepr<'a>,
}

#[derive(Clone, Copy)]
enum ValueRepr<'a> {
    Bytes(&'a [u8]),
    Int { text: [u8; 20], len: u8 },
}

impl<'a> ValueRef<'a> {
    fn bytes(b: &'a [u8]) -> ValueRef<'a> {
        ValueRef {
            repr: ValueRepr::Bytes(b),
        }
    }

    fn int(n: i64) -> ValueRef<'a> {
        let mut text = [0u8; 20];
        let mut buf = itoa::Buffer::new();
        let s = buf.format(n).as_bytes();
        text[..s.len()].copy_from_slice(s);
        ValueRef {
            repr: ValueRepr::Int {
                text,
                len: s.len() as u8,
            },
        }
    }
}

impl std::ops::Deref for ValueRef<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.repr {
            ValueRepr::Bytes(b) => b,
            ValueRepr::Int { text, len } => text.get(..*len as usize).unwrap_or(&[]),
        }
    }
}

impl AsRef<[u8]> for ValueRef<'_> {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl fmt::Debug for ValueRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

impl PartialEq for ValueRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for ValueRef<'_> {}

/// A value as a listpack holds it (an integer is written out only when
/// given out, as a [`ValueRef`]).
#[derive(Clone, Copy)]
enum RawValue<'a> {
    Bytes(&'a [u8]),
    Int(i64),
}

impl<'a> RawValue<'a> {
    fn value(self) -> ValueRef<'a> {
        match self {
            RawValue::Bytes(b) => ValueRef::bytes(b),
            RawValue::Int(n) => ValueRef::int(n),
        }
    }
}

/// One pair of a listpack, as found at a position.
struct PairAt<'a> {
    field: &'a [u8],
    /// How the field is written.
    how: FieldAs,
    value: RawValue<'a>,
    /// Where the value starts in the buffer.
    value_at: usize,
    /// Where the next pair starts.
    end: usize,
}

/// The pair starting at `start`, if one does.
#[inline]
fn pair_at(bytes: &[u8], start: usize) -> Option<PairAt<'_>> {
    let h = *bytes.get(start)?;
    let mut at = start + 1;
    if h >= NAMED_PAIR {
        let id = *bytes.get(at)?;
        let field = field_names::name(id)?;
        at += 1;
        if (NAMED_INT..NAMED_LONG_PAIR).contains(&h) {
            let end = at.checked_add(*INT_WIDTHS.get((h - NAMED_INT) as usize)?)?;
            return Some(PairAt {
                field,
                how: FieldAs::Name(id),
                value: RawValue::Int(read_int(bytes.get(at..end)?)),
                value_at: at,
                end,
            });
        }
        let vl = if h == NAMED_LONG_PAIR {
            read_varint(bytes, &mut at)?
        } else {
            (h - NAMED_PAIR) as usize
        };
        let end = at.checked_add(vl)?;
        return Some(PairAt {
            field,
            how: FieldAs::Name(id),
            value: RawValue::Bytes(bytes.get(at..end)?),
            value_at: at,
            end,
        });
    }
    let (fl, vl) = if h < LONG_PAIR {
        ((h >> 4) as usize, (h & 0x0f) as usize)
    } else {
        let fl = read_varint(bytes, &mut at)?;
        (fl, read_varint(bytes, &mut at)?)
    };
    let value_at = at.checked_add(fl)?;
    let end = value_at.checked_add(vl)?;
    Some(PairAt {
        field: bytes.get(at..value_at)?,
        how: FieldAs::Bytes,
        value: RawValue::Bytes(bytes.get(value_at..end)?),
        value_at,
        end,
    })
}

/// The `listpack` encoding: pairs back to back in a buffer of exactly their
/// size, each a header then the field's bytes then the value's. The header
/// is one byte (field length in the high nibble, value length in the low
/// one) when the field has at most 14 bytes and the value at most 15, so a
/// `name` → `alice` pair takes 10 bytes (Redis's listpack takes 13: a
/// length byte and a back-length byte per string); longer pairs take
/// [`LONG_PAIR`] and two LEB128 lengths. A field whose name is shared
/// (`field_names`: names many hashes repeat) is written as a one-byte id
/// instead of its bytes, after a header byte of its own ([`NAMED_PAIR`]
/// plus the value's length, [`NAMED_INT`] plus the width of a value kept
/// as an integer, or [`NAMED_LONG_PAIR`] and a LEB128 length): `country` →
/// `SE` then takes 4 bytes, `created` → `1700000123` 6, and the 10-field
/// profiles of `benches/key_memory.sh` about 87 bytes (a 96-byte
/// allocation) instead of 146 (160). Every change reallocates the buffer
/// to its new size, as Redis's listpack does.
#[derive(Debug, Clone, Default)]
struct Listpack {
    bytes: Box<[u8]>,
    /// Number of pairs; below 2^30 since the buffer is (see
    /// [`LISTPACK_MAX_SAFETY_SIZE`]) and a pair takes at least one byte.
    len: u32,
}

impl Listpack {
    fn len(&self) -> usize {
        self.len as usize
    }

    fn heap_bytes(&self) -> usize {
        self.bytes.len()
    }

    fn iter(&self) -> ListpackIter<'_> {
        ListpackIter {
            bytes: &self.bytes,
            at: 0,
        }
    }

    /// The pair whose field is `field`, and where it starts. Pairs are
    /// stepped over without decoding them whole (only a long pair with its
    /// field's bytes is).
    fn find(&self, field: &[u8]) -> Option<(usize, PairAt<'_>)> {
        let bytes = &self.bytes[..];
        // A named pair is `field`'s when its id is `field`'s: one byte to
        // compare instead of a name to fetch and compare (a name has one
        // id for good, so one without an id now has no pair here).
        let want = field_names::lookup(field);
        let mut start = 0;
        while let Some(&h) = bytes.get(start) {
            let (found, next) = if h < LONG_PAIR {
                let (fl, vl) = ((h >> 4) as usize, (h & 0x0f) as usize);
                let f = bytes.get(start + 1..start + 1 + fl)?;
                (f == field, start + 1 + fl + vl)
            } else if (NAMED_PAIR..NAMED_INT).contains(&h) {
                let id = *bytes.get(start + 1)?;
                let vl = (h - NAMED_PAIR) as usize;
                (want == Some(id), start + 2 + vl)
            } else if (NAMED_INT..NAMED_LONG_PAIR).contains(&h) {
                let id = *bytes.get(start + 1)?;
                let w = *INT_WIDTHS.get((h - NAMED_INT) as usize)?;
                (want == Some(id), start + 2 + w)
            } else if h == NAMED_LONG_PAIR {
                let id = *bytes.get(start + 1)?;
                let mut at = start + 2;
                let vl = read_varint(bytes, &mut at)?;
                (want == Some(id), at.checked_add(vl)?)
            } else {
                let p = pair_at(bytes, start)?;
                (p.field == field, p.end)
            };
            if found {
                return pair_at(bytes, start).map(|p| (start, p));
            }
            start = next;
        }
        None
    }

    fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        let Some((start, p)) = self.find(field) else {
            let pair = NewPair::new(FieldAs::choose(field), field, value);
            let mut v = std::mem::take(&mut self.bytes).into_vec();
            v.reserve_exact(pair.len());
            pair.push(&mut v);
            self.bytes = v.into_boxed_slice();
            self.len += 1;
            return true;
        };
        let span = start..p.end;
        let same = NewPair::new(p.how, field, value);
        // Bytes of the same length again, or an integer of the same width:
        // same header, so the value is overwritten in place.
        let in_place = match (p.value, same.int) {
            (RawValue::Bytes(old), None) if old.len() == value.len() => Some(value),
            (RawValue::Int(_), Some((n, w))) if p.value_at + INT_WIDTHS[w] == span.end => {
                Some(&n.to_le_bytes()[..INT_WIDTHS[w]])
            }
            _ => None,
        };
        if let Some(new) = in_place {
            if let Some(dst) = self.bytes.get_mut(p.value_at..span.end) {
                dst.copy_from_slice(new);
            }
            return false;
        }
        // A shared name stays one; a field still in bytes is offered.
        let pair = match p.how {
            FieldAs::Bytes => match FieldAs::choose(field) {
                FieldAs::Bytes => same,
                named => NewPair::new(named, field, value),
            },
            FieldAs::Name(_) => same,
        };
        self.replace(span, &pair);
        false
    }

    /// HINCRBY of a field whose value is kept as an integer, when the sum
    /// keeps its width: one scan, and the sum written over the old value
    /// (what [`Listpack::set`] of its text would do). `None` when the field
    /// is absent, not kept as an integer, or the sum needs another width:
    /// the caller takes the general way.
    fn incr_in_place(&mut self, field: &[u8], incr: i64) -> Option<Result<i64, HashError>> {
        let (_, p) = self.find(field)?;
        let RawValue::Int(old) = p.value else {
            return None;
        };
        let Some(new) = old.checked_add(incr) else {
            return Some(Err(HashError::Overflow));
        };
        let w = INT_WIDTHS[int_width(new)];
        let span = p.value_at..p.end;
        if span.len() != w {
            return None;
        }
        self.bytes
            .get_mut(span)?
            .copy_from_slice(&new.to_le_bytes()[..w]);
        Some(Ok(new))
    }

    /// Rewrites the pair at `span` as `pair`, in one exactly sized new
    /// buffer.
    fn replace(&mut self, span: Range<usize>, pair: &NewPair<'_>) {
        let old = &self.bytes;
        let size = old.len() - span.len() + pair.len();
        let mut v = Vec::with_capacity(size);
        v.extend_from_slice(old.get(..span.start).unwrap_or(&[]));
        pair.push(&mut v);
        v.extend_from_slice(old.get(span.end..).unwrap_or(&[]));
        self.bytes = v.into_boxed_slice();
    }

    fn remove(&mut self, field: &[u8]) -> bool {
        let Some((start, p)) = self.find(field) else {
            return false;
        };
        let span = start..p.end;
        let mut v = std::mem::take(&mut self.bytes).into_vec();
        v.drain(span);
        // Shrinks the allocation to the new size.
        self.bytes = v.into_boxed_slice();
        self.len -= 1;
        true
    }
}

/// Iterator over a `listpack`'s pairs, in insertion order.
struct ListpackIter<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Iterator for ListpackIter<'a> {
    type Item = (&'a [u8], ValueRef<'a>);

    fn next(&mut self) -> Option<(&'a [u8], ValueRef<'a>)> {
        let p = pair_at(self.bytes, self.at)?;
        self.at = p.end;
        Some((p.field, p.value.value()))
    }
}

// ---------------------------------------------------------------------------
// hashtable

/// The hasher shared by every hash table; seeded at random once per process
/// (HSCAN cursors are only meaningful within one process, as in Redis).
fn hasher() -> &'static RandomState {
    static STATE: OnceLock<RandomState> = OnceLock::new();
    STATE.get_or_init(RandomState::new)
}

fn hash_of(field: &[u8]) -> u64 {
    hasher().hash_one(field)
}

/// The control byte of an occupied slot: the top 7 bits of the hash with the
/// high bit set (0 marks an empty slot).
fn tag_of(hash: u64) -> u8 {
    0x80 | (hash >> 57) as u8
}

const MIN_SLOTS: usize = 8;

/// Slots for `n` fields at a load of at most 4/5.
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

    /// Stores `off` in slot `i`; the caller has widened the offsets first
    /// if `off` needs more than 32 bits.
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

    fn widen(&mut self) {
        if let Offsets::Narrow(v) = self {
            *self = Offsets::Wide(v.iter().map(|&o| o.into()).collect());
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Offsets::Narrow(v) => v.capacity() * 4,
            Offsets::Wide(v) => v.capacity() * 8,
        }
    }
}

/// One entry of the arena, as found at an offset.
struct EntryAt<'a> {
    field: &'a [u8],
    value: &'a [u8],
    /// Where the value starts in the arena.
    value_at: usize,
    /// Bytes the whole entry takes.
    size: usize,
}

const NO_ENTRY: EntryAt<'static> = EntryAt {
    field: &[],
    value: &[],
    value_at: 0,
    size: 0,
};

/// The `hashtable` encoding. Entries (field length, field, value length,
/// value; lengths in LEB128) live back to back in one arena; an
/// open-addressing table with linear probing maps a field's hash to its
/// entry's offset. A slot costs 5 bytes (a control byte holding 7 hash bits,
/// so most probes never touch the arena, and a 4-byte offset) at a load
/// between 2/5 and 4/5, so a 10-byte field with a 10-byte value costs about
/// 30 bytes where Redis's dict entry and two sds strings take about 70.
///
/// A value of the same length is overwritten in place; any other new value
/// is appended as a new entry and the old one becomes a hole. Removal shifts
/// the following slots back (no tombstones) and leaves a hole too; the arena
/// is compacted once holes outweigh live bytes.
///
/// Each field sits in exactly one slot, so a random occupied slot is a
/// uniformly random field, and HSCAN walks "home" buckets (`hash & mask`) in
/// reverse-binary order like Redis's `dictScan`, which keeps its promise
/// across resizes.
#[derive(Debug, Clone)]
struct FieldTable {
    ctrl: Vec<u8>,
    offsets: Offsets,
    arena: Vec<u8>,
    len: usize,
    /// Bytes of the arena no slot points to.
    garbage: usize,
    /// While a snapshot walks the arena in steps (see `engine::cow`): no
    /// entry is written in place or moved, and removals are noted first.
    capture: ArenaCapture,
}

impl Drop for FieldTable {
    fn drop(&mut self) {
        ArenaCapture::finish_of(self);
    }
}

impl CapturedArena for FieldTable {
    fn capture_mut(&mut self) -> &mut ArenaCapture {
        &mut self.capture
    }
}

impl ArenaEntries for FieldTable {
    fn arena(&self) -> &[u8] {
        &self.arena
    }

    fn entry_size(&self, off: usize) -> usize {
        self.entry_at(off).size
    }

    fn is_live(&self, off: usize) -> bool {
        let field = self.entry_at(off).field;
        self.find(field, hash_of(field))
            .is_some_and(|slot| self.offsets.get(slot) == off)
    }
}

impl FieldTable {
    /// A table with room for `n` fields and `arena` bytes of entries.
    fn with_capacity(n: usize, arena: usize) -> FieldTable {
        let slots = slots_for(n);
        FieldTable {
            ctrl: vec![0; slots],
            offsets: Offsets::zeroed(slots, arena > u32::MAX as usize),
            arena: Vec::with_capacity(arena),
            len: 0,
            garbage: 0,
            capture: ArenaCapture::default(),
        }
    }

    fn mask(&self) -> usize {
        self.ctrl.len().wrapping_sub(1)
    }

    fn heap_bytes(&self) -> usize {
        self.ctrl.capacity() + self.offsets.heap_bytes() + self.arena.capacity()
    }

    /// The entry at arena offset `off`.
    fn entry_at(&self, off: usize) -> EntryAt<'_> {
        let arena = &self.arena;
        let read = || {
            let mut at = off;
            let fl = read_varint(arena, &mut at)?;
            let field = arena.get(at..at.checked_add(fl)?)?;
            at += fl;
            let vl = read_varint(arena, &mut at)?;
            let end = at.checked_add(vl)?;
            Some(EntryAt {
                field,
                value: arena.get(at..end)?,
                value_at: at,
                size: end - off,
            })
        };
        read().unwrap_or(NO_ENTRY)
    }

    fn entry_at_slot(&self, slot: usize) -> EntryAt<'_> {
        self.entry_at(self.offsets.get(slot))
    }

    fn home(&self, field: &[u8]) -> usize {
        hash_of(field) as usize & self.mask()
    }

    fn is_occupied(&self, slot: usize) -> bool {
        self.ctrl.get(slot).is_some_and(|&c| c != 0)
    }

    /// The slot holding `field`.
    fn find(&self, field: &[u8], hash: u64) -> Option<usize> {
        let mask = self.mask();
        let tag = tag_of(hash);
        let mut i = hash as usize & mask;
        loop {
            let c = *self.ctrl.get(i)?;
            if c == 0 {
                return None;
            }
            if c == tag && self.entry_at_slot(i).field == field {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    fn get(&self, field: &[u8]) -> Option<&[u8]> {
        let slot = self.find(field, hash_of(field))?;
        Some(self.entry_at_slot(slot).value)
    }

    /// Puts an arena offset into the first free slot from the hash's home.
    fn place(&mut self, hash: u64, off: usize) {
        let mask = self.mask();
        let mut i = hash as usize & mask;
        while self.is_occupied(i) {
            i = (i + 1) & mask;
        }
        if let Some(c) = self.ctrl.get_mut(i) {
            *c = tag_of(hash);
            self.offsets.set(i, off);
        }
    }

    /// Appends an entry to the arena; returns its offset. The arena grows by
    /// a quarter at a time, not double, to keep memory tight.
    fn push_entry(&mut self, field: &[u8], value: &[u8]) -> usize {
        let need = varint_len(field.len()) + field.len() + varint_len(value.len()) + value.len();
        if self.arena.capacity() - self.arena.len() < need {
            let extra = need.max(self.arena.len() / 4).max(64);
            self.arena.reserve_exact(extra);
        }
        let off = self.arena.len();
        push_varint(&mut self.arena, field.len());
        self.arena.extend_from_slice(field);
        push_varint(&mut self.arena, value.len());
        self.arena.extend_from_slice(value);
        if off > u32::MAX as usize {
            self.offsets.widen();
        }
        off
    }

    fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        let hash = hash_of(field);
        if let Some(slot) = self.find(field, hash) {
            let old = self.entry_at_slot(slot);
            let (value_at, old_len, old_size) = (old.value_at, old.value.len(), old.size);
            if old_len == value.len() && !self.capture.pins_arena() {
                if let Some(dst) = self.arena.get_mut(value_at..value_at + old_len) {
                    dst.copy_from_slice(value);
                }
            } else {
                self.capture.before_kill(self.offsets.get(slot), old_size);
                self.garbage += old_size;
                let off = self.push_entry(field, value);
                self.offsets.set(slot, off);
                self.compact_if_sparse();
            }
            return false;
        }
        if (self.len + 1) * 5 > self.ctrl.len() * 4 {
            self.resize(self.ctrl.len() * 2);
        }
        let off = self.push_entry(field, value);
        self.place(hash, off);
        self.len += 1;
        true
    }

    fn remove(&mut self, field: &[u8]) -> bool {
        let Some(mut hole) = self.find(field, hash_of(field)) else {
            return false;
        };
        let size = self.entry_at_slot(hole).size;
        self.capture.before_kill(self.offsets.get(hole), size);
        self.garbage += size;
        // Backward-shift deletion: pull later entries of the probe run into
        // the hole when their home allows it, so no tombstones are needed.
        let mask = self.mask();
        let mut j = (hole + 1) & mask;
        while let Some(&c) = self.ctrl.get(j).filter(|&&c| c != 0) {
            let home = self.home(self.entry_at_slot(j).field);
            // Whether `home` lies cyclically in (hole, j]: then the entry
            // cannot move to the hole.
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
        self.compact_if_sparse();
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
                let hash = hash_of(self.entry_at(off).field);
                self.place(hash, off);
            }
        }
    }

    /// Copies the live entries into a fresh arena, dropping the holes, once
    /// the holes are at least half of it.
    fn compact_if_sparse(&mut self) {
        if self.garbage < 64 || self.garbage * 2 <= self.arena.len() || self.capture.pins_arena() {
            return;
        }
        let mut arena = Vec::with_capacity(self.arena.len() - self.garbage);
        for i in 0..self.ctrl.len() {
            if self.is_occupied(i) {
                let off = self.offsets.get(i);
                let size = self.entry_at(off).size;
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

    /// A uniformly random occupied slot and its pair.
    fn random_slot<R: Rng + ?Sized>(&self, rng: &mut R) -> Option<(usize, &[u8], &[u8])> {
        if self.len == 0 {
            return None;
        }
        // The load is at least 1/8 (the table shrinks below that), so this
        // takes a few draws on average.
        loop {
            let i = rng.random_range(0..self.ctrl.len());
            if self.is_occupied(i) {
                let e = self.entry_at_slot(i);
                return Some((i, e.field, e.value));
            }
        }
    }

    /// Emits the pairs whose home bucket is `bucket`: they sit in the probe
    /// run that starts there.
    fn emit_bucket(&self, bucket: usize, emit: &mut impl FnMut(&[u8], &[u8])) {
        let mask = self.mask();
        let mut i = bucket;
        while self.is_occupied(i) {
            let e = self.entry_at_slot(i);
            if self.home(e.field) == bucket {
                emit(e.field, e.value);
            }
            i = (i + 1) & mask;
            if i == bucket {
                break;
            }
        }
    }

    fn scan(&self, cursor: u64, count: usize, mut emit: impl FnMut(&[u8], &[u8])) -> u64 {
        let mask = self.mask() as u64;
        let mut v = cursor;
        let mut emitted = 0usize;
        let mut buckets = count.saturating_mul(10).max(1);
        loop {
            self.emit_bucket((v & mask) as usize, &mut |f, val| {
                emitted += 1;
                emit(f, val)
            });
            // Increment the reversed cursor (Redis's dictScan order): the
            // buckets a step visits stay visited when the table doubles or
            // halves in between.
            v |= !mask;
            v = v.reverse_bits().wrapping_add(1).reverse_bits();
            buckets -= 1;
            if v == 0 || emitted >= count || buckets == 0 {
                return v;
            }
        }
    }
}

/// Iterator over a `hashtable`'s pairs, in slot order.
struct TableIter<'a> {
    table: &'a FieldTable,
    slot: usize,
}

impl<'a> Iterator for TableIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<(&'a [u8], &'a [u8])> {
        let t = self.table;
        while let Some(&c) = t.ctrl.get(self.slot) {
            self.slot += 1;
            if c != 0 {
                let e = t.entry_at_slot(self.slot - 1);
                return Some((e.field, e.value));
            }
        }
        None
    }
}

#[cfg(test)]
#[path = "hash_model_tests.rs"]
mod model_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use std::collections::{HashMap, HashSet};

    const DEFAULT: HashLimits = HashLimits {
        max_listpack_entries: DEFAULT_MAX_LISTPACK_ENTRIES,
        max_listpack_value: DEFAULT_MAX_LISTPACK_VALUE,
    };

    fn limits(entries: usize, value: usize) -> HashLimits {
        HashLimits {
            max_listpack_entries: entries,
            max_listpack_value: value,
        }
    }

    fn pairs(h: &HashValue) -> Vec<(Vec<u8>, Vec<u8>)> {
        h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect()
    }

    fn owned(list: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        list.iter()
            .map(|(f, v)| (f.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn listpack_keeps_insertion_order() {
        let mut h = HashValue::new();
        assert!(h.is_empty());
        assert!(h.set(b"name", b"alice", DEFAULT));
        assert!(h.set(b"age", b"31", DEFAULT));
        assert!(h.set(b"city", b"Lisbon", DEFAULT));
        // Overwritten: keeps its place, with a longer and a same-length value.
        assert!(!h.set(b"name", b"alexandra", DEFAULT));
        assert!(!h.set(b"age", b"32", DEFAULT));
        assert_eq!(h.encoding(), "listpack");
        assert_eq!(
            pairs(&h),
            owned(&[("name", "alexandra"), ("age", "32"), ("city", "Lisbon")])
        );
        assert!(h.remove(b"age"));
        assert!(!h.remove(b"age"));
        assert!(h.set(b"age", b"33", DEFAULT));
        assert_eq!(
            pairs(&h),
            owned(&[("name", "alexandra"), ("city", "Lisbon"), ("age", "33")])
        );
        let keys: Vec<&[u8]> = h.keys().collect();
        assert_eq!(keys, [&b"name"[..], b"city", b"age"]);
        let values: Vec<Vec<u8>> = h.values().map(|v| v.to_vec()).collect();
        assert_eq!(values, [&b"alexandra"[..], b"Lisbon", b"33"]);
        assert_eq!(h.get(b"city").as_deref(), Some(&b"Lisbon"[..]));
        assert_eq!(h.get(b"nope"), None);
        assert_eq!(h.strlen(b"name"), 9);
        assert_eq!(h.strlen(b"nope"), 0);
        assert!(h.contains(b"age") && !h.contains(b"ag"));
        assert_eq!(h.len(), 3);
    }

    #[test]
    fn listpack_headers_short_and_long() {
        // 14/15 bytes fit the one-byte header; 15/16 take the long one.
        let mut h = HashValue::new();
        let cases: [(usize, usize); 6] = [(0, 0), (14, 15), (15, 15), (14, 16), (64, 64), (1, 0)];
        for (i, &(fl, vl)) in cases.iter().enumerate() {
            let mut f = vec![b'f'; fl];
            if let Some(first) = f.first_mut() {
                *first = b'0' + i as u8;
            }
            let v = vec![b'v'; vl];
            assert!(h.set(&f, &v, DEFAULT), "{fl}/{vl}");
            assert_eq!(h.get(&f).as_deref(), Some(v.as_slice()));
        }
        assert_eq!(h.len(), cases.len());
        assert_eq!(h.encoding(), "listpack");
        // Grow a short value into a long one and back: the header changes.
        let f = [b"1".as_slice(), &[b'f'; 13]].concat();
        let long = vec![b'x'; 40];
        assert!(!h.set(&f, &long, DEFAULT));
        assert_eq!(h.get(&f).as_deref(), Some(long.as_slice()));
        assert!(!h.set(&f, b"y", DEFAULT));
        assert_eq!(h.get(&f).as_deref(), Some(&b"y"[..]));
        assert_eq!(h.len(), cases.len());
        let Encoding::Listpack(l) = &h.enc else {
            panic!("listpack expected");
        };
        let want: usize = h
            .iter()
            .map(|(f, v)| {
                let how = field_names::lookup(f).map_or(FieldAs::Bytes, FieldAs::Name);
                pair_len(how, f, &v)
            })
            .sum();
        assert_eq!(l.heap_bytes(), want);
    }

    #[test]
    fn converts_on_entries_past_the_limit() {
        let lim = limits(3, 64);
        let mut h = HashValue::new();
        for f in ["a", "b", "c"] {
            h.set(f.as_bytes(), b"1", lim);
        }
        assert_eq!(h.encoding(), "listpack");
        // An update at the limit does not convert.
        h.set(b"c", b"2", lim);
        assert_eq!(h.encoding(), "listpack");
        h.set(b"d", b"1", lim);
        assert_eq!(h.encoding(), "hashtable");
        // Never back, even when it shrinks.
        for f in ["a", "b", "c"] {
            assert!(h.remove(f.as_bytes()));
        }
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(pairs(&h), owned(&[("d", "1")]));
        let mut z = HashValue::new();
        z.set(b"a", b"1", limits(0, 64));
        assert_eq!(z.encoding(), "hashtable");
    }

    #[test]
    fn converts_on_long_field_or_value() {
        for (f, v) in [
            (vec![b'f'; 65], b"v".to_vec()),
            (b"f".to_vec(), vec![b'v'; 65]),
        ] {
            let mut h = HashValue::new();
            h.set(b"x", b"1", DEFAULT);
            h.set(&[b'a'; 64], &[b'b'; 64], DEFAULT);
            assert_eq!(h.encoding(), "listpack");
            assert!(h.set(&f, &v, DEFAULT));
            assert_eq!(h.encoding(), "hashtable");
            assert_eq!(h.get(&f).as_deref(), Some(v.as_slice()));
            assert_eq!(h.get(b"x").as_deref(), Some(&b"1"[..]));
            assert_eq!(h.len(), 3);
        }
    }

    #[test]
    fn set_nx_on_existing_field_changes_nothing() {
        let mut h = HashValue::new();
        h.set(b"f", b"1", DEFAULT);
        assert!(!h.set_nx(b"f", &[b'v'; 100], DEFAULT));
        assert_eq!(h.encoding(), "listpack");
        assert_eq!(h.get(b"f").as_deref(), Some(&b"1"[..]));
        assert!(h.set_nx(b"g", &[b'v'; 100], DEFAULT));
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.strlen(b"g"), 100);
    }

    #[test]
    fn incr_by_follows_hincrby() {
        let mut h = HashValue::new();
        assert_eq!(h.incr_by(b"n", 5, DEFAULT), Ok(5));
        assert_eq!(h.incr_by(b"n", -7, DEFAULT), Ok(-2));
        assert_eq!(h.get(b"n").as_deref(), Some(&b"-2"[..]));
        for bad in [
            "",
            " 1",
            "1 ",
            "+1",
            "01",
            "-0",
            "1.0",
            "abc",
            "9223372036854775808",
        ] {
            h.set(b"b", bad.as_bytes(), DEFAULT);
            assert_eq!(
                h.incr_by(b"b", 1, DEFAULT),
                Err(HashError::NotAnInteger),
                "{bad}"
            );
            assert_eq!(h.get(b"b").as_deref(), Some(bad.as_bytes()));
        }
        h.set(b"m", b"9223372036854775807", DEFAULT);
        assert_eq!(h.incr_by(b"m", 1, DEFAULT), Err(HashError::Overflow));
        assert_eq!(h.incr_by(b"m", 0, DEFAULT), Ok(i64::MAX));
        h.set(b"m", b"-9223372036854775808", DEFAULT);
        assert_eq!(h.incr_by(b"m", -1, DEFAULT), Err(HashError::Overflow));
        assert_eq!(h.incr_by(b"m", i64::MAX, DEFAULT), Ok(-1));
        assert_eq!(
            HashError::NotAnInteger.to_string(),
            "ERR hash value is not an integer"
        );
        assert_eq!(
            HashError::Overflow.to_string(),
            "ERR increment or decrement would overflow"
        );
        // A long field converts when the increment is stored, as in Redis.
        let long = vec![b'k'; 65];
        assert_eq!(h.incr_by(&long, 1, DEFAULT), Ok(1));
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.incr_by(&long, 1, DEFAULT), Ok(2));
    }

    #[test]
    fn incr_by_float_follows_hincrbyfloat() {
        let mut h = HashValue::new();
        assert_eq!(h.incr_by_float(b"x", 10.5, DEFAULT), Ok(b"10.5".to_vec()));
        assert_eq!(h.incr_by_float(b"x", 1.5, DEFAULT), Ok(b"12".to_vec()));
        assert_eq!(h.get(b"x").as_deref(), Some(&b"12"[..]));
        h.set(b"e", b"5.0e3", DEFAULT);
        assert_eq!(h.incr_by_float(b"e", 200.0, DEFAULT), Ok(b"5200".to_vec()));
        h.set(b"i", b"-1", DEFAULT);
        assert_eq!(h.incr_by_float(b"i", 1.0, DEFAULT), Ok(b"0".to_vec()));
        for bad in ["", " 1", "1 ", "abc", "nan", "1e400", "1.5x"] {
            h.set(b"b", bad.as_bytes(), DEFAULT);
            assert_eq!(
                h.incr_by_float(b"b", 1.0, DEFAULT),
                Err(HashError::NotAFloat),
                "{bad}"
            );
            assert_eq!(h.get(b"b").as_deref(), Some(bad.as_bytes()));
        }
        h.set(b"big", b"1.7e308", DEFAULT);
        assert_eq!(
            h.incr_by_float(b"big", 1.7e308, DEFAULT),
            Err(HashError::NanOrInfinity)
        );
        assert_eq!(h.get(b"big").as_deref(), Some(&b"1.7e308"[..]));
        h.set(b"inf", b"inf", DEFAULT);
        assert_eq!(
            h.incr_by_float(b"inf", 1.0, DEFAULT),
            Err(HashError::NanOrInfinity)
        );
        assert_eq!(
            HashError::NanOrInfinity.to_string(),
            "ERR increment would produce NaN or Infinity"
        );
        assert_eq!(
            HashError::NotAFloat.to_string(),
            "ERR hash value is not a float"
        );
    }

    #[test]
    fn f64_format_is_fixed_17_without_trailing_zeros() {
        let cases: [(f64, &str); 9] = [
            (0.0, "0"),
            (-0.0, "0"),
            (-1e-30, "0"),
            (3.0, "3"),
            (-2.5, "-2.5"),
            (0.1, "0.10000000000000001"),
            (1e20, "100000000000000000000"),
            (1.5e-7, "0.00000015"),
            (123.456, "123.45600000000000307"),
        ];
        for (x, want) in cases {
            assert_eq!(
                String::from_utf8(x.format()).ok().as_deref(),
                Some(want),
                "{x}"
            );
        }
    }

    /// glibc's `%.17f` for a double.
    fn glibc_fixed17(x: f64) -> Vec<u8> {
        let mut buf = vec![0u8; 400];
        // SAFETY: the buffer is writable for its length, the format string
        // is NUL-terminated and takes one double.
        let n = unsafe { libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%.17f".as_ptr(), x) };
        buf.truncate(usize::try_from(n).unwrap_or(0).min(buf.len()));
        buf
    }

    #[test]
    fn f64_format_matches_glibc_rounding() {
        let mut rng = StdRng::seed_from_u64(11);
        let mut xs: Vec<f64> = vec![2f64.powi(-18), 2f64.powi(-19) * 3.0, 0.5, 1e-17, 5e-18];
        for _ in 0..2000 {
            let bits: u64 = rng.random();
            let x = f64::from_bits(bits);
            if x.is_finite() && x.abs() < 1e40 {
                xs.push(x);
            }
            xs.push(rng.random_range(-1e6..1e6));
            xs.push(rng.random_range(0..1u64 << 20) as f64 / (1u64 << 20) as f64);
        }
        for x in xs {
            let mut want = glibc_fixed17(x);
            // The same trimming as Redis's ld2string.
            while want.last() == Some(&b'0') {
                want.pop();
            }
            if want.last() == Some(&b'.') {
                want.pop();
            }
            if want == b"-0" {
                want = b"0".to_vec();
            }
            assert_eq!(x.format(), want, "{x:e}");
        }
    }

    #[test]
    fn table_grows_shrinks_and_compacts() {
        let mut h = HashValue::new();
        let n = 5000;
        for i in 0..n {
            assert!(h.set(
                format!("user:{i}").as_bytes(),
                format!("{i}").as_bytes(),
                DEFAULT
            ));
        }
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.len(), n);
        // Same-length and new-length overwrites.
        for i in 0..n {
            let f = format!("user:{i}");
            let v = if i % 2 == 0 {
                format!("{}", i % 10)
            } else {
                format!("v{i}-{i}")
            };
            assert!(!h.set(f.as_bytes(), v.as_bytes(), DEFAULT));
        }
        let full = h.memory_usage();
        for i in (0..n).filter(|i| i % 7 != 0) {
            assert!(h.remove(format!("user:{i}").as_bytes()));
        }
        assert_eq!(h.len(), n.div_ceil(7));
        for i in 0..n {
            let got = h.get(format!("user:{i}").as_bytes());
            if i % 7 == 0 {
                let v = if i % 2 == 0 {
                    format!("{}", i % 10)
                } else {
                    format!("v{i}-{i}")
                };
                assert_eq!(got.as_deref(), Some(v.as_bytes()));
            } else {
                assert_eq!(got, None);
            }
        }
        // Slots shrink and the arena is compacted: a seventh of the fields
        // left, in well under a quarter of the memory.
        let small = h.memory_usage();
        assert!(small * 4 < full, "{small} of {full}");
    }

    #[test]
    fn table_memory_per_field_is_small() {
        let mut h = HashValue::new();
        let n = 100_000;
        for i in 0..n {
            h.set(
                format!("field:{i:06}").as_bytes(),
                format!("value:{i:06}").as_bytes(),
                DEFAULT,
            );
        }
        // 12-byte fields and values: Redis's dict takes about 72 bytes a
        // field (24 entry, two 16-byte sds allocations, 8-16 of buckets).
        let per_field = h.memory_usage() as f64 / n as f64;
        assert!(per_field < 40.0, "{per_field}");
    }

    #[test]
    fn listpack_memory_is_exact() {
        let mut h = HashValue::new();
        for i in 0..10 {
            h.set(
                format!("f{i}").as_bytes(),
                format!("value{i}").as_bytes(),
                DEFAULT,
            );
        }
        // One header byte + 2 + 6 per pair (or a header, an id and 6 for a
        // field whose name is shared: other tests share the dictionary), and
        // the struct.
        let pairs: usize = (0..10)
            .map(|i| match field_names::lookup(format!("f{i}").as_bytes()) {
                Some(_) => 8,
                None => 9,
            })
            .sum();
        assert_eq!(h.memory_usage(), std::mem::size_of::<HashValue>() + pairs);
        assert!(std::mem::size_of::<HashValue>() <= 24);
    }

    #[test]
    fn shared_field_names_take_a_byte() {
        let fields: Vec<Vec<u8>> = ["name", "country", "avatar"]
            .iter()
            .map(|f| format!("hash::test::shared::{f}").into_bytes())
            .collect();
        // The first is stored as bytes, then its name becomes shared: the
        // pair keeps its bytes until rewritten, and stays one field.
        let mut h = HashValue::new();
        h.set(&fields[0], b"alice", DEFAULT);
        for f in &fields {
            assert!(field_names::admit(f).is_some());
        }
        let long = vec![b'u'; 40];
        assert!(!h.set(&fields[0], b"bob", DEFAULT));
        assert!(h.set(&fields[1], b"SE", DEFAULT));
        assert!(h.set(&fields[2], &long, DEFAULT));
        let want = |h: &HashValue| {
            assert_eq!(h.get(&fields[0]).as_deref(), Some(&b"bob"[..]));
            assert_eq!(h.get(&fields[1]).as_deref(), Some(&b"SE"[..]));
            assert_eq!(h.get(&fields[2]).as_deref(), Some(long.as_slice()));
            let mut order: Vec<&[u8]> = h.keys().collect();
            if h.encoding() == "hashtable" {
                order.sort_unstable_by_key(|f| fields.iter().position(|g| g == f));
            }
            assert_eq!(
                order,
                fields.iter().map(|f| f.as_slice()).collect::<Vec<_>>()
            );
        };
        want(&h);
        // Header and id, then the value; a value past 13 bytes takes its
        // length as LEB128.
        assert_eq!(
            h.memory_usage(),
            size_of::<HashValue>() + (2 + 3) + (2 + 2) + (3 + 40)
        );
        // Same length: in place. Other lengths: rewritten, short and long.
        assert!(!h.set(&fields[1], b"NO", DEFAULT));
        assert!(!h.set(&fields[1], &[b'x'; 13], DEFAULT));
        assert!(!h.set(&fields[1], &[b'x'; 14], DEFAULT));
        assert!(!h.set(&fields[1], b"SE", DEFAULT));
        want(&h);
        let copy = h.duplicate();
        assert!(h.remove(&fields[1]));
        assert_eq!(h.get(&fields[1]), None);
        assert_eq!(h.len(), 2);
        want(&copy);
        // The table holds the names' bytes.
        let mut t = copy.duplicate();
        t.convert_to_hashtable(0);
        assert_eq!(t.encoding(), "hashtable");
        want(&t);
    }

    #[test]
    fn integer_values_of_shared_names_read_back_as_set() {
        let f = b"hash::test::shared::int";
        assert!(field_names::admit(f).is_some());
        let cases: [(&str, usize); 16] = [
            ("0", 1),
            ("-1", 1),
            ("127", 1),
            ("-128", 1),
            ("128", 2),
            ("-32768", 2),
            ("40000", 4),
            ("1700000123", 4),
            ("2147483648", 8),
            ("-9223372036854775808", 8),
            ("9223372036854775807", 8),
            // Not what itoa writes: kept as bytes.
            ("007", 3),
            ("+5", 2),
            ("-0", 2),
            ("9223372036854775808", 19),
            ("", 0),
        ];
        for (v, stored) in cases {
            let mut h = HashValue::new();
            h.set(f, v.as_bytes(), DEFAULT);
            assert_eq!(h.get(f).as_deref(), Some(v.as_bytes()), "{v}");
            assert_eq!(h.strlen(f), v.len());
            let pairs: Vec<(Vec<u8>, Vec<u8>)> =
                h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
            assert_eq!(pairs, [(f.to_vec(), v.as_bytes().to_vec())]);
            // Header, id, then the integer or the bytes.
            let len_bytes = if stored > NAMED_VALUE_MAX { 1 } else { 0 };
            assert_eq!(
                h.memory_usage(),
                size_of::<HashValue>() + 2 + len_bytes + stored,
                "{v}"
            );
        }
        // Changes between integers and bytes of the same length.
        let mut h = HashValue::new();
        h.set(b"other", b"x", DEFAULT);
        h.set(f, b"12", DEFAULT);
        assert_eq!(h.incr_by(f, 1, DEFAULT), Ok(13));
        assert_eq!(h.get(f).as_deref(), Some(&b"13"[..]));
        // Same width in place, then wider, then narrower again.
        for v in ["-7", "127", "128", "-1", "1700000123", "5"] {
            h.set(f, v.as_bytes(), DEFAULT);
            assert_eq!(h.get(f).as_deref(), Some(v.as_bytes()));
            assert_eq!(h.get(b"other").as_deref(), Some(&b"x"[..]));
        }
        h.set(f, b"ab", DEFAULT);
        assert_eq!(h.get(f).as_deref(), Some(&b"ab"[..]));
        h.set(f, b"99", DEFAULT);
        assert_eq!(h.get(f).as_deref(), Some(&b"99"[..]));
        assert_eq!(h.incr_by(f, i64::MAX - 99, DEFAULT), Ok(i64::MAX));
        assert_eq!(h.incr_by(f, 1, DEFAULT), Err(HashError::Overflow));
        assert_eq!(h.get(b"other").as_deref(), Some(&b"x"[..]));
        let mut t = h.duplicate();
        t.convert_to_hashtable(0);
        assert_eq!(t.get(f).as_deref(), Some(i64::MAX.to_string().as_bytes()));
    }

    #[test]
    fn long_values_round_trip() {
        let big = vec![b'x'; 100_000];
        let mut h = HashValue::new();
        h.set(b"a", b"1", DEFAULT);
        h.set(b"big", &big, DEFAULT);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"big").as_deref(), Some(big.as_slice()));
        assert!(h.remove(b"a"));
        assert_eq!(pairs(&h), vec![(b"big".to_vec(), big.clone())]);
        // A listpack with huge limits holds it too.
        let mut l = HashValue::new();
        l.set(&big, &big, limits(128, usize::MAX));
        assert_eq!(l.encoding(), "listpack");
        assert_eq!(l.get(&big).as_deref(), Some(big.as_slice()));
    }

    #[test]
    fn scan_of_listpack_is_one_step() {
        let mut h = HashValue::new();
        h.set(b"a", b"1", DEFAULT);
        h.set(b"b", b"2", DEFAULT);
        let mut got = Vec::new();
        let next = h.scan(12345, 1, |f, v| got.push((f.to_vec(), v.to_vec())));
        assert_eq!(next, 0);
        assert_eq!(got, owned(&[("a", "1"), ("b", "2")]));
    }

    #[test]
    fn scan_survives_growth_and_shrinking_between_steps() {
        // A table from the start (300 fields fit the default listpack).
        let lim = limits(128, 64);
        let mut h = HashValue::new();
        for i in 0..300 {
            h.set(format!("m{i}").as_bytes(), b"v", lim);
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut steps = 0;
        loop {
            cursor = h.scan(cursor, 10, |f, _| {
                seen.insert(f.to_vec());
            });
            steps += 1;
            // Grow the table, then shrink it, between steps: the original
            // fields must all still come back.
            if steps < 20 {
                for j in 0..100 {
                    h.set(format!("new{steps}-{j}").as_bytes(), b"v", lim);
                }
            } else if steps < 40 {
                for j in 0..100 {
                    h.remove(format!("new{}-{j}", steps - 20).as_bytes());
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
    fn random_picks_are_uniform_enough() {
        let mut rng = StdRng::seed_from_u64(7);
        for lim in [DEFAULT, limits(0, 64)] {
            let mut h = HashValue::new();
            for f in ["a", "b", "c", "d"] {
                h.set(f.as_bytes(), b"v", lim);
            }
            let mut counts: HashMap<Vec<u8>, usize> = HashMap::new();
            for _ in 0..4000 {
                if let Some((f, _)) = h.random_field(&mut rng) {
                    *counts.entry(f.to_vec()).or_insert(0) += 1;
                }
            }
            assert_eq!(counts.len(), 4);
            assert!(counts.values().all(|&c| c > 800), "{counts:?}");
            // Two of four, many times: each field about half the time.
            let mut counts: HashMap<Vec<u8>, usize> = HashMap::new();
            for _ in 0..4000 {
                for (f, _) in h.random_distinct(2, &mut rng) {
                    *counts.entry(f.to_vec()).or_insert(0) += 1;
                }
            }
            assert!(counts.values().all(|&c| c > 1700), "{counts:?}");
            let mut counts: HashMap<Vec<u8>, usize> = HashMap::new();
            h.random_with_repeats(4000, &mut rng, |f, _| {
                *counts.entry(f.to_vec()).or_insert(0) += 1;
            });
            assert!(counts.values().all(|&c| c > 800), "{counts:?}");
        }
    }

    #[test]
    fn random_distinct_from_a_big_table_is_not_biased_to_slot_order() {
        // Picking 9 of 10 many times: every field must be left out
        // sometimes.
        let mut rng = StdRng::seed_from_u64(3);
        let mut h = HashValue::new();
        for i in 0..10 {
            h.set(format!("f{i}").as_bytes(), b"v", limits(0, 64));
        }
        let mut left_out: HashMap<Vec<u8>, usize> = HashMap::new();
        for _ in 0..2000 {
            let picked: HashSet<Vec<u8>> = h
                .random_distinct(9, &mut rng)
                .into_iter()
                .map(|(f, _)| f.to_vec())
                .collect();
            assert_eq!(picked.len(), 9);
            for f in h.keys() {
                if !picked.contains(f) {
                    *left_out.entry(f.to_vec()).or_insert(0) += 1;
                }
            }
        }
        assert_eq!(left_out.len(), 10);
        assert!(left_out.values().all(|&c| c > 100), "{left_out:?}");
    }

    #[test]
    fn duplicate_is_deep() {
        let mut h = HashValue::new();
        h.set(b"a", b"1", DEFAULT);
        let copy = h.duplicate();
        h.set(b"a", b"2", DEFAULT);
        assert_eq!(copy.get(b"a").as_deref(), Some(&b"1"[..]));
        assert_eq!(HashValue::default().len(), 0);
        assert_eq!(HashLimits::default(), DEFAULT);
    }
}
