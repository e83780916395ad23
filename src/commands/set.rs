//! Set commands: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD,
//! SRANDMEMBER, SPOP, SMOVE, SINTER, SINTERCARD, SUNION, SDIFF, the STORE
//! variants, and SSCAN. Argument rules, error lines and reply types follow
//! Redis 7.0; the structure lives in `engine::set`.

use smallvec::SmallVec;

use super::args;
use super::table::{flags::*, CommandSpec, KeySpec};
use super::{Ctx, Keys};
use crate::engine::glob;
use crate::engine::set::{Member, SetValue};
use crate::engine::Value;
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::state::notify::Class;

const ALL_KEYS: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 1,
};

/// The largest count SRANDMEMBER accepts with repeats: Redis would try to
/// build a reply of any size (and run out of memory); Rostrum refuses
/// replies beyond this many members.
pub const MAX_RANDOM_REPEATS: u64 = 1 << 26;

#[allow(clippy::too_many_arguments)]
const fn set_cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: super::table::Handler,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, keys, handler)
        .documented("set", summary, since, complexity)
}

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    set_cmd(
        "sadd",
        -3,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        sadd,
        "Add one or more members to a set",
        "1.0.0",
        "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
    ),
    set_cmd(
        "srem",
        -3,
        WRITE | FAST,
        KeySpec::FIRST,
        srem,
        "Remove one or more members from a set",
        "1.0.0",
        "O(N) where N is the number of members to be removed.",
    ),
    set_cmd(
        "smembers",
        2,
        READONLY,
        KeySpec::FIRST,
        smembers,
        "Get all the members in a set",
        "1.0.0",
        "O(N) where N is the set cardinality.",
    ),
    set_cmd(
        "sismember",
        3,
        READONLY | FAST,
        KeySpec::FIRST,
        sismember,
        "Determine if a given value is a member of a set",
        "1.0.0",
        "O(1)",
    ),
    set_cmd(
        "smismember",
        -3,
        READONLY | FAST,
        KeySpec::FIRST,
        smismember,
        "Returns the membership associated with the given elements for a set",
        "6.2.0",
        "O(N) where N is the number of elements being checked for membership",
    ),
    set_cmd(
        "scard",
        2,
        READONLY | FAST,
        KeySpec::FIRST,
        scard,
        "Get the number of members in a set",
        "1.0.0",
        "O(1)",
    ),
    set_cmd(
        "srandmember",
        -2,
        READONLY,
        KeySpec::FIRST,
        srandmember,
        "Get one or multiple random members from a set",
        "1.0.0",
        "Without the count argument O(1), otherwise O(N) where N is the absolute value of the passed count.",
    ),
    set_cmd(
        "spop",
        -2,
        WRITE | FAST,
        KeySpec::FIRST,
        spop,
        "Remove and return one or multiple random members from a set",
        "1.0.0",
        "Without the count argument O(1), otherwise O(N) where N is the value of the passed count.",
    ),
    set_cmd(
        "smove",
        4,
        WRITE | FAST,
        KeySpec::FIRST_TWO,
        smove,
        "Move a member from one set to another",
        "1.0.0",
        "O(1)",
    ),
    set_cmd(
        "sinter",
        -2,
        READONLY,
        ALL_KEYS,
        sinter,
        "Intersect multiple sets",
        "1.0.0",
        "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.",
    ),
    set_cmd(
        "sintercard",
        -3,
        READONLY,
        KeySpec::Find(sintercard_keys),
        sintercard,
        "Intersect multiple sets and return the cardinality of the result",
        "7.0.0",
        "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.",
    ),
    set_cmd(
        "sunion",
        -2,
        READONLY,
        ALL_KEYS,
        sunion,
        "Add multiple sets",
        "1.0.0",
        "O(N) where N is the total number of elements in all given sets.",
    ),
    set_cmd(
        "sdiff",
        -2,
        READONLY,
        ALL_KEYS,
        sdiff,
        "Subtract multiple sets",
        "1.0.0",
        "O(N) where N is the total number of elements in all given sets.",
    ),
    set_cmd(
        "sinterstore",
        -3,
        WRITE | DENYOOM,
        ALL_KEYS,
        sinterstore,
        "Intersect multiple sets and store the resulting set in a key",
        "1.0.0",
        "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.",
    ),
    set_cmd(
        "sunionstore",
        -3,
        WRITE | DENYOOM,
        ALL_KEYS,
        sunionstore,
        "Add multiple sets and store the resulting set in a key",
        "1.0.0",
        "O(N) where N is the total number of elements in all given sets.",
    ),
    set_cmd(
        "sdiffstore",
        -3,
        WRITE | DENYOOM,
        ALL_KEYS,
        sdiffstore,
        "Subtract multiple sets and store the resulting set in a key",
        "1.0.0",
        "O(N) where N is the total number of elements in all given sets.",
    ),
    set_cmd(
        "sscan",
        -3,
        READONLY,
        KeySpec::FIRST,
        sscan,
        "Incrementally iterate Set elements",
        "2.8.0",
        "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..",
    ),
];

// ---------------------------------------------------------------------------
// Shared helpers

/// `set-max-intset-entries`, read per command so CONFIG SET applies at once.
fn max_intset(ctx: &Ctx) -> usize {
    usize::try_from(ctx.server.config.read().set_max_intset_entries).unwrap_or(usize::MAX)
}

/// The set under `key` for reading (counts a keyspace hit or miss);
/// `WRONGTYPE` if the key holds another type.
pub fn read_set<'k>(keys: &'k mut Keys<'_>, key: &[u8]) -> Result<Option<&'k SetValue>, CmdError> {
    keys.typed(key, |v| match v {
        Value::Set(x) => Some(x),
        _ => None,
    })
}

/// The set under `key` for change; `WRONGTYPE` if another type.
fn write_set<'k>(keys: &'k mut Keys<'_>, key: &[u8]) -> Result<Option<&'k mut SetValue>, CmdError> {
    keys.typed_mut(key, |v| match v {
        Value::Set(x) => Some(x),
        _ => None,
    })
}

/// The sets under `names` (`None` for a missing key), after checking every
/// key's type first as Redis does. `count_lookups` counts keyspace hits and
/// misses (the read commands; the STORE variants look up for writing).
fn load_sets<'k>(
    keys: &'k mut Keys<'_>,
    names: &[&[u8]],
    count_lookups: bool,
) -> Result<Vec<Option<&'k SetValue>>, CmdError> {
    for name in names {
        let value = if count_lookups {
            keys.value(name)?
        } else {
            keys.part(name)?.get(name, keys.now_ms).map(|e| &e.value)
        };
        if matches!(value, Some(v) if !matches!(v, Value::Set(_))) {
            return Err(CmdError::WrongType);
        }
    }
    let keys: &'k Keys<'_> = keys;
    names
        .iter()
        .map(|name| {
            Ok(match keys.part(name)?.get(name, keys.now_ms) {
                Some(e) => match &e.value {
                    Value::Set(s) => Some(&**s),
                    _ => None,
                },
                None => None,
            })
        })
        .collect()
}

fn bulk_member(out: &mut Reply, m: Member<'_>) {
    out.bulk(m.bytes(&mut itoa::Buffer::new()));
}

/// A whole set as a set reply (`~` in RESP3).
fn reply_set(out: &mut Reply, s: &SetValue) {
    out.set(s.len());
    s.iter().for_each(|m| bulk_member(out, m));
}

/// Stores `result` under `dst` (replacing any value and its TTL), or deletes
/// `dst` when the result is empty; replies the cardinality. Raises `event`
/// (or `del` for a deleted `dst`).
fn store(ctx: &mut Ctx, dst: &[u8], result: SetValue, event: &'static str) -> CmdResult {
    let n = result.len();
    if n == 0 {
        if ctx.keys.remove(dst)?.is_some() {
            ctx.keys.notify(Class::GENERIC, "del", dst);
        }
    } else {
        ctx.keys.set(dst, Value::Set(Box::new(result)), false)?;
        ctx.keys.notify(Class::SET, event, dst);
    }
    ctx.out.int(n as i64);
    Ok(())
}

// ---------------------------------------------------------------------------
// Single-key commands

fn sadd(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let max = max_intset(ctx);
    let key = a[1];
    let members = &a[2..];
    let added = match write_set(&mut ctx.keys, key)? {
        Some(s) => members.iter().filter(|m| s.insert(m, max)).count(),
        None => {
            let s = SetValue::from_members(members.iter().copied(), max);
            let n = s.len();
            ctx.keys.set(key, Value::Set(Box::new(s)), false)?;
            ctx.keys.notify(Class::SET, "sadd", key);
            ctx.out.int(n as i64);
            return Ok(());
        }
    };
    if added > 0 {
        ctx.keys.modified(key)?;
        ctx.keys.notify(Class::SET, "sadd", key);
    }
    ctx.out.int(added as i64);
    Ok(())
}

fn srem(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let key = a[1];
    let Some(s) = write_set(&mut ctx.keys, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let removed = a[2..].iter().filter(|m| s.remove(m)).count();
    let emptied = s.is_empty();
    if removed > 0 {
        ctx.keys.notify(Class::SET, "srem", key);
    }
    if emptied {
        ctx.keys.remove(key)?;
        ctx.keys.notify(Class::GENERIC, "del", key);
    } else if removed > 0 {
        ctx.keys.modified(key)?;
    }
    ctx.out.int(removed as i64);
    Ok(())
}

fn smembers(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    match read_set(&mut ctx.keys, a[1])? {
        Some(s) => reply_set(ctx.out, s),
        None => ctx.out.set(0),
    }
    Ok(())
}

fn sismember(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let found = read_set(&mut ctx.keys, a[1])?.is_some_and(|s| s.contains(a[2]));
    ctx.out.int(found as i64);
    Ok(())
}

fn smismember(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let s = read_set(&mut ctx.keys, a[1])?;
    ctx.out.array(a.len() - 2);
    for m in &a[2..] {
        ctx.out.int(s.is_some_and(|s| s.contains(m)) as i64);
    }
    Ok(())
}

fn scard(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let n = read_set(&mut ctx.keys, a[1])?.map_or(0, |s| s.len());
    ctx.out.int(n as i64);
    Ok(())
}

fn srandmember(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if a.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let Some(&count_arg) = a.get(2) else {
        match read_set(&mut ctx.keys, a[1])? {
            Some(s) => match s.random_member(&mut rand::rng()) {
                Some(m) => bulk_member(ctx.out, m),
                None => ctx.out.null(),
            },
            None => ctx.out.null(),
        }
        return Ok(());
    };
    let count = args::int(count_arg)?;
    if count == i64::MIN {
        return Err(CmdError::err(
            "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    if count < 0 && count.unsigned_abs() > MAX_RANDOM_REPEATS {
        return Err(CmdError::err("value is out of range"));
    }
    let Some(s) = read_set(&mut ctx.keys, a[1])? else {
        ctx.out.array(0);
        return Ok(());
    };
    let rng = &mut rand::rng();
    if count < 0 {
        // With repeats: each pick is independent.
        let n = count.unsigned_abs() as usize;
        ctx.out.array(n);
        for _ in 0..n {
            if let Some(m) = s.random_member(rng) {
                bulk_member(ctx.out, m);
            }
        }
    } else {
        let picked = s.random_distinct(count as usize, rng);
        ctx.out.array(picked.len());
        picked.into_iter().for_each(|m| bulk_member(ctx.out, m));
    }
    Ok(())
}

fn spop(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    match a.len() {
        2 => spop_one(ctx, a[1]),
        3 => {
            let count = args::int(a[2])
                .ok()
                .filter(|&n| n >= 0)
                .ok_or_else(|| CmdError::err("value is out of range, must be positive"))?;
            spop_count(ctx, a[1], count as usize)
        }
        _ => Err(CmdError::Syntax),
    }
}

fn spop_one(ctx: &mut Ctx, key: &[u8]) -> CmdResult {
    let Some(s) = write_set(&mut ctx.keys, key)? else {
        ctx.out.null();
        return Ok(());
    };
    let Some(member) = s.random_member(&mut rand::rng()).map(|m| m.to_vec()) else {
        ctx.out.null();
        return Ok(());
    };
    s.remove(&member);
    let emptied = s.is_empty();
    ctx.keys.notify(Class::SET, "spop", key);
    if emptied {
        ctx.keys.remove(key)?;
        ctx.keys.notify(Class::GENERIC, "del", key);
    } else {
        ctx.keys.modified(key)?;
    }
    ctx.keys
        .propagate_as(vec![b"SREM".to_vec(), key.to_vec(), member.clone()]);
    ctx.out.bulk(&member);
    Ok(())
}

fn spop_count(ctx: &mut Ctx, key: &[u8], count: usize) -> CmdResult {
    let max = max_intset(ctx);
    let Some(s) = write_set(&mut ctx.keys, key)? else {
        ctx.out.set(0);
        return Ok(());
    };
    if count == 0 {
        ctx.out.set(0);
        return Ok(());
    }
    if count >= s.len() {
        // Everything goes: the reply is the set, the AOF records a DEL.
        reply_set(ctx.out, s);
        ctx.keys.notify(Class::SET, "spop", key);
        ctx.keys.remove(key)?;
        ctx.keys.notify(Class::GENERIC, "del", key);
        ctx.keys.propagate_as(vec![b"DEL".to_vec(), key.to_vec()]);
        return Ok(());
    }
    let popped: Vec<Vec<u8>> = s
        .random_distinct(count, &mut rand::rng())
        .into_iter()
        .map(|m| m.to_vec())
        .collect();
    for m in &popped {
        s.remove(m);
    }
    // Redis rebuilds the set from the few members that remain when most of
    // it was popped, so those get the encoding of a fresh set.
    if s.len().saturating_mul(5) < count {
        s.reencode(max);
    }
    ctx.keys.modified(key)?;
    ctx.keys.notify(Class::SET, "spop", key);
    ctx.out.set(popped.len());
    for m in &popped {
        ctx.out.bulk(m);
    }
    // The AOF records SREMs of what was popped, 1,024 members at a time.
    for chunk in popped.chunks(1024) {
        let mut cmd = Vec::with_capacity(chunk.len() + 2);
        cmd.push(b"SREM".to_vec());
        cmd.push(key.to_vec());
        cmd.extend(chunk.iter().cloned());
        ctx.keys.propagate_as(cmd);
    }
    Ok(())
}

fn smove(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (src, dst, member) = (a[1], a[2], a[3]);
    let max = max_intset(ctx);
    // Redis answers 0 for a missing source before checking either type.
    if write_set(&mut ctx.keys, src)?.is_none() {
        ctx.out.int(0);
        return Ok(());
    }
    write_set(&mut ctx.keys, dst)?;
    if src == dst {
        let found = write_set(&mut ctx.keys, src)?.is_some_and(|s| s.contains(member));
        ctx.out.int(found as i64);
        return Ok(());
    }
    let Some(s) = write_set(&mut ctx.keys, src)? else {
        ctx.out.int(0);
        return Ok(());
    };
    if !s.remove(member) {
        ctx.out.int(0);
        return Ok(());
    }
    let emptied = s.is_empty();
    ctx.keys.notify(Class::SET, "srem", src);
    if emptied {
        ctx.keys.remove(src)?;
        ctx.keys.notify(Class::GENERIC, "del", src);
    } else {
        ctx.keys.modified(src)?;
    }
    match write_set(&mut ctx.keys, dst)? {
        Some(d) => {
            if d.insert(member, max) {
                ctx.keys.modified(dst)?;
                ctx.keys.notify(Class::SET, "sadd", dst);
            }
        }
        None => {
            let d = SetValue::from_members([member], max);
            ctx.keys.set(dst, Value::Set(Box::new(d)), false)?;
            ctx.keys.notify(Class::SET, "sadd", dst);
        }
    }
    ctx.out.int(1);
    Ok(())
}

fn sscan(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let cursor = args::scan_cursor(a[2]).ok_or_else(|| CmdError::err("invalid cursor"))?;
    let Some(s) = read_set(&mut ctx.keys, a[1])? else {
        ctx.out.array(2);
        ctx.out.bulk(b"0");
        ctx.out.array(0);
        return Ok(());
    };
    let args::ScanOptions { count, pattern, .. } = args::scan_options(&a[3..], false)?;
    let mut found: Vec<Vec<u8>> = Vec::new();
    let mut buf = itoa::Buffer::new();
    let next = s.scan(cursor, count, |m| {
        let bytes = m.bytes(&mut buf);
        if pattern.is_none_or(|p| glob::matches(p, bytes, false)) {
            found.push(bytes.to_vec());
        }
    });
    ctx.out.array(2);
    ctx.out.bulk(itoa::Buffer::new().format(next).as_bytes());
    ctx.out.array(found.len());
    for m in &found {
        ctx.out.bulk(m);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Multi-key commands

/// SINTERCARD's keys: `numkeys` of them after the count (none when the count
/// is not a valid number; the handler reports that).
fn sintercard_keys(a: &[&[u8]]) -> SmallVec<[usize; 4]> {
    match a.get(1).and_then(|n| args::int(n).ok()) {
        Some(n) if n > 0 => (2..a.len()).take(n as usize).collect(),
        _ => SmallVec::new(),
    }
}

/// The members of the intersection, in the order of the smallest set.
fn intersection<'s>(sets: &[Option<&'s SetValue>], limit: usize) -> Vec<Member<'s>> {
    let Some(mut present) = sets.iter().copied().collect::<Option<Vec<&SetValue>>>() else {
        return Vec::new();
    };
    present.sort_by_key(|s| s.len());
    let Some((smallest, others)) = present.split_first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for m in smallest.iter() {
        if others.iter().all(|o| o.contains_member(m)) {
            out.push(m);
            if out.len() == limit {
                break;
            }
        }
    }
    out
}

fn union_of(sets: &[Option<&SetValue>], max: usize) -> SetValue {
    let mut result = SetValue::new();
    let mut buf = itoa::Buffer::new();
    for s in sets.iter().flatten() {
        for m in s.iter() {
            result.insert(m.bytes(&mut buf), max);
        }
    }
    result
}

fn difference_of(sets: &[Option<&SetValue>], max: usize) -> SetValue {
    let mut result = SetValue::new();
    let Some((Some(first), others)) = sets.split_first() else {
        return result;
    };
    let mut buf = itoa::Buffer::new();
    for m in first.iter() {
        if !others.iter().flatten().any(|o| o.contains_member(m)) {
            result.insert(m.bytes(&mut buf), max);
        }
    }
    result
}

fn sinter(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let sets = load_sets(&mut ctx.keys, &a[1..], true)?;
    let members = intersection(&sets, usize::MAX);
    ctx.out.set(members.len());
    members.into_iter().for_each(|m| bulk_member(ctx.out, m));
    Ok(())
}

fn sintercard(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let numkeys = args::int(a[1])
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| CmdError::err("numkeys should be greater than 0"))?;
    let names = a
        .get(2..)
        .and_then(|rest| rest.get(..usize::try_from(numkeys).ok()?))
        .ok_or_else(|| CmdError::err("Number of keys can't be greater than number of args"))?;
    let mut limit = 0usize;
    let mut i = 2 + names.len();
    while i < a.len() {
        match a.get(i + 1) {
            Some(v) if args::is(a[i], "limit") => {
                let n = args::int(v)
                    .ok()
                    .filter(|&n| n >= 0)
                    .ok_or_else(|| CmdError::err("LIMIT can't be negative"))?;
                limit = n as usize;
                i += 2;
            }
            _ => return Err(CmdError::Syntax),
        }
    }
    let sets = load_sets(&mut ctx.keys, names, true)?;
    let limit = if limit == 0 { usize::MAX } else { limit };
    let n = intersection(&sets, limit).len();
    ctx.out.int(n as i64);
    Ok(())
}

fn sunion(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let max = max_intset(ctx);
    let sets = load_sets(&mut ctx.keys, &a[1..], true)?;
    reply_set(ctx.out, &union_of(&sets, max));
    Ok(())
}

fn sdiff(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let max = max_intset(ctx);
    let sets = load_sets(&mut ctx.keys, &a[1..], true)?;
    reply_set(ctx.out, &difference_of(&sets, max));
    Ok(())
}

fn sinterstore(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let max = max_intset(ctx);
    let sets = load_sets(&mut ctx.keys, &a[2..], false)?;
    let mut buf = itoa::Buffer::new();
    let mut result = SetValue::new();
    for m in intersection(&sets, usize::MAX) {
        result.insert(m.bytes(&mut buf), max);
    }
    store(ctx, a[1], result, "sinterstore")
}

fn sunionstore(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let max = max_intset(ctx);
    let sets = load_sets(&mut ctx.keys, &a[2..], false)?;
    let result = union_of(&sets, max);
    store(ctx, a[1], result, "sunionstore")
}

fn sdiffstore(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let max = max_intset(ctx);
    let sets = load_sets(&mut ctx.keys, &a[2..], false)?;
    let result = difference_of(&sets, max);
    store(ctx, a[1], result, "sdiffstore")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sintercard_finds_numkeys_keys() {
        let a: Vec<&[u8]> = vec![b"sintercard", b"2", b"a", b"b", b"LIMIT", b"1"];
        assert_eq!(sintercard_keys(&a).as_slice(), &[2, 3]);
        let a: Vec<&[u8]> = vec![b"sintercard", b"5", b"a"];
        assert_eq!(sintercard_keys(&a).as_slice(), &[2]);
        let a: Vec<&[u8]> = vec![b"sintercard", b"x", b"a"];
        assert!(sintercard_keys(&a).is_empty());
    }
}
