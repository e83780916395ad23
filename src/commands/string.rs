//! String commands: GET, SET and its variants (SETNX, SETEX, PSETEX, GETSET,
//! GETDEL, GETEX), MGET / MSET / MSETNX, the INCR family and INCRBYFLOAT,
//! APPEND, STRLEN, GETRANGE / SUBSTR and SETRANGE. Values are
//! [`StrValue`]s; INCRBYFLOAT's extended precision lives in
//! [`super::long_double`].

use std::sync::atomic::Ordering;

use super::args;
use super::long_double::LongDouble;
use super::table::{flags::*, CommandSpec, Handler, KeySpec};
use super::{Ctx, Keys};
use crate::engine::string::StrValue;
use crate::engine::Value;
use crate::error::{CmdError, CmdResult};
use crate::state::notify::Class;

const ALL_KEYS: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 1,
};

const KEY_VALUE_PAIRS: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 2,
};

const O1: &str = "O(1)";
const RANGE_COMPLEXITY: &str = "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.";

#[allow(clippy::too_many_arguments)]
const fn string(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: Handler,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, keys, handler)
        .documented("string", summary, since, complexity)
}

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    string(
        "get",
        2,
        READONLY | FAST,
        KeySpec::FIRST,
        get,
        "Get the value of a key",
        "1.0.0",
        O1,
    ),
    string(
        "set",
        -3,
        WRITE | DENYOOM,
        KeySpec::FIRST,
        set,
        "Set the string value of a key",
        "1.0.0",
        O1,
    ),
    string(
        "setnx",
        3,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        setnx,
        "Set the value of a key, only if the key does not exist",
        "1.0.0",
        O1,
    ),
    string(
        "setex",
        4,
        WRITE | DENYOOM,
        KeySpec::FIRST,
        setex,
        "Set the value and expiration of a key",
        "2.0.0",
        O1,
    ),
    string(
        "psetex",
        4,
        WRITE | DENYOOM,
        KeySpec::FIRST,
        psetex,
        "Set the value and expiration in milliseconds of a key",
        "2.6.0",
        O1,
    ),
    string(
        "getset",
        3,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        getset,
        "Set the string value of a key and return its old value",
        "1.0.0",
        O1,
    ),
    string(
        "getdel",
        2,
        WRITE | FAST,
        KeySpec::FIRST,
        getdel,
        "Get the value of a key and delete the key",
        "6.2.0",
        O1,
    ),
    string(
        "getex",
        -2,
        WRITE | FAST,
        KeySpec::FIRST,
        getex,
        "Get the value of a key and optionally set its expiration",
        "6.2.0",
        O1,
    ),
    string(
        "mget",
        -2,
        READONLY | FAST,
        ALL_KEYS,
        mget,
        "Get the values of all the given keys",
        "1.0.0",
        "O(N) where N is the number of keys to retrieve.",
    ),
    string(
        "mset",
        -3,
        WRITE | DENYOOM,
        KEY_VALUE_PAIRS,
        mset,
        "Set multiple keys to multiple values",
        "1.0.1",
        "O(N) where N is the number of keys to set.",
    ),
    string(
        "msetnx",
        -3,
        WRITE | DENYOOM,
        KEY_VALUE_PAIRS,
        msetnx,
        "Set multiple keys to multiple values, only if none of the keys exist",
        "1.0.1",
        "O(N) where N is the number of keys to set.",
    ),
    string(
        "incr",
        2,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        incr,
        "Increment the integer value of a key by one",
        "1.0.0",
        O1,
    ),
    string(
        "decr",
        2,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        decr,
        "Decrement the integer value of a key by one",
        "1.0.0",
        O1,
    ),
    string(
        "incrby",
        3,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        incrby,
        "Increment the integer value of a key by the given amount",
        "1.0.0",
        O1,
    ),
    string(
        "decrby",
        3,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        decrby,
        "Decrement the integer value of a key by the given number",
        "1.0.0",
        O1,
    ),
    string(
        "incrbyfloat",
        3,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        incrbyfloat,
        "Increment the float value of a key by the given amount",
        "2.6.0",
        O1,
    ),
    string(
        "append",
        3,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        append,
        "Append a value to a key",
        "2.0.0",
        "O(1). The amortized time complexity is O(1) assuming the appended value is small and the already present value is of any size, since the dynamic string library used by Redis will double the free space available on every reallocation.",
    ),
    string(
        "strlen",
        2,
        READONLY | FAST,
        KeySpec::FIRST,
        strlen,
        "Get the length of the value stored in a key",
        "2.2.0",
        O1,
    ),
    string(
        "getrange",
        4,
        READONLY,
        KeySpec::FIRST,
        getrange,
        "Get a substring of the string stored at a key",
        "2.4.0",
        RANGE_COMPLEXITY,
    ),
    string(
        "lcs",
        -3,
        READONLY,
        KeySpec::FIRST_TWO,
        lcs,
        "Find longest common substring",
        "7.0.0",
        "O(N*M) where N and M are the lengths of s1 and s2, respectively",
    ),
    string(
        "substr",
        4,
        READONLY,
        KeySpec::FIRST,
        getrange,
        "Get a substring of the string stored at a key",
        "1.0.0",
        RANGE_COMPLEXITY,
    ),
    string(
        "setrange",
        4,
        WRITE | DENYOOM,
        KeySpec::FIRST,
        setrange,
        "Overwrite part of a string at key starting at the specified offset",
        "2.2.0",
        "O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument.",
    ),
];

/// The string under `key`, `WRONGTYPE` if another type.
pub fn get_str<'k>(keys: &'k mut Keys<'_>, key: &[u8]) -> Result<Option<&'k StrValue>, CmdError> {
    keys.typed(key, |v| match v {
        Value::Str(x) => Some(x),
        _ => None,
    })
}

/// The live string under `key` for change (an expired key is removed
/// first), `WRONGTYPE` if another type.
fn get_str_mut<'k>(
    keys: &'k mut Keys<'_>,
    key: &[u8],
) -> Result<Option<&'k mut StrValue>, CmdError> {
    keys.typed_mut(key, |v| match v {
        Value::Str(x) => Some(x),
        _ => None,
    })
}

/// Replies with the string under `key` (a null when absent), as Redis's
/// `getGenericCommand`; `WRONGTYPE` (before any reply) for another type.
fn reply_value(ctx: &mut Ctx, key: &[u8]) -> CmdResult {
    match get_str(&mut ctx.keys, key)? {
        Some(s) => ctx.out.bulk(&s.as_bytes()),
        None => ctx.out.null(),
    }
    Ok(())
}

/// Stores a string under `key`, with an absolute expiry or (unless
/// `keep_ttl`) none, and raises `event` (then `expire` when it has one).
fn store(
    keys: &mut Keys<'_>,
    key: &[u8],
    value: StrValue,
    keep_ttl: bool,
    expire_at: Option<u64>,
    event: &'static str,
) -> CmdResult {
    keys.set(key, Value::Str(value), keep_ttl)?;
    keys.notify(Class::STRING, event, key);
    if let Some(at) = expire_at {
        keys.part_mut(key)?.set_expire(key, at);
        keys.notify(Class::GENERIC, "expire", key);
    }
    Ok(())
}

fn get(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    reply_value(ctx, a[1])
}

/// How an expiry option counts time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExpireKind {
    /// `EX seconds`, relative.
    Ex,
    /// `PX milliseconds`, relative.
    Px,
    /// `EXAT unix-seconds`.
    ExAt,
    /// `PXAT unix-milliseconds`.
    PxAt,
}

/// An expiry option with its unparsed time argument.
#[derive(Debug, Clone, Copy)]
struct ExpireArg<'a> {
    kind: ExpireKind,
    time: &'a [u8],
}

impl ExpireArg<'_> {
    /// Whether the time is an absolute timestamp.
    fn absolute(&self) -> bool {
        matches!(self.kind, ExpireKind::ExAt | ExpireKind::PxAt)
    }

    /// The absolute expiry in unix ms, as Redis's
    /// `getExpireMillisecondsOrReply`: the time must be positive and must
    /// not overflow once converted to ms and made absolute.
    fn resolve(&self, now_ms: u64, command: &str) -> Result<u64, CmdError> {
        let invalid = || CmdError::err(format!("invalid expire time in '{command}' command"));
        let mut ms = args::int(self.time)?;
        let seconds = matches!(self.kind, ExpireKind::Ex | ExpireKind::ExAt);
        if ms <= 0 || (seconds && ms > i64::MAX / 1000) {
            return Err(invalid());
        }
        if seconds {
            ms *= 1000;
        }
        if !self.absolute() {
            ms = ms.wrapping_add(now_ms as i64);
        }
        if ms <= 0 {
            return Err(invalid());
        }
        Ok(ms as u64)
    }
}

/// The options of SET (`NX XX GET KEEPTTL EX PX EXAT PXAT`) or of GETEX
/// (`EX PX EXAT PXAT PERSIST`), as Redis's
/// `parseExtendedStringArgumentsOrReply` accepts them: a repeated option is
/// allowed (the last time wins), conflicting ones are a syntax error.
#[derive(Debug, Default)]
struct SetOptions<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keep_ttl: bool,
    persist: bool,
    expire: Option<ExpireArg<'a>>,
}

impl<'a> SetOptions<'a> {
    fn parse(opts: &[&'a [u8]], getex: bool) -> Result<Self, CmdError> {
        let mut o = SetOptions::default();
        let mut i = 0;
        while let Some(&arg) = opts.get(i) {
            // Redis compares option words as C strings.
            let word = arg.split(|&b| b == 0).next().unwrap_or(arg);
            let next = opts.get(i + 1).copied();
            let kind = o.expire.map(|e| e.kind);
            let has_other_expire = |k: ExpireKind| kind.is_some_and(|have| have != k);
            let expire_word = [
                ("ex", ExpireKind::Ex),
                ("px", ExpireKind::Px),
                ("exat", ExpireKind::ExAt),
                ("pxat", ExpireKind::PxAt),
            ]
            .into_iter()
            .find(|(w, _)| args::is(word, w))
            .map(|(_, k)| k);
            if args::is(word, "nx") && !o.xx && !getex {
                o.nx = true;
            } else if args::is(word, "xx") && !o.nx && !getex {
                o.xx = true;
            } else if args::is(word, "get") && !getex {
                o.get = true;
            } else if args::is(word, "keepttl") && !o.persist && kind.is_none() && !getex {
                o.keep_ttl = true;
            } else if args::is(word, "persist") && getex && kind.is_none() && !o.keep_ttl {
                o.persist = true;
            } else if let (Some(k), Some(time)) = (expire_word, next) {
                if o.keep_ttl || o.persist || has_other_expire(k) {
                    return Err(CmdError::Syntax);
                }
                o.expire = Some(ExpireArg { kind: k, time });
                i += 1;
            } else {
                return Err(CmdError::Syntax);
            }
            i += 1;
        }
        Ok(o)
    }
}

fn set(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let o = SetOptions::parse(&a[3..], false)?;
    let now = ctx.keys.now_ms;
    let expire_at = match o.expire {
        Some(e) => Some(e.resolve(now, "set")?),
        None => None,
    };
    let key = a[1];
    if o.get {
        reply_value(ctx, key)?;
    }
    let found = ctx.keys.entry_mut(key)?.is_some();
    if (o.nx && found) || (o.xx && !found) {
        if !o.get {
            ctx.out.null();
        }
        return Ok(());
    }
    store(
        &mut ctx.keys,
        key,
        StrValue::from_bytes(a[2]),
        o.keep_ttl,
        expire_at,
        "set",
    )?;
    if !o.get {
        ctx.out.ok();
    }
    Ok(())
}

fn setnx(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if ctx.keys.entry_mut(a[1])?.is_some() {
        ctx.out.int(0);
        return Ok(());
    }
    store(
        &mut ctx.keys,
        a[1],
        StrValue::from_bytes(a[2]),
        false,
        None,
        "set",
    )?;
    ctx.out.int(1);
    Ok(())
}

/// SETEX and PSETEX: `key time value`.
fn set_with_expire(ctx: &mut Ctx, a: &[&[u8]], kind: ExpireKind, command: &str) -> CmdResult {
    let at = ExpireArg { kind, time: a[2] }.resolve(ctx.keys.now_ms, command)?;
    store(
        &mut ctx.keys,
        a[1],
        StrValue::from_bytes(a[3]),
        false,
        Some(at),
        "set",
    )?;
    ctx.out.ok();
    Ok(())
}

fn setex(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    set_with_expire(ctx, a, ExpireKind::Ex, "setex")
}

fn psetex(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    set_with_expire(ctx, a, ExpireKind::Px, "psetex")
}

fn getset(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    reply_value(ctx, a[1])?;
    store(
        &mut ctx.keys,
        a[1],
        StrValue::from_bytes(a[2]),
        false,
        None,
        "set",
    )
}

fn getdel(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    reply_value(ctx, a[1])?;
    if ctx.keys.remove(a[1])?.is_some() {
        ctx.keys.notify(Class::GENERIC, "del", a[1]);
    }
    Ok(())
}

fn getex(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let o = SetOptions::parse(&a[2..], true)?;
    let key = a[1];
    let now = ctx.keys.now_ms;
    // Redis looks the key up before it validates the time.
    let Some(s) = get_str(&mut ctx.keys, key)? else {
        ctx.out.null();
        return Ok(());
    };
    let expire_at = match o.expire {
        Some(e) => Some(e.resolve(now, "getex")?),
        None => None,
    };
    ctx.out.bulk(&s.as_bytes());
    let absolute = o.expire.is_some_and(|e| e.absolute());
    if let Some(at) = expire_at {
        if absolute && at <= now {
            ctx.keys.remove(key)?;
            ctx.keys.notify(Class::GENERIC, "del", key);
        } else {
            ctx.keys.part_mut(key)?.set_expire(key, at);
            ctx.keys.modified(key)?;
            ctx.keys.notify(Class::GENERIC, "expire", key);
        }
    } else if o.persist && ctx.keys.part_mut(key)?.persist(key) {
        ctx.keys.modified(key)?;
        ctx.keys.notify(Class::GENERIC, "persist", key);
    }
    Ok(())
}

fn mget(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    ctx.out.array(a.len() - 1);
    for key in &a[1..] {
        match ctx.keys.value(key)? {
            Some(Value::Str(s)) => ctx.out.bulk(&s.as_bytes()),
            _ => ctx.out.null(),
        }
    }
    Ok(())
}

/// The key/value pairs of MSET and MSETNX (an odd count is an arity error).
fn pairs<'x>(a: &'x [&'x [u8]]) -> Result<std::slice::ChunksExact<'x, &'x [u8]>, CmdError> {
    if a.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(
            String::from_utf8_lossy(a[0]).to_ascii_lowercase(),
        ));
    }
    Ok(a[1..].chunks_exact(2))
}

/// Stores every pair of MSET / MSETNX.
fn store_pairs(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    for pair in pairs(a)? {
        if let [key, value] = pair {
            store(
                &mut ctx.keys,
                key,
                StrValue::from_bytes(value),
                false,
                None,
                "set",
            )?;
        }
    }
    Ok(())
}

fn mset(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    store_pairs(ctx, a)?;
    ctx.out.ok();
    Ok(())
}

fn msetnx(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    for pair in pairs(a)? {
        if ctx.keys.exists(pair[0])? {
            ctx.out.int(0);
            return Ok(());
        }
    }
    store_pairs(ctx, a)?;
    ctx.out.int(1);
    Ok(())
}

/// Adds `by` to the integer under `key` (0 when absent), keeping its TTL.
fn incr_by(ctx: &mut Ctx, key: &[u8], by: i64) -> CmdResult {
    let n = match get_str_mut(&mut ctx.keys, key)? {
        Some(s) => {
            let current = s.as_i64().ok_or(CmdError::NotInteger)?;
            let n = current.checked_add(by).ok_or(CmdError::Overflow)?;
            // In place: the key keeps its TTL, as in Redis.
            s.set_i64(n);
            ctx.keys.modified(key)?;
            ctx.keys.notify(Class::STRING, "incrby", key);
            n
        }
        None => {
            // A stale key was removed above, so keeping "its" TTL is right.
            store(
                &mut ctx.keys,
                key,
                StrValue::from_i64(by),
                true,
                None,
                "incrby",
            )?;
            by
        }
    };
    ctx.out.int(n);
    Ok(())
}

fn incr(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    incr_by(ctx, a[1], 1)
}

fn decr(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    incr_by(ctx, a[1], -1)
}

fn incrby(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let by = args::int(a[2])?;
    incr_by(ctx, a[1], by)
}

fn decrby(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let by = args::int(a[2])?;
    let by = by
        .checked_neg()
        .ok_or_else(|| CmdError::err("decrement would overflow"))?;
    incr_by(ctx, a[1], by)
}

fn incrbyfloat(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let key = a[1];
    // Redis reads the stored value before the increment argument.
    let current = match get_str_mut(&mut ctx.keys, key)? {
        Some(s) => LongDouble::string2ld(&s.as_bytes()).ok_or(CmdError::NotFloat)?,
        None => LongDouble::zero(false),
    };
    let by = LongDouble::string2ld(a[2]).ok_or(CmdError::NotFloat)?;
    let sum = current + by;
    if !sum.is_finite() {
        return Err(CmdError::err("increment would produce NaN or Infinity"));
    }
    let text = sum.to_human_string();
    store(
        &mut ctx.keys,
        key,
        StrValue::from_computed(text.as_bytes()),
        true,
        None,
        "incrbyfloat",
    )?;
    ctx.out.bulk(text.as_bytes());
    Ok(())
}

/// Redis's `checkStringLength`: a string may not grow past
/// proto-max-bulk-len.
fn check_string_length(ctx: &Ctx, size: u64, append: u64) -> CmdResult {
    let max = ctx.server.proto_max_bulk_len.load(Ordering::Relaxed);
    match size.checked_add(append) {
        Some(total) if total <= max => Ok(()),
        _ => Err(CmdError::err(
            "string exceeds maximum allowed size (proto-max-bulk-len)",
        )),
    }
}

fn append(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (key, tail) = (a[1], a[2]);
    let old_len = get_str_mut(&mut ctx.keys, key)?.map(|s| s.len());
    let total = match old_len {
        None => {
            // A new key takes the argument as SET would encode it.
            store(
                &mut ctx.keys,
                key,
                StrValue::from_bytes(tail),
                false,
                None,
                "append",
            )?;
            tail.len()
        }
        Some(len) => {
            check_string_length(ctx, len as u64, tail.len() as u64)?;
            let Some(s) = get_str_mut(&mut ctx.keys, key)? else {
                return Err(CmdError::err("internal error: key vanished"));
            };
            // Through StrValue so a compressed bitmap stays compressed.
            let total = s.append(tail);
            ctx.keys.modified(key)?;
            ctx.keys.notify(Class::STRING, "append", key);
            total
        }
    };
    ctx.out.int(total as i64);
    Ok(())
}

fn strlen(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let n = get_str(&mut ctx.keys, a[1])?.map_or(0, |s| s.len());
    ctx.out.int(n as i64);
    Ok(())
}

/// GETRANGE and SUBSTR.
fn getrange(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let start = args::int(a[2])?;
    let end = args::int(a[3])?;
    let Some(s) = get_str(&mut ctx.keys, a[1])? else {
        ctx.out.bulk(b"");
        return Ok(());
    };
    // Only the range is read: a compressed bitmap is not materialized.
    match substring_range(s.len(), start, end) {
        Some(r) => ctx.out.bulk(&s.range_bytes(r.start, r.end)),
        None => ctx.out.bulk(b""),
    }
    Ok(())
}

/// The bytes of the strings under two keys for LCS (empty when absent),
/// both looked up before either is checked, as Redis does.
fn lcs_inputs(keys: &mut Keys<'_>, k1: &[u8], k2: &[u8]) -> Result<(Vec<u8>, Vec<u8>), CmdError> {
    let wrong = || CmdError::err("The specified keys must contain string values");
    let a = match keys.value(k1)? {
        None => Some(Vec::new()),
        Some(Value::Str(s)) => Some(s.as_bytes().into_owned()),
        Some(_) => None,
    };
    let b = match keys.value(k2)? {
        None => Some(Vec::new()),
        Some(Value::Str(s)) => Some(s.as_bytes().into_owned()),
        Some(_) => None,
    };
    match (a, b) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(wrong()),
    }
}

/// One common run found by LCS IDX: its ranges in both strings (inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LcsMatch {
    a: (usize, usize),
    b: (usize, usize),
}

impl LcsMatch {
    fn len(&self) -> usize {
        self.a.1 - self.a.0 + 1
    }
}

/// The longest common subsequence of `a` and `b` (the classic dynamic
/// programming table, `table_bytes` at most, as Redis bounds it by
/// `proto-max-bulk-len`), with its runs from the end backwards, as Redis
/// walks them.
fn longest_common(
    a: &[u8],
    b: &[u8],
    table_bytes: u64,
) -> Result<(Vec<u8>, Vec<LcsMatch>), CmdError> {
    if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
        return Err(CmdError::err("String too long for LCS"));
    }
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u64 + 1) * (blen as u64 + 1);
    if cells.saturating_mul(4) > table_bytes {
        return Err(CmdError::err(
            "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let mut table: Vec<u32> = Vec::new();
    if table.try_reserve_exact(cells as usize).is_err() {
        return Err(CmdError::err(
            "Insufficient memory, failed allocating transient memory for LCS",
        ));
    }
    table.resize(cells as usize, 0);
    let w = blen + 1;
    for i in 1..=alen {
        for j in 1..=blen {
            table[i * w + j] = if a[i - 1] == b[j - 1] {
                table[(i - 1) * w + j - 1] + 1
            } else {
                table[(i - 1) * w + j].max(table[i * w + j - 1])
            };
        }
    }
    let len = table[alen * w + blen] as usize;
    let mut common = vec![0u8; len];
    let mut runs = Vec::new();
    let mut run: Option<LcsMatch> = None;
    let (mut i, mut j, mut k) = (alen, blen, len);
    while i > 0 && j > 0 {
        let mut close = false;
        if a[i - 1] == b[j - 1] {
            k -= 1;
            common[k] = a[i - 1];
            match run.as_mut() {
                None => {
                    run = Some(LcsMatch {
                        a: (i - 1, i - 1),
                        b: (j - 1, j - 1),
                    })
                }
                // Still contiguous: the run grows backwards.
                Some(r) if r.a.0 == i && r.b.0 == j => {
                    r.a.0 -= 1;
                    r.b.0 -= 1;
                }
                Some(_) => close = true,
            }
            // A run that reached the start of either string ends here.
            if run.is_some_and(|r| r.a.0 == 0 || r.b.0 == 0) {
                close = true;
            }
            i -= 1;
            j -= 1;
        } else {
            if table[(i - 1) * w + j] > table[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            close = run.is_some();
        }
        if close {
            if let Some(r) = run.take() {
                runs.push(r);
            }
        }
    }
    Ok((common, runs))
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN].
fn lcs(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (x, y) = lcs_inputs(&mut ctx.keys, a[1], a[2])?;
    let (mut want_len, mut want_idx, mut with_len) = (false, false, false);
    let mut min_len: i64 = 0;
    let mut i = 3;
    while i < a.len() {
        let opt = a[i];
        if args::is(opt, "idx") {
            want_idx = true;
        } else if args::is(opt, "len") {
            want_len = true;
        } else if args::is(opt, "withmatchlen") {
            with_len = true;
        } else if args::is(opt, "minmatchlen") && i + 1 < a.len() {
            min_len = args::int(a[i + 1])?.max(0);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if want_idx && want_len {
        return Err(CmdError::err(
            "If you want both the length and indexes, please just use IDX.",
        ));
    }
    let max = ctx.server.proto_max_bulk_len.load(Ordering::Relaxed);
    let (common, runs) = longest_common(&x, &y, max)?;
    if want_idx {
        let shown: Vec<&LcsMatch> = runs
            .iter()
            .filter(|r| min_len == 0 || r.len() as u64 >= min_len as u64)
            .collect();
        let out = &mut *ctx.out;
        out.map(2);
        out.bulk(b"matches");
        out.array(shown.len());
        for r in shown {
            out.array(2 + with_len as usize);
            out.array(2);
            out.int(r.a.0 as i64);
            out.int(r.a.1 as i64);
            out.array(2);
            out.int(r.b.0 as i64);
            out.int(r.b.1 as i64);
            if with_len {
                out.int(r.len() as i64);
            }
        }
        out.bulk(b"len");
        out.int(common.len() as i64);
    } else if want_len {
        ctx.out.int(common.len() as i64);
    } else {
        ctx.out.bulk(&common);
    }
    Ok(())
}

/// The byte range GETRANGE returns for a string of `len` bytes, with
/// Redis's index rules (negative from the end, clamped); `None` if empty.
fn substring_range(len: usize, start: i64, end: i64) -> Option<std::ops::Range<usize>> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let len = len as i64;
    let start = if start < 0 {
        len.wrapping_add(start)
    } else {
        start
    }
    .max(0);
    let end = if end < 0 { len.wrapping_add(end) } else { end }
        .max(0)
        .min(len - 1);
    if start > end || len == 0 {
        return None;
    }
    Some(start as usize..end as usize + 1)
}

fn setrange(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (key, value) = (a[1], a[3]);
    let offset = args::int(a[2])?;
    if offset < 0 {
        return Err(CmdError::err("offset is out of range"));
    }
    let offset = offset as u64;
    let old_len = get_str_mut(&mut ctx.keys, key)?.map(|s| s.len());
    let Some(old_len) = old_len else {
        // Setting nothing on a missing key creates nothing.
        if value.is_empty() {
            ctx.out.int(0);
            return Ok(());
        }
        check_string_length(ctx, offset, value.len() as u64)?;
        // A far offset makes a mostly-zero string, stored compressed.
        let mut v = StrValue::raw(Vec::new());
        v.write_bytes(offset, value);
        let total = v.len();
        store(&mut ctx.keys, key, v, false, None, "setrange")?;
        ctx.out.int(total as i64);
        return Ok(());
    };
    if value.is_empty() {
        ctx.out.int(old_len as i64);
        return Ok(());
    }
    check_string_length(ctx, offset, value.len() as u64)?;
    let Some(s) = get_str_mut(&mut ctx.keys, key)? else {
        return Err(CmdError::err("internal error: key vanished"));
    };
    // Through StrValue so a compressed bitmap stays compressed.
    s.write_bytes(offset, value);
    let total = s.len();
    ctx.keys.modified(key)?;
    ctx.keys.notify(Class::STRING, "setrange", key);
    ctx.out.int(total as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::protocol::Reply;
    use crate::state::client::{ClientInfo, ClientState};
    use crate::state::config::Config;
    use crate::state::{unix_ms, Server};

    /// Runs commands in process, with direct access to the keyspace.
    struct Harness {
        server: Arc<Server>,
        client: ClientState,
    }

    impl Harness {
        fn new() -> Self {
            let info = Arc::new(ClientInfo::new(1, "test".into(), "test".into(), 0));
            Harness {
                server: Server::new(Config::default(), None),
                client: ClientState::new(info, true),
            }
        }

        fn run_bytes(&mut self, args: &[&[u8]]) -> Vec<u8> {
            let mut out = Reply::new(false);
            super::super::execute(&self.server, &mut self.client, &mut out, args);
            out.buf
        }

        fn run(&mut self, line: &str) -> String {
            let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
            String::from_utf8_lossy(&self.run_bytes(&args)).into_owned()
        }

        /// Reads the stored entry of `key` in db 0: (encoding, expiry),
        /// whether or not it has expired.
        fn stored(&self, key: &str) -> Option<(&'static str, Option<u64>)> {
            let ks = &self.server.keyspace;
            let g = ks.lock_one(ks.shard_of(key.as_bytes()), false);
            let db = &g.shard().dbs[0];
            db.get(key.as_bytes(), 0)
                .map(|e| (e.value.encoding(), e.expire_at()))
        }

        fn type_name(&self, key: &str) -> &'static str {
            let ks = &self.server.keyspace;
            let g = ks.lock_one(ks.shard_of(key.as_bytes()), false);
            g.shard().dbs[0]
                .get(key.as_bytes(), 0)
                .map_or("none", |e| e.value.type_name())
        }

        fn encoding(&self, key: &str) -> &'static str {
            self.stored(key).map_or("none", |s| s.0)
        }

        fn expire_at(&self, key: &str) -> Option<u64> {
            self.stored(key).and_then(|s| s.1)
        }

        /// Stores a value of another type under `key`.
        fn insert_set(&self, key: &str) {
            let ks = &self.server.keyspace;
            let mut g = ks.lock_one(ks.shard_of(key.as_bytes()), true);
            if let Some(shard) = g.shard_mut() {
                shard.dbs[0].insert(key.as_bytes(), Value::Set(Box::default()), false, 0);
            }
        }
    }

    const WRONGTYPE: &str =
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

    #[test]
    fn encodings_follow_redis() {
        let mut h = Harness::new();
        h.run("SET k 123");
        assert_eq!(h.encoding("k"), "int");
        h.run("SET k 0123");
        assert_eq!(h.encoding("k"), "embstr");
        h.run(&format!("SET k {}", "a".repeat(44)));
        assert_eq!(h.encoding("k"), "embstr");
        h.run(&format!("SET k {}", "a".repeat(45)));
        assert_eq!(h.encoding("k"), "raw");
        // APPEND to a missing key stores the argument as SET would.
        assert_eq!(h.run("APPEND a 123"), ":3\r\n");
        assert_eq!(h.encoding("a"), "int");
        h.run("APPEND b hello");
        assert_eq!(h.encoding("b"), "embstr");
        // Changing a value in place makes it raw, even an empty append.
        h.run("APPEND a ");
        assert_eq!(h.encoding("a"), "raw");
        assert_eq!(h.run("INCR a"), ":124\r\n");
        assert_eq!(h.encoding("a"), "int");
        h.run("SETRANGE r 2 x");
        assert_eq!(h.encoding("r"), "raw");
        h.run("SET i 12345");
        h.run("SETRANGE i 1 ");
        assert_eq!(h.encoding("i"), "int");
        h.run("SETRANGE i 1 x");
        assert_eq!(h.encoding("i"), "raw");
        h.run("SET f 1");
        assert_eq!(h.run("INCRBYFLOAT f 2"), "$1\r\n3\r\n");
        assert_eq!(h.encoding("f"), "embstr");
        h.run("INCRBYFLOAT f 1e100");
        assert_eq!(h.encoding("f"), "raw");
        h.run("MSET m1 7 m2 seven");
        assert_eq!((h.encoding("m1"), h.encoding("m2")), ("int", "embstr"));
        h.run("GETSET m2 8");
        assert_eq!(h.encoding("m2"), "int");
        h.run("SETEX m3 100 9");
        assert_eq!(h.encoding("m3"), "int");
    }

    #[test]
    fn expiry_times_are_absolute_ms() {
        let mut h = Harness::new();
        let before = unix_ms();
        h.run("SET k v EX 100");
        let after = unix_ms();
        let at = h.expire_at("k").unwrap_or(0);
        assert!(at >= before + 100_000 && at <= after + 100_000, "{at}");
        h.run("SET k v PXAT 99999999999999");
        assert_eq!(h.expire_at("k"), Some(99_999_999_999_999));
        h.run("SET k v EXAT 99999999999");
        assert_eq!(h.expire_at("k"), Some(99_999_999_999_000));
        h.run("SET k v2 KEEPTTL");
        assert_eq!(h.expire_at("k"), Some(99_999_999_999_000));
        for keeps in [
            "INCR n",
            "INCRBYFLOAT n 1.5",
            "APPEND n 0",
            "SETRANGE n 0 7",
        ] {
            h.run("SETEX n 100 1");
            let at = h.expire_at("n");
            h.run(keeps);
            assert_eq!(h.expire_at("n"), at, "{keeps}");
        }
        for clears in ["SET n v", "GETSET n v", "MSET n v", "GETEX n PERSIST"] {
            h.run("SETEX n 100 1");
            h.run(clears);
            assert_eq!(h.expire_at("n"), None, "{clears}");
        }
        h.run("SET k v");
        h.run("GETEX k PXAT 99999999999999");
        assert_eq!(h.expire_at("k"), Some(99_999_999_999_999));
        h.run("GETEX k");
        assert_eq!(h.expire_at("k"), Some(99_999_999_999_999));
        h.run("PSETEX k 5000 v");
        assert!(h.expire_at("k").unwrap_or(0) >= before + 5000);
        // SET with a time already past stores the key, which reads as gone.
        assert_eq!(h.run("SET p v PXAT 1"), "+OK\r\n");
        assert_eq!(h.expire_at("p"), Some(1));
        assert_eq!(h.run("GET p"), "$-1\r\n");
        // GETEX with a past absolute time deletes at once.
        h.run("SET q v");
        assert_eq!(h.run("GETEX q EXAT 1"), "$1\r\nv\r\n");
        assert!(h.stored("q").is_none());
        // A key past its expiry is gone for every command.
        h.run("SET x 5 PXAT 1");
        assert_eq!(h.run("INCR x"), ":1\r\n");
        assert_eq!(h.expire_at("x"), None);
        h.run("SET x 5 PXAT 1");
        assert_eq!(h.run("SET x v KEEPTTL"), "+OK\r\n");
        assert_eq!(h.run("GET x"), "$1\r\nv\r\n");
        h.run("SET x 5 PXAT 1");
        assert_eq!(h.run("SETNX x v"), ":1\r\n");
        h.run("SET x 5 PXAT 1");
        assert_eq!(h.run("APPEND x ab"), ":2\r\n");
    }

    #[test]
    fn wrong_type_everywhere() {
        let mut h = Harness::new();
        h.insert_set("w");
        for cmd in [
            "GET w",
            "SET w v GET",
            "SET w v NX GET",
            "GETSET w v",
            "GETDEL w",
            "GETEX w",
            "GETEX w EX 0",
            "INCR w",
            "DECR w",
            "INCRBY w 1",
            "DECRBY w 1",
            "INCRBYFLOAT w 1",
            "INCRBYFLOAT w abc",
            "APPEND w x",
            "STRLEN w",
            "GETRANGE w 0 1",
            "SUBSTR w 0 1",
            "SETRANGE w 0 x",
            "SETRANGE w 0 ",
        ] {
            assert_eq!(h.run(cmd), WRONGTYPE, "{cmd}");
            assert_eq!(h.type_name("w"), "set", "{cmd}");
        }
        // Argument errors come first where Redis checks them first.
        assert_eq!(
            h.run("INCRBY w abc"),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(h.run("SETRANGE w -1 x"), "-ERR offset is out of range\r\n");
        assert_eq!(h.run("GETEX w foo"), "-ERR syntax error\r\n");
        assert_eq!(
            h.run("SET w v EX 0 GET"),
            "-ERR invalid expire time in 'set' command\r\n"
        );
        assert_eq!(h.run("MGET w"), "*1\r\n$-1\r\n");
        assert_eq!(h.run("SETNX w v"), ":0\r\n");
        assert_eq!(h.run("MSETNX a 1 w 2"), ":0\r\n");
        assert_eq!(h.run("SET w v"), "+OK\r\n");
        assert_eq!(h.encoding("w"), "embstr");
    }

    #[test]
    fn binary_safe() {
        let mut h = Harness::new();
        let key: &[u8] = b"k\x00\xff";
        let value: &[u8] = b"\x00\r\n\xfe";
        assert_eq!(h.run_bytes(&[b"SET", key, value]), b"+OK\r\n");
        assert_eq!(h.run_bytes(&[b"GET", key]), b"$4\r\n\x00\r\n\xfe\r\n");
        assert_eq!(h.run_bytes(&[b"APPEND", key, b"\x00"]), b":5\r\n");
        assert_eq!(
            h.run_bytes(&[b"GETRANGE", key, b"-2", b"-1"]),
            b"$2\r\n\xfe\x00\r\n"
        );
        assert_eq!(h.run_bytes(&[b"GET", b"k"]), b"$-1\r\n");
    }

    #[test]
    fn string_length_limit() {
        let mut h = Harness::new();
        h.server.proto_max_bulk_len.store(10, Ordering::Relaxed);
        let too_big = "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n";
        assert_eq!(h.run("SETRANGE k 10 x"), too_big);
        assert_eq!(h.run("SETRANGE k 9 x"), ":10\r\n");
        assert_eq!(h.run("APPEND k x"), too_big);
        assert_eq!(h.run("SETRANGE k 9223372036854775807 x"), too_big);
        assert_eq!(h.run("SETRANGE k 9223372036854775807 "), ":10\r\n");
        assert_eq!(h.run("SETRANGE n 100 "), ":0\r\n");
        assert!(h.stored("n").is_none());
    }

    #[test]
    fn substring_ranges() {
        assert_eq!(substring_range(11, 0, 4), Some(0..5));
        assert_eq!(substring_range(11, -5, -1), Some(6..11));
        assert_eq!(substring_range(11, -1, -5), None);
        assert_eq!(substring_range(11, -100, -50), Some(0..1));
        assert_eq!(substring_range(11, 0, -100), Some(0..1));
        assert_eq!(substring_range(11, i64::MIN, i64::MAX), Some(0..11));
        assert_eq!(substring_range(11, i64::MAX, i64::MIN), None);
        assert_eq!(substring_range(0, 0, -1), None);
        assert_eq!(substring_range(0, 0, 0), None);
    }

    #[test]
    fn option_parsing() {
        let parse = |line: &str, getex: bool| {
            let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
            SetOptions::parse(&args, getex).map(|o| {
                (
                    o.nx,
                    o.xx,
                    o.get,
                    o.keep_ttl,
                    o.persist,
                    o.expire.map(|e| e.kind),
                )
            })
        };
        assert_eq!(
            parse("nx GET px 5", false),
            Ok((true, false, true, false, false, Some(ExpireKind::Px)))
        );
        assert_eq!(
            parse("EX 1 EX 2", false).map(|o| o.5),
            Ok(Some(ExpireKind::Ex))
        );
        assert_eq!(parse("NX\0junk", false).map(|o| o.0), Ok(true));
        for bad in ["NX XX", "EX 1 PX 1", "KEEPTTL EX 1", "EX", "PERSIST", "foo"] {
            assert_eq!(parse(bad, false), Err(CmdError::Syntax), "{bad}");
        }
        for bad in ["NX", "GET", "KEEPTTL", "PERSIST EX 1", "EX 1 PERSIST"] {
            assert_eq!(parse(bad, true), Err(CmdError::Syntax), "{bad}");
        }
        fn exp(kind: ExpireKind, time: &str) -> ExpireArg<'_> {
            ExpireArg {
                kind,
                time: time.as_bytes(),
            }
        }
        assert_eq!(exp(ExpireKind::Ex, "2").resolve(1000, "set"), Ok(3000));
        assert_eq!(exp(ExpireKind::PxAt, "5").resolve(1000, "set"), Ok(5));
        let invalid = Err(CmdError::err("invalid expire time in 'getex' command"));
        assert_eq!(exp(ExpireKind::Ex, "0").resolve(1000, "getex"), invalid);
        assert_eq!(
            exp(ExpireKind::Ex, "9223372036854776").resolve(0, "getex"),
            invalid
        );
        assert_eq!(
            exp(ExpireKind::Px, "9223372036854775807").resolve(1, "getex"),
            invalid
        );
        assert_eq!(
            exp(ExpireKind::Px, "x").resolve(1, "getex"),
            Err(CmdError::NotInteger)
        );
    }

    #[test]
    fn longest_common_finds_the_runs_from_the_end() {
        let (common, runs) = super::longest_common(b"ohmytext", b"mynewtext", 1 << 20).unwrap();
        assert_eq!(common, b"mytext");
        let ranges: Vec<_> = runs.iter().map(|r| (r.a, r.b, r.len())).collect();
        assert_eq!(ranges, vec![((4, 7), (5, 8), 4), ((2, 3), (0, 1), 2)]);
        let (common, runs) = super::longest_common(b"", b"abc", 1 << 20).unwrap();
        assert!(common.is_empty() && runs.is_empty());
        // (9 * 9 cells) * 4 bytes is over 100.
        assert!(super::longest_common(b"ohmytext", b"mynewtex", 100).is_err());
    }

    #[test]
    fn table_entries() {
        let t = super::super::table::table();
        let mset = t
            .get(b"mset")
            .map(|c| c.spec.key_indexes(&[b"mset", b"a", b"1", b"b", b"2"]));
        assert_eq!(mset.as_deref(), Some(&[1usize, 3][..]));
        let mget = t
            .get(b"mget")
            .map(|c| c.spec.key_indexes(&[b"mget", b"a", b"b"]));
        assert_eq!(mget.as_deref(), Some(&[1usize, 2][..]));
        let flags = |name: &str| t.get(name.as_bytes()).map_or(0, |c| c.spec.flags);
        assert_eq!(flags("get"), READONLY | FAST);
        assert_eq!(flags("set"), WRITE | DENYOOM);
        assert_eq!(flags("getdel"), WRITE | FAST);
        assert_eq!(flags("getrange"), READONLY);
        assert_eq!(flags("incrbyfloat"), WRITE | DENYOOM | FAST);
        assert_eq!(t.get(b"substr").map(|c| c.spec.arity), Some(4));
    }
}
