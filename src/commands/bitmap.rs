//! Bitmap commands (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD,
//! BITFIELD_RO): bitmaps are strings, so these read and change
//! [`StrValue`]s through their bit-level methods, which work on plain and
//! compressed strings alike (see `engine::string` and `engine::bitmap`).

use std::sync::atomic::Ordering;

use super::args;
use super::table::{flags::*, CommandSpec, KeySpec};
use super::{Ctx, Keys};
use crate::engine::bitmap::{FieldType, Overflow, SparseBitmap, CHUNK_BYTES};
use crate::engine::string::StrValue;
use crate::engine::Value;
use crate::error::{CmdError, CmdResult};
use crate::protocol::number;
use crate::state::notify::Class;

/// BITOP: the destination, then every source.
const BITOP_KEYS: KeySpec = KeySpec::Range {
    first: 2,
    last: -1,
    step: 1,
};

const fn bitmap(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: super::table::Handler,
    (summary, since, complexity): (&'static str, &'static str, &'static str),
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, keys, handler)
        .documented("bitmap", summary, since, complexity)
}

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    bitmap(
        "setbit",
        4,
        WRITE | DENYOOM,
        KeySpec::FIRST,
        setbit,
        (
            "Sets or clears the bit at offset in the string value stored at key",
            "2.2.0",
            "O(1)",
        ),
    ),
    bitmap(
        "getbit",
        3,
        READONLY | FAST,
        KeySpec::FIRST,
        getbit,
        (
            "Returns the bit value at offset in the string value stored at key",
            "2.2.0",
            "O(1)",
        ),
    ),
    bitmap(
        "bitcount",
        -2,
        READONLY,
        KeySpec::FIRST,
        bitcount,
        (
            "Count set bits in a string",
            "2.6.0",
            "O(N)",
        ),
    ),
    bitmap(
        "bitpos",
        -3,
        READONLY,
        KeySpec::FIRST,
        bitpos,
        (
            "Find first bit set or clear in a string",
            "2.8.7",
            "O(N)",
        ),
    ),
    bitmap(
        "bitop",
        -4,
        WRITE | DENYOOM,
        BITOP_KEYS,
        bitop,
        (
            "Perform bitwise operations between strings",
            "2.6.0",
            "O(N)",
        ),
    ),
    bitmap(
        "bitfield",
        -2,
        WRITE | DENYOOM,
        KeySpec::FIRST,
        bitfield,
        (
            "Perform arbitrary bitfield integer operations on strings",
            "3.2.0",
            "O(1) for each subcommand specified",
        ),
    ),
    bitmap(
        "bitfield_ro",
        -2,
        READONLY | FAST,
        KeySpec::FIRST,
        bitfield_ro,
        (
            "Perform arbitrary bitfield integer operations on strings. Read-only variant of BITFIELD",
            "6.0.0",
            "O(1) for each subcommand specified",
        ),
    ),
];

fn offset_error() -> CmdError {
    CmdError::err("bit offset is not an integer or out of range")
}

/// The argument as C code sees it: up to its first NUL byte (Redis parses
/// field types with `strlen`).
fn c_str(arg: &[u8]) -> &[u8] {
    arg.iter()
        .position(|&b| b == 0)
        .map_or(arg, |n| arg.get(..n).unwrap_or(arg))
}

/// A bit offset argument. With `field_bits`, the BITFIELD form `#N` means
/// N fields of that width. Offsets must address a byte below
/// proto-max-bulk-len.
fn bit_offset(ctx: &Ctx, arg: &[u8], field_bits: Option<u32>) -> Result<u64, CmdError> {
    let (digits, scale) = match (arg.split_first(), field_bits) {
        (Some((b'#', rest)), Some(bits)) => (rest, i64::from(bits)),
        _ => (arg, 1),
    };
    // Redis multiplies without an overflow check; a wrapped product is
    // usually negative and so refused below.
    let n = number::parse_i64(digits)
        .ok_or_else(offset_error)?
        .wrapping_mul(scale);
    let max_bulk = ctx.server.proto_max_bulk_len.load(Ordering::Relaxed);
    if n < 0 || (n as u64 >> 3) >= max_bulk {
        return Err(offset_error());
    }
    Ok(n as u64)
}

/// The string under `key` for reading, `WRONGTYPE` if another type.
fn read_str<'k>(keys: &'k mut Keys<'_>, key: &[u8]) -> Result<Option<&'k StrValue>, CmdError> {
    keys.typed(key, |v| match v {
        Value::Str(x) => Some(x),
        _ => None,
    })
}

/// The string under `key` for change, created empty if missing
/// (`WRONGTYPE` if another type).
fn write_str<'k>(keys: &'k mut Keys<'_>, key: &[u8]) -> Result<&'k mut StrValue, CmdError> {
    match keys.value_mut(key)? {
        Some(Value::Str(_)) => {}
        Some(_) => return Err(CmdError::WrongType),
        None => {
            let now = keys.now_ms;
            keys.notify(Class::NEW, "new", key);
            keys.part_mut(key)?
                .insert(key, Value::Str(StrValue::raw(Vec::new())), false, now);
        }
    }
    match keys.value_mut(key)? {
        Some(Value::Str(s)) => Ok(s),
        _ => Err(CmdError::WrongType),
    }
}

fn setbit(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let offset = bit_offset(ctx, a[2], None)?;
    let on = match a[3] {
        b"0" => false,
        b"1" => true,
        _ => return Err(CmdError::err("bit is not an integer or out of range")),
    };
    let now = ctx.keys.now_ms;
    let before = match ctx.keys.part(a[1])?.peek(a[1], now).map(|e| &e.value) {
        Some(Value::Str(s)) => Some(s.len()),
        _ => None,
    };
    let s = write_str(&mut ctx.keys, a[1])?;
    let old = s.set_bit(offset, on);
    // As Redis: a change only when the key was created or grew, or the
    // bit flipped.
    if before != Some(s.len()) || old != on {
        ctx.keys.modified(a[1])?;
        ctx.keys.notify(Class::STRING, "setbit", a[1]);
    }
    ctx.out.int(i64::from(old));
    Ok(())
}

fn getbit(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let offset = bit_offset(ctx, a[2], None)?;
    let bit = read_str(&mut ctx.keys, a[1])?.is_some_and(|s| s.get_bit(offset));
    ctx.out.int(i64::from(bit));
    Ok(())
}

/// Whether a `BYTE`/`BIT` unit argument says bits.
fn unit_is_bit(arg: &[u8]) -> Result<bool, CmdError> {
    if args::is(arg, "bit") {
        Ok(true)
    } else if args::is(arg, "byte") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// Resolves a `start end` range over `total` units (negative indexes count
/// from the end) into bit offsets `first..=last`; `None` when empty.
fn bit_range(start: i64, end: i64, total: i64, is_bit: bool) -> Option<(u64, u64)> {
    let start = if start < 0 { start + total } else { start }.max(0);
    let end = if end < 0 { end + total } else { end }.max(0);
    let end = end.min(total - 1);
    if start > end {
        return None;
    }
    let (start, end) = (start as u64, end as u64);
    Some(if is_bit {
        (start, end)
    } else {
        (start * 8, end * 8 + 7)
    })
}

fn bitcount(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    // Redis looks the key up before reading the range: a missing key
    // answers 0 whatever follows.
    let Some(s) = read_str(&mut ctx.keys, a[1])? else {
        ctx.out.int(0);
        return Ok(());
    };
    let len = s.len() as i64;
    let range = match a.len() {
        2 => bit_range(0, -1, len, false),
        4 | 5 => {
            let start = args::int(a[2])?;
            let end = args::int(a[3])?;
            if start < 0 && end < 0 && start > end {
                ctx.out.int(0);
                return Ok(());
            }
            let is_bit = match a.get(4) {
                Some(u) => unit_is_bit(u)?,
                None => false,
            };
            bit_range(start, end, if is_bit { len * 8 } else { len }, is_bit)
        }
        _ => return Err(CmdError::Syntax),
    };
    let n = range.map_or(0, |(first, last)| s.count_ones(first, last));
    ctx.out.int(n as i64);
    Ok(())
}

fn bitpos(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let bit = match args::int(a[2])? {
        0 => false,
        1 => true,
        _ => return Err(CmdError::err("The bit argument must be 1 or 0.")),
    };
    // A missing key is an endless run of zeros.
    let Some(s) = read_str(&mut ctx.keys, a[1])? else {
        ctx.out.int(if bit { -1 } else { 0 });
        return Ok(());
    };
    let len = s.len() as i64;
    let (range, end_given) = match a.len() {
        3 => (bit_range(0, -1, len, false), false),
        4..=6 => {
            let start = args::int(a[3])?;
            let is_bit = match a.get(5) {
                Some(u) => unit_is_bit(u)?,
                None => false,
            };
            let total = if is_bit { len * 8 } else { len };
            match a.get(4) {
                Some(e) => (bit_range(start, args::int(e)?, total, is_bit), true),
                None => (bit_range(start, total - 1, total, is_bit), false),
            }
        }
        _ => return Err(CmdError::Syntax),
    };
    let Some((first, last)) = range else {
        ctx.out.int(-1);
        return Ok(());
    };
    let pos = match s.first_bit(bit, first, last) {
        Some(p) => p as i64,
        // Looking for a clear bit without an explicit end, the string
        // counts as followed by zeros: the answer is the first bit past it.
        None if !bit && !end_given => ((last / 8 + 1) * 8) as i64,
        None => -1,
    };
    ctx.out.int(pos);
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

impl BitOp {
    fn parse(arg: &[u8]) -> Result<BitOp, CmdError> {
        [
            ("and", BitOp::And),
            ("or", BitOp::Or),
            ("xor", BitOp::Xor),
            ("not", BitOp::Not),
        ]
        .into_iter()
        .find(|(w, _)| args::is(arg, w))
        .map(|(_, op)| op)
        .ok_or(CmdError::Syntax)
    }

    /// Folds `src` into `acc`; `src` is zero-padded to `acc`'s length.
    fn fold(self, acc: &mut [u8], src: &[u8]) {
        let pairs = acc.iter_mut().zip(src);
        match self {
            BitOp::And => {
                pairs.for_each(|(a, s)| *a &= s);
                acc.iter_mut().skip(src.len()).for_each(|a| *a = 0);
            }
            BitOp::Or => pairs.for_each(|(a, s)| *a |= s),
            BitOp::Xor => pairs.for_each(|(a, s)| *a ^= s),
            BitOp::Not => pairs.for_each(|(a, s)| *a = !s),
        }
    }
}

fn bitop(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let op = BitOp::parse(a[1])?;
    if op == BitOp::Not && a.len() != 4 {
        return Err(CmdError::err(
            "BITOP NOT must be called with a single source key.",
        ));
    }
    let (dest, sources) = (a[2], &a[3..]);
    let mut maxlen = 0;
    for k in sources {
        if let Some(s) = read_str(&mut ctx.keys, k)? {
            maxlen = maxlen.max(s.len());
        }
    }
    if maxlen == 0 {
        if ctx.keys.remove(dest)?.is_some() {
            ctx.keys.notify(Class::GENERIC, "del", dest);
        }
        ctx.out.int(0);
        return Ok(());
    }
    let result = {
        let now = ctx.keys.now_ms;
        let keys = &ctx.keys;
        let mut values = Vec::with_capacity(sources.len());
        for k in sources {
            values.push(match keys.part(k)?.get(k, now).map(|e| &e.value) {
                Some(Value::Str(s)) => Some(s),
                _ => None,
            });
        }
        bitop_apply(op, &values, maxlen)
    };
    ctx.keys.set(dest, Value::Str(result), false)?;
    ctx.keys.notify(Class::STRING, "set", dest);
    ctx.out.int(maxlen as i64);
    Ok(())
}

/// The BITOP result of `values` (missing keys as `None`), `maxlen` long.
fn bitop_apply(op: BitOp, values: &[Option<&StrValue>], maxlen: usize) -> StrValue {
    if op != BitOp::Not && values.iter().flatten().any(|s| s.is_compressed()) {
        return bitop_blocks(op, values, maxlen);
    }
    let mut acc = vec![0u8; maxlen];
    for (i, v) in values.iter().enumerate() {
        let bytes = v.map(|s| s.as_bytes());
        let src: &[u8] = bytes.as_deref().unwrap_or(&[]);
        if i == 0 && op != BitOp::Not {
            if let Some(head) = acc.get_mut(..src.len()) {
                head.copy_from_slice(src);
            }
        } else {
            op.fold(&mut acc, src);
        }
    }
    StrValue::raw(acc)
}

/// BITOP AND/OR/XOR over compressed inputs, an 8 KiB block at a time,
/// visiting only blocks that can hold a one.
fn bitop_blocks(op: BitOp, values: &[Option<&StrValue>], maxlen: usize) -> StrValue {
    let mut blocks: Vec<u64> = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let mine = v.map(|s| s.nonzero_blocks()).unwrap_or_default();
        if op == BitOp::And && i > 0 {
            blocks.retain(|b| mine.binary_search(b).is_ok());
        } else {
            blocks.extend(mine);
        }
    }
    blocks.sort_unstable();
    blocks.dedup();
    let mut out = SparseBitmap::new();
    out.grow(maxlen as u64);
    let mut acc = vec![0u8; CHUNK_BYTES];
    let mut buf = vec![0u8; CHUNK_BYTES];
    for k in blocks {
        let start = k * CHUNK_BYTES as u64;
        for (i, v) in values.iter().enumerate() {
            match v {
                Some(s) => s.read_bytes(start, &mut buf),
                None => buf.fill(0),
            }
            if i == 0 {
                acc.copy_from_slice(&buf);
            } else {
                op.fold(&mut acc, &buf);
            }
        }
        out.replace_chunk(k, &acc);
    }
    StrValue::from_bitmap(out)
}

/// One BITFIELD operation.
#[derive(Clone, Copy)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

fn field_type(arg: &[u8]) -> Result<FieldType, CmdError> {
    let err = || {
        CmdError::err(
            "Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
        )
    };
    let arg = c_str(arg);
    let (signed, digits) = match arg.split_first() {
        Some((b'i', rest)) => (true, rest),
        Some((b'u', rest)) => (false, rest),
        _ => return Err(err()),
    };
    let bits = number::parse_i64(digits).ok_or_else(err)?;
    let max = if signed { 64 } else { 63 };
    if !(1..=max).contains(&bits) {
        return Err(err());
    }
    Ok(FieldType {
        signed,
        bits: bits as u32,
    })
}

fn bitfield(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    bitfield_generic(ctx, a, false)
}

fn bitfield_ro(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    bitfield_generic(ctx, a, true)
}

fn bitfield_generic(ctx: &mut Ctx, a: &[&[u8]], read_only: bool) -> CmdResult {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut highest_write: Option<u64> = None;
    let mut j = 2;
    while let Some(&sub) = a.get(j) {
        let remaining = a.len() - j - 1;
        let op = if args::is(sub, "get") && remaining >= 2 {
            FieldOp::Get
        } else if args::is(sub, "set") && remaining >= 3 {
            FieldOp::Set(0)
        } else if args::is(sub, "incrby") && remaining >= 3 {
            FieldOp::IncrBy(0)
        } else if args::is(sub, "overflow") && remaining >= 1 {
            let w = a[j + 1];
            overflow = if args::is(w, "wrap") {
                Overflow::Wrap
            } else if args::is(w, "sat") {
                Overflow::Sat
            } else if args::is(w, "fail") {
                Overflow::Fail
            } else {
                return Err(CmdError::err("Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        } else {
            return Err(CmdError::Syntax);
        };
        let ty = field_type(a[j + 1])?;
        let offset = bit_offset(ctx, a[j + 2], Some(ty.bits))?;
        let op = match op {
            FieldOp::Get => {
                j += 3;
                op
            }
            FieldOp::Set(_) | FieldOp::IncrBy(_) => {
                let last = offset + u64::from(ty.bits) - 1;
                highest_write = Some(highest_write.map_or(last, |h| h.max(last)));
                let n = args::int(a[j + 3])?;
                j += 4;
                match op {
                    FieldOp::Set(_) => FieldOp::Set(n),
                    _ => FieldOp::IncrBy(n),
                }
            }
        };
        ops.push((op, ty, offset, overflow));
    }

    let Some(highest) = highest_write else {
        // Only reads: a missing key reads as zeros.
        let s = read_str(&mut ctx.keys, a[1])?;
        ctx.out.array(ops.len());
        for &(_, ty, offset, _) in &ops {
            let raw = s.map_or(0, |s| s.get_field(offset, ty.bits));
            ctx.out.int(ty.decode(raw));
        }
        return Ok(());
    };
    if read_only {
        return Err(CmdError::err(
            "BITFIELD_RO only supports the GET subcommand",
        ));
    }
    // As Redis: the string grows to cover every written field first, even
    // those whose write then fails.
    let s = write_str(&mut ctx.keys, a[1])?;
    s.grow(highest / 8 + 1);
    let mut changes = 0;
    ctx.out.array(ops.len());
    for &(op, ty, offset, overflow) in &ops {
        let old = ty.decode(s.get_field(offset, ty.bits));
        let (stored, reply) = match op {
            FieldOp::Get => {
                ctx.out.int(old);
                continue;
            }
            FieldOp::Set(v) => (ty.add(v, 0, overflow), old),
            FieldOp::IncrBy(d) => {
                let new = ty.add(old, d, overflow);
                (new, new.unwrap_or(0))
            }
        };
        match stored {
            Some(v) => {
                s.set_field(offset, ty.bits, v as u64);
                changes += 1;
                ctx.out.int(reply);
            }
            None => ctx.out.null(),
        }
    }
    ctx.keys.modified(a[1])?;
    if changes > 0 {
        ctx.keys.notify(Class::STRING, "setbit", a[1]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_like_redis() {
        assert_eq!(bit_range(0, -1, 3, false), Some((0, 23)));
        assert_eq!(bit_range(-2, -1, 3, false), Some((8, 23)));
        assert_eq!(bit_range(1, 0, 3, false), None);
        assert_eq!(bit_range(0, -1, 0, false), None);
        assert_eq!(bit_range(5, 100, 24, true), Some((5, 23)));
        assert_eq!(bit_range(-100, 2, 24, true), Some((0, 2)));
    }

    #[test]
    fn field_types() {
        assert!(field_type(b"i64").is_ok());
        assert!(field_type(b"u63").is_ok());
        assert!(field_type(b"U8").is_err());
        assert!(field_type(b"u64").is_err());
        assert!(field_type(b"i0").is_err());
        assert!(field_type(b"i08").is_err());
        assert_eq!(field_type(b"u8\0x").map(|t| t.bits), Ok(8));
    }
}
