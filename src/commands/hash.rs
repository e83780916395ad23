//! Hash commands: HSET, HSETNX, HMSET, HGET, HMGET, HDEL, HLEN, HSTRLEN,
//! HEXISTS, HKEYS, HVALS, HGETALL, HINCRBY, HINCRBYFLOAT, HRANDFIELD and
//! HSCAN. Argument rules, error lines and reply types follow Redis 7.0
//! (`t_hash.c`); the structure and its two encodings live in
//! `engine::hash`, which is handed the `hash-max-listpack-*` limits on
//! every write.

use super::args;
use super::long_double::LongDouble;
use super::set::MAX_RANDOM_REPEATS;
use super::table::{flags::*, CommandSpec, Handler, KeySpec};
use super::{Ctx, Keys};
use crate::engine::glob;
use crate::engine::hash::{HashError, HashLimits, HashValue};
use crate::engine::Value;
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::state::notify::Class;

const fn hash_cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: Handler,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, KeySpec::FIRST, handler)
        .documented("hash", summary, since, complexity)
}

const O1: &str = "O(1)";
const ON_SIZE: &str = "O(N) where N is the size of the hash.";

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    hash_cmd(
        "hset",
        -4,
        WRITE | DENYOOM | FAST,
        hset,
        "Set the string value of a hash field",
        "2.0.0",
        "O(1) for each field/value pair added, so O(N) to add N field/value pairs when the command is called with multiple field/value pairs.",
    ),
    hash_cmd(
        "hsetnx",
        4,
        WRITE | DENYOOM | FAST,
        hsetnx,
        "Set the value of a hash field, only if the field does not exist",
        "2.0.0",
        O1,
    ),
    hash_cmd(
        "hmset",
        -4,
        WRITE | DENYOOM | FAST,
        hmset,
        "Set multiple hash fields to multiple values",
        "2.0.0",
        "O(N) where N is the number of fields being set.",
    ),
    hash_cmd(
        "hget",
        3,
        READONLY | FAST,
        hget,
        "Get the value of a hash field",
        "2.0.0",
        O1,
    ),
    hash_cmd(
        "hmget",
        -3,
        READONLY | FAST,
        hmget,
        "Get the values of all the given hash fields",
        "2.0.0",
        "O(N) where N is the number of fields being requested.",
    ),
    hash_cmd(
        "hdel",
        -3,
        WRITE | FAST,
        hdel,
        "Delete one or more hash fields",
        "2.0.0",
        "O(N) where N is the number of fields to be removed.",
    ),
    hash_cmd(
        "hlen",
        2,
        READONLY | FAST,
        hlen,
        "Get the number of fields in a hash",
        "2.0.0",
        O1,
    ),
    hash_cmd(
        "hstrlen",
        3,
        READONLY | FAST,
        hstrlen,
        "Get the length of the value of a hash field",
        "3.2.0",
        O1,
    ),
    hash_cmd(
        "hexists",
        3,
        READONLY | FAST,
        hexists,
        "Determine if a hash field exists",
        "2.0.0",
        O1,
    ),
    hash_cmd(
        "hkeys",
        2,
        READONLY,
        hkeys,
        "Get all the fields in a hash",
        "2.0.0",
        ON_SIZE,
    ),
    hash_cmd(
        "hvals",
        2,
        READONLY,
        hvals,
        "Get all the values in a hash",
        "2.0.0",
        ON_SIZE,
    ),
    hash_cmd(
        "hgetall",
        2,
        READONLY,
        hgetall,
        "Get all the fields and values in a hash",
        "2.0.0",
        ON_SIZE,
    ),
    hash_cmd(
        "hincrby",
        4,
        WRITE | DENYOOM | FAST,
        hincrby,
        "Increment the integer value of a hash field by the given number",
        "2.0.0",
        O1,
    ),
    hash_cmd(
        "hincrbyfloat",
        4,
        WRITE | DENYOOM | FAST,
        hincrbyfloat,
        "Increment the float value of a hash field by the given amount",
        "2.6.0",
        O1,
    ),
    hash_cmd(
        "hrandfield",
        -2,
        READONLY,
        hrandfield,
        "Get one or multiple random fields from a hash",
        "6.2.0",
        "O(N) where N is the number of fields returned",
    ),
    hash_cmd(
        "hscan",
        -3,
        READONLY,
        hscan,
        "Incrementally iterate hash fields and associated values",
        "2.8.0",
        "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..",
    ),
];

// ---------------------------------------------------------------------------
// Shared helpers

/// The `hash-max-listpack-*` limits, read once per command so CONFIG SET
/// applies at once (the config lock is released before the command works).
fn limits(ctx: &Ctx) -> HashLimits {
    let config = ctx.server.config.read();
    HashLimits {
        max_listpack_entries: usize::try_from(config.hash_max_listpack_entries)
            .unwrap_or(usize::MAX),
        max_listpack_value: usize::try_from(config.hash_max_listpack_value).unwrap_or(usize::MAX),
    }
}

/// The hash under `key` for reading (counts a keyspace hit or miss);
/// `WRONGTYPE` if the key holds another type.
fn read_hash<'k>(keys: &'k mut Keys<'_>, key: &[u8]) -> Result<Option<&'k HashValue>, CmdError> {
    keys.typed(key, |v| match v {
        Value::Hash(x) => Some(x),
        _ => None,
    })
}

/// The hash under `key` for change; `WRONGTYPE` if another type.
fn write_hash<'k>(
    keys: &'k mut Keys<'_>,
    key: &[u8],
) -> Result<Option<&'k mut HashValue>, CmdError> {
    keys.typed_mut(key, |v| match v {
        Value::Hash(x) => Some(x),
        _ => None,
    })
}

/// Applies `change` to the hash under `key`, creating the key when it is
/// absent (Redis's `hashTypeLookupWriteOrCreate`). The key is stored or
/// marked modified when `change` succeeds and the hash is not empty; a
/// failed change leaves the keyspace as it was. A change raises `event`.
fn update_hash<T>(
    ctx: &mut Ctx,
    key: &[u8],
    event: &'static str,
    change: impl FnOnce(&mut HashValue) -> Result<T, CmdError>,
) -> Result<T, CmdError> {
    let out = match write_hash(&mut ctx.keys, key)? {
        Some(h) => {
            let out = change(h)?;
            ctx.keys.modified(key)?;
            out
        }
        None => {
            let mut h = HashValue::new();
            let out = change(&mut h)?;
            if h.is_empty() {
                return Ok(out);
            }
            ctx.keys.set(key, Value::Hash(h), false)?;
            out
        }
    };
    ctx.keys.notify(Class::HASH, event, key);
    Ok(out)
}

/// The error line of a refused HINCRBY / HINCRBYFLOAT.
fn hash_error(e: HashError) -> CmdError {
    CmdError::line(e.to_string())
}

/// HSET's and HMSET's pairs: an even number of arguments after the key
/// (Redis checks this in the command, so the error names `name`).
fn field_value_pairs<'a>(name: &str, a: &'a [&'a [u8]]) -> Result<&'a [&'a [u8]], CmdError> {
    let pairs = &a[2..];
    if !pairs.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(name.to_string()));
    }
    Ok(pairs)
}

/// Sets every pair; returns how many fields are new. A field or value too
/// long for a listpack, or one field too many, converts the hash (in
/// `HashValue::set`; Redis converts before the first pair when any is too
/// long, which ends in the same hash).
fn set_pairs(h: &mut HashValue, pairs: &[&[u8]], lim: HashLimits) -> usize {
    pairs
        .chunks_exact(2)
        .filter(|pair| h.set(pair[0], pair[1], lim))
        .count()
}

/// One field as HMGET / HGET answer it: its value, or a null.
fn bulk_or_null(out: &mut Reply, value: Option<&[u8]>) {
    match value {
        Some(v) => out.bulk(v),
        None => out.null(),
    }
}

// ---------------------------------------------------------------------------
// Writes

fn hset(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let pairs = field_value_pairs("hset", a)?;
    let lim = limits(ctx);
    let added = update_hash(ctx, a[1], "hset", |h| Ok(set_pairs(h, pairs, lim)))?;
    ctx.out.int(added as i64);
    Ok(())
}

fn hmset(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let pairs = field_value_pairs("hmset", a)?;
    let lim = limits(ctx);
    update_hash(ctx, a[1], "hset", |h| Ok(set_pairs(h, pairs, lim)))?;
    ctx.out.ok();
    Ok(())
}

fn hsetnx(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (key, field, value) = (a[1], a[2], a[3]);
    let lim = limits(ctx);
    let set = match write_hash(&mut ctx.keys, key)? {
        Some(h) => {
            let set = h.set_nx(field, value, lim);
            if set {
                ctx.keys.modified(key)?;
            }
            set
        }
        None => {
            let mut h = HashValue::new();
            h.set(field, value, lim);
            ctx.keys.set(key, Value::Hash(h), false)?;
            true
        }
    };
    if set {
        ctx.keys.notify(Class::HASH, "hset", key);
    }
    ctx.out.int(set as i64);
    Ok(())
}

fn hdel(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let key = a[1];
    let Some(h) = write_hash(&mut ctx.keys, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let mut deleted = 0;
    for field in &a[2..] {
        if h.remove(field) {
            deleted += 1;
            // Redis stops at the field that empties the hash.
            if h.is_empty() {
                break;
            }
        }
    }
    let emptied = h.is_empty();
    if deleted > 0 {
        ctx.keys.notify(Class::HASH, "hdel", key);
    }
    if emptied {
        ctx.keys.remove(key)?;
        ctx.keys.notify(Class::GENERIC, "del", key);
    } else if deleted > 0 {
        ctx.keys.modified(key)?;
    }
    ctx.out.int(deleted);
    Ok(())
}

fn hincrby(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    // The increment is read before the key's type is checked.
    let incr = args::int(a[3])?;
    let lim = limits(ctx);
    let field = a[2];
    let n = update_hash(ctx, a[1], "hincrby", |h| {
        h.incr_by(field, incr, lim).map_err(hash_error)
    })?;
    ctx.out.int(n);
    Ok(())
}

fn hincrbyfloat(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (key, field) = (a[1], a[2]);
    // The increment is read (and must be finite) before the key's type is
    // checked.
    let incr = LongDouble::string2ld(a[3]).ok_or(CmdError::NotFloat)?;
    if !incr.is_finite() {
        return Err(CmdError::err("value is NaN or Infinity"));
    }
    let lim = limits(ctx);
    let sum = update_hash(ctx, key, "hincrbyfloat", |h| {
        h.incr_by_float(field, incr, lim).map_err(hash_error)
    })?;
    ctx.out.bulk(&sum);
    // The AOF records the result, so a reload cannot round differently.
    ctx.keys
        .propagate_as(vec![b"HSET".to_vec(), key.to_vec(), field.to_vec(), sum]);
    Ok(())
}

// ---------------------------------------------------------------------------
// Reads

fn hget(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let value = read_hash(&mut ctx.keys, a[1])?.and_then(|h| h.get(a[2]));
    bulk_or_null(ctx.out, value.as_deref());
    Ok(())
}

fn hmget(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let h = read_hash(&mut ctx.keys, a[1])?;
    ctx.out.array(a.len() - 2);
    for field in &a[2..] {
        bulk_or_null(ctx.out, h.and_then(|h| h.get(field)).as_deref());
    }
    Ok(())
}

fn hlen(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let n = read_hash(&mut ctx.keys, a[1])?.map_or(0, HashValue::len);
    ctx.out.int(n as i64);
    Ok(())
}

fn hstrlen(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let n = read_hash(&mut ctx.keys, a[1])?.map_or(0, |h| h.strlen(a[2]));
    ctx.out.int(n as i64);
    Ok(())
}

fn hexists(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let found = read_hash(&mut ctx.keys, a[1])?.is_some_and(|h| h.contains(a[2]));
    ctx.out.int(found as i64);
    Ok(())
}

fn hkeys(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    match read_hash(&mut ctx.keys, a[1])? {
        Some(h) => {
            ctx.out.array(h.len());
            h.keys().for_each(|f| ctx.out.bulk(f));
        }
        None => ctx.out.array(0),
    }
    Ok(())
}

fn hvals(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    match read_hash(&mut ctx.keys, a[1])? {
        Some(h) => {
            ctx.out.array(h.len());
            h.values().for_each(|v| ctx.out.bulk(&v));
        }
        None => ctx.out.array(0),
    }
    Ok(())
}

/// HGETALL: a map in RESP3 (a flat array of pairs in RESP2).
fn hgetall(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    match read_hash(&mut ctx.keys, a[1])? {
        Some(h) => {
            ctx.out.map(h.len());
            for (f, v) in h.iter() {
                ctx.out.bulk(f);
                ctx.out.bulk(&v);
            }
        }
        None => ctx.out.map(0),
    }
    Ok(())
}

/// HRANDFIELD's reply of `n` fields, with or without their values: a flat
/// array in RESP2, an array of [field, value] pairs in RESP3.
struct FieldsReply {
    with_values: bool,
    pairs_nested: bool,
}

impl FieldsReply {
    fn begin(out: &mut Reply, n: usize, with_values: bool) -> FieldsReply {
        let pairs_nested = with_values && out.resp3;
        if with_values && !out.resp3 {
            out.array(n.saturating_mul(2));
        } else {
            out.array(n);
        }
        FieldsReply {
            with_values,
            pairs_nested,
        }
    }

    fn entry(&self, out: &mut Reply, field: &[u8], value: &[u8]) {
        if self.pairs_nested {
            out.array(2);
        }
        out.bulk(field);
        if self.with_values {
            out.bulk(value);
        }
    }
}

fn hrandfield(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let Some(&count_arg) = a.get(2) else {
        let pick = read_hash(&mut ctx.keys, a[1])?.and_then(|h| h.random_field(&mut rand::rng()));
        bulk_or_null(ctx.out, pick.map(|(f, _)| f));
        return Ok(());
    };
    let count = args::int(count_arg)?;
    if count == i64::MIN {
        return Err(CmdError::err(
            "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    let with_values = match a.get(3) {
        None => false,
        Some(w) if a.len() == 4 && args::is(w, "withvalues") => {
            if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
                return Err(CmdError::err("value is out of range"));
            }
            true
        }
        Some(_) => return Err(CmdError::Syntax),
    };
    // Redis would try to send any number of repeats (and fill the output
    // buffer until the client is dropped); Rostrum refuses huge ones.
    if count < 0 && count.unsigned_abs() > MAX_RANDOM_REPEATS {
        return Err(CmdError::err("value is out of range"));
    }
    let Some(h) = read_hash(&mut ctx.keys, a[1])? else {
        ctx.out.array(0);
        return Ok(());
    };
    let rng = &mut rand::rng();
    if count == 0 {
        ctx.out.array(0);
    } else if count < 0 || count == 1 {
        // Independent picks, repeats allowed.
        let n = count.unsigned_abs() as usize;
        let reply = FieldsReply::begin(ctx.out, n, with_values);
        let out = &mut *ctx.out;
        h.random_with_repeats(n, rng, |f, v| reply.entry(out, f, v));
    } else {
        // Distinct fields; the whole hash, in its order, when it has no
        // more than `count`.
        let picked = h.random_distinct(usize::try_from(count).unwrap_or(usize::MAX), rng);
        let reply = FieldsReply::begin(ctx.out, picked.len(), with_values);
        for (f, v) in picked {
            reply.entry(ctx.out, f, &v);
        }
    }
    Ok(())
}

fn hscan(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let cursor = args::scan_cursor(a[2]).ok_or_else(|| CmdError::err("invalid cursor"))?;
    let Some(h) = read_hash(&mut ctx.keys, a[1])? else {
        ctx.out.array(2);
        ctx.out.bulk(b"0");
        ctx.out.array(0);
        return Ok(());
    };
    let args::ScanOptions { count, pattern, .. } = args::scan_options(&a[3..], false)?;
    // The engine lends pairs only inside the callback: write them to a side
    // buffer, then the header with their count.
    let mut body = Reply::new(ctx.out.resp3);
    let mut found = 0usize;
    let next = h.scan(cursor, count, |f, v| {
        if pattern.is_none_or(|p| glob::matches(p, f, false)) {
            body.bulk(f);
            body.bulk(v);
            found += 1;
        }
    });
    ctx.out.array(2);
    ctx.out.bulk(itoa::Buffer::new().format(next).as_bytes());
    ctx.out.array(found * 2);
    ctx.out.raw(&body.buf);
    Ok(())
}
