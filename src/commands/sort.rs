//! SORT and SORT_RO: sort the elements of a list, set or sorted set,
//! numerically or bytewise (ALPHA), by the element itself or by keys and
//! hash fields named by a pattern (BY), and reply with the elements or with
//! keys named by patterns (GET), or store the result as a list (STORE).
//! Argument order, error lines and the order of the result follow Redis
//! 7.0's `sort.c`.
//!
//! BY and GET patterns read keys their arguments do not name, so both
//! commands run with every shard locked ([`CommandSpec::locking_all`]); the
//! key spec still names the sorted key and the STORE destination, for
//! COMMAND GETKEYS. Patterns only ever read strings and hashes.

use std::cmp::Ordering;

use smallvec::SmallVec;

use super::args;
use super::table::{flags::*, CommandSpec, KeySpec};
use super::{list, Ctx, Keys};
use crate::engine::list::ListValue;
use crate::engine::Value;
use crate::error::{CmdError, CmdResult};
use crate::state::notify::Class;

const COMPLEXITY: &str = "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).";

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("sort", -2, WRITE | DENYOOM, KeySpec::Find(sort_keys), sort)
        .documented(
            "generic",
            "Sort the elements in a list, set or sorted set",
            "1.0.0",
            COMPLEXITY,
        )
        .locking_all(),
    CommandSpec::new(
        "sort_ro",
        -2,
        READONLY,
        KeySpec::Find(sort_ro_keys),
        sort_ro,
    )
    .documented(
        "generic",
        "Sort the elements in a list, set or sorted set. Read-only variant of SORT.",
        "7.0.0",
        COMPLEXITY,
    )
    .locking_all(),
];

/// SORT's keys: the sorted key and the last STORE destination, found the
/// way Redis's `sortGetKeys` scans (LIMIT skips two arguments, BY and GET
/// one, STORE none).
fn sort_keys(a: &[&[u8]]) -> SmallVec<[usize; 4]> {
    let mut keys = SmallVec::new();
    if a.len() < 2 {
        return keys;
    }
    keys.push(1);
    let mut store = None;
    let mut i = 2;
    while i < a.len() {
        if args::is(a[i], "limit") {
            i += 2;
        } else if args::is(a[i], "store") && i + 1 < a.len() {
            store = Some(i + 1);
        } else if args::is(a[i], "get") || args::is(a[i], "by") {
            i += 1;
        }
        i += 1;
    }
    keys.extend(store);
    keys
}

/// SORT_RO's key: the sorted key.
fn sort_ro_keys(a: &[&[u8]]) -> SmallVec<[usize; 4]> {
    let mut keys = SmallVec::new();
    if a.len() > 1 {
        keys.push(1);
    }
    keys
}

fn sort(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    sort_generic(ctx, a, false)
}

fn sort_ro(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    sort_generic(ctx, a, true)
}

/// SORT's options, as parsed.
struct SortOptions<'a> {
    desc: bool,
    alpha: bool,
    /// LIMIT offset count (count -1: to the end).
    offset: i64,
    count: i64,
    store: Option<&'a [u8]>,
    by: Option<&'a [u8]>,
    /// Some BY pattern (not necessarily the last) has no `*` (such as
    /// `nosort`): keep the container's order.
    dont_sort: bool,
    gets: Vec<&'a [u8]>,
}

/// Parses the options after the key, in Redis's order: the first bad one
/// is the error.
fn parse_options<'a>(opts: &[&'a [u8]], readonly: bool) -> Result<SortOptions<'a>, CmdError> {
    let mut o = SortOptions {
        desc: false,
        alpha: false,
        offset: 0,
        count: -1,
        store: None,
        by: None,
        dont_sort: false,
        gets: Vec::new(),
    };
    let mut i = 0;
    while i < opts.len() {
        let left = opts.len() - i - 1;
        let opt = opts[i];
        if args::is(opt, "asc") {
            o.desc = false;
        } else if args::is(opt, "desc") {
            o.desc = true;
        } else if args::is(opt, "alpha") {
            o.alpha = true;
        } else if args::is(opt, "limit") && left >= 2 {
            o.offset = args::int(opts[i + 1])?;
            o.count = args::int(opts[i + 2])?;
            i += 2;
        } else if !readonly && args::is(opt, "store") && left >= 1 {
            o.store = Some(opts[i + 1]);
            i += 1;
        } else if args::is(opt, "by") && left >= 1 {
            let pattern = opts[i + 1];
            o.by = Some(pattern);
            // Redis only ever sets this flag: after a BY without `*`,
            // a later BY with one still does not sort.
            o.dont_sort |= !c_str(pattern).contains(&b'*');
            i += 1;
        } else if args::is(opt, "get") && left >= 1 {
            o.gets.push(opts[i + 1]);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Ok(o)
}

/// The container being sorted.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    List,
    Set,
    ZSet,
}

/// One element to sort and what it is sorted by.
struct Item {
    elem: Vec<u8>,
    score: f64,
    /// The BY value for ALPHA with a BY pattern (None: the key is missing).
    by: Option<Vec<u8>>,
}

fn sort_generic(ctx: &mut Ctx, a: &[&[u8]], readonly: bool) -> CmdResult {
    let key = a[1];
    let mut o = parse_options(&a[2..], readonly)?;
    let kind = match ctx.keys.value(key)? {
        None => None,
        Some(Value::List(_)) => Some(Kind::List),
        Some(Value::Set(_)) => Some(Kind::Set),
        Some(Value::ZSet(_)) => Some(Kind::ZSet),
        Some(_) => return Err(CmdError::WrongType),
    };
    // An unsorted set would come out in its internal order: sort it ALPHA
    // when the result is stored or seen by a script, so that replicas, the
    // AOF and scripts agree (Redis 7.0's rule).
    if o.dont_sort && kind == Some(Kind::Set) && (o.store.is_some() || ctx.client.in_script) {
        o.dont_sort = false;
        o.alpha = true;
        o.by = None;
    }
    // Redis converts a listpack sorted set it sorts, for good.
    if kind == Some(Kind::ZSet) {
        if let Some(Value::ZSet(z)) = ctx.keys.value_mut(key)? {
            z.convert_to_skiplist();
        }
    }
    let len = match ctx.keys.value_mut(key)? {
        Some(Value::List(l)) => l.len(),
        Some(Value::Set(s)) => s.len(),
        Some(Value::ZSet(z)) => z.len(),
        _ => 0,
    } as i64;
    // LIMIT, clamped as Redis clamps it (an empty range is end < start).
    let mut start = o.offset.max(0);
    let mut end = if o.count < 0 {
        len - 1
    } else {
        start.wrapping_add(o.count).wrapping_sub(1)
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    let mut items = load(ctx, key, &o, start, end);
    if o.dont_sort && matches!(kind, Some(Kind::List | Kind::ZSet)) {
        // Only the range was loaded.
        end -= start;
        start = 0;
    }
    if !o.dont_sort {
        let failed = score(&mut ctx.keys, &mut items, &o);
        let stored = o.store.is_some();
        let by = o.by.is_some();
        items.sort_by(|x, y| {
            let cmp = compare(x, y, o.alpha, by, stored);
            if o.desc {
                cmp.reverse()
            } else {
                cmp
            }
        });
        if failed {
            return Err(CmdError::err(
                "One or more scores can't be converted into double",
            ));
        }
    }
    let picked: &[Item] = if end >= start {
        items.get(start as usize..=end as usize).unwrap_or_default()
    } else {
        &[]
    };
    match o.store {
        None => reply(ctx, picked, &o.gets),
        Some(dest) => store(ctx, dest, picked, &o.gets),
    }
}

/// The elements to sort: all of them, or, for a list or sorted set kept in
/// its order, only those from `start` to `end` of that order (reversed by
/// DESC).
fn load(ctx: &mut Ctx, key: &[u8], o: &SortOptions, start: i64, end: i64) -> Vec<Item> {
    let item = |elem: Vec<u8>| Item {
        elem,
        score: 0.0,
        by: None,
    };
    let ranged = o.dont_sort && end >= start;
    let Ok(Some(value)) = ctx.keys.value_mut(key) else {
        return Vec::new();
    };
    match value {
        Value::List(l) if o.dont_sort => {
            if !ranged {
                return Vec::new();
            }
            let len = l.len() as i64;
            if o.desc {
                let mut v: Vec<Item> = l
                    .range(len - 1 - end, len - 1 - start)
                    .map(|e| item(e.to_vec()))
                    .collect();
                v.reverse();
                v
            } else {
                l.range(start, end).map(|e| item(e.to_vec())).collect()
            }
        }
        Value::List(l) => l.iter().map(|e| item(e.to_vec())).collect(),
        Value::Set(s) => s.iter().map(|m| item(m.to_vec())).collect(),
        Value::ZSet(z) if o.dont_sort => {
            if !ranged {
                return Vec::new();
            }
            z.range_by_rank(start as usize, end as usize, o.desc)
                .map(|(m, _)| item(m.to_vec()))
                .collect()
        }
        Value::ZSet(z) => z.iter().map(|(m, _)| item(m.to_vec())).collect(),
        _ => Vec::new(),
    }
}

/// Fills in what each item is sorted by; true when a numeric sort met a
/// value that is not a number (Redis still sorts, then answers the error).
fn score(keys: &mut Keys, items: &mut [Item], o: &SortOptions) -> bool {
    let mut failed = false;
    for it in items.iter_mut() {
        let by_value;
        let value: &[u8] = match o.by {
            Some(pattern) => match lookup(keys, pattern, &it.elem) {
                Some(v) => {
                    by_value = v;
                    &by_value
                }
                None => continue,
            },
            None => &it.elem,
        };
        if o.alpha {
            if o.by.is_some() {
                it.by = Some(value.to_vec());
            }
        } else {
            match strtod(value) {
                Some(s) => it.score = s,
                None => failed = true,
            }
        }
    }
    failed
}

/// Redis's `sortCompare`: numbers, ties broken bytewise by the element;
/// ALPHA compares as `strcoll` in the C locale (up to a NUL byte), or
/// bytewise in full when storing; with BY, a missing value sorts first.
fn compare(x: &Item, y: &Item, alpha: bool, by: bool, stored: bool) -> Ordering {
    let text = |p: &[u8], q: &[u8]| {
        if stored {
            p.cmp(q)
        } else {
            c_str(p).cmp(c_str(q))
        }
    };
    if !alpha {
        return x
            .score
            .partial_cmp(&y.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| x.elem.cmp(&y.elem));
    }
    if !by {
        return text(&x.elem, &y.elem);
    }
    match (&x.by, &y.by) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(p), Some(q)) => text(p, q),
    }
}

/// The bytes of `b` a C string function sees: up to the first NUL.
fn c_str(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(n) => &b[..n],
        None => b,
    }
}

/// What a BY or GET pattern names for `elem`: `#` is the element itself;
/// otherwise the first `*` is replaced by the element, and a `->field`
/// after it names a hash field. A missing key or field, a key of another
/// type, or a pattern without `*` name nothing.
fn lookup(keys: &mut Keys, pattern: &[u8], elem: &[u8]) -> Option<Vec<u8>> {
    if c_str(pattern) == b"#" {
        return Some(elem.to_vec());
    }
    // Redis finds `*` and `->` with C string functions.
    let head = c_str(pattern);
    let star = head.iter().position(|&c| c == b'*')?;
    let field_at = head[star + 1..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|p| star + 1 + p)
        .filter(|&f| pattern.get(f + 2).is_some_and(|&c| c != 0));
    let key_end = field_at.unwrap_or(pattern.len());
    let mut name = Vec::with_capacity(key_end + elem.len());
    name.extend_from_slice(&pattern[..star]);
    name.extend_from_slice(elem);
    name.extend_from_slice(&pattern[star + 1..key_end]);
    match (keys.value(&name).ok()??, field_at) {
        (Value::Str(s), None) => Some(s.as_bytes().into_owned()),
        (Value::Hash(h), Some(f)) => h.get(&pattern[f + 2..]).map(|v| v.to_vec()),
        _ => None,
    }
}

/// C's `strtod` applied to a whole value, as SORT uses it: leading white
/// space, decimal or hex, `inf`/`infinity`; None when anything follows the
/// number (up to a NUL byte, where C stops reading), when it is out of
/// range (`ERANGE`, including underflow), or not a number.
fn strtod(value: &[u8]) -> Option<f64> {
    let s = c_str(value);
    // An empty value: C's strtod reads nothing and its end pointer is at
    // the terminator, so Redis takes it as 0.
    if s.is_empty() {
        return Some(0.0);
    }
    let s = &s[s
        .iter()
        .position(|c| !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        .unwrap_or(s.len())..];
    let (neg, body) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let magnitude = if lower == b"inf" || lower == b"infinity" {
        f64::INFINITY
    } else if lower.starts_with(b"0x") {
        hex_float(&lower[2..])?
    } else {
        decimal(body)?
    };
    Some(if neg { -magnitude } else { magnitude })
}

/// A decimal number (digits, optional point, optional exponent), exactly
/// rounded; None for anything else or out of range.
fn decimal(b: &[u8]) -> Option<f64> {
    let mut i = 0;
    let digits = |i: &mut usize| {
        let from = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - from
    };
    let int_digits = digits(&mut i);
    let mut frac_digits = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        frac_digits = digits(&mut i);
    }
    if int_digits + frac_digits == 0 {
        return None;
    }
    let mantissa_end = i;
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    let text = std::str::from_utf8(b).ok()?;
    // Rust reads "1." and ".5" but wants a digit before the exponent.
    let v: f64 = if int_digits == 0 || frac_digits == 0 {
        let mut t = String::with_capacity(b.len() + 2);
        t.push('0');
        t.push_str(&text[..mantissa_end]);
        if frac_digits == 0 && t.ends_with('.') {
            t.push('0');
        }
        t.push_str(&text[mantissa_end..]);
        t.parse().ok()?
    } else {
        text.parse().ok()?
    };
    let nonzero = b[..mantissa_end].iter().any(|c| matches!(c, b'1'..=b'9'));
    in_range(v, nonzero)
}

/// The hex digits (and point, and `p` exponent) after `0x`.
fn hex_float(b: &[u8]) -> Option<f64> {
    let mut mantissa = 0f64;
    let mut exp: i64 = 0;
    let mut any = false;
    let mut nonzero = false;
    let mut i = 0;
    let mut point = false;
    while let Some(&c) = b.get(i) {
        if c == b'.' && !point {
            point = true;
        } else if let Some(d) = (c as char).to_digit(16) {
            any = true;
            nonzero |= d != 0;
            mantissa = mantissa * 16.0 + d as f64;
            if point {
                exp -= 4;
            }
        } else {
            break;
        }
        i += 1;
    }
    if !any {
        return None;
    }
    if b.get(i) == Some(&b'p') {
        i += 1;
        let t = std::str::from_utf8(&b[i..]).ok()?;
        if !t
            .bytes()
            .enumerate()
            .all(|(k, c)| c.is_ascii_digit() || (k == 0 && (c == b'+' || c == b'-') && t.len() > 1))
            || t.is_empty()
        {
            return None;
        }
        exp = exp.saturating_add(t.parse::<i64>().unwrap_or(if t.starts_with('-') {
            i64::MIN / 2
        } else {
            i64::MAX / 2
        }));
        i = b.len();
    }
    if i != b.len() {
        return None;
    }
    let v = mantissa * 2f64.powi(exp.clamp(-4000, 4000) as i32);
    in_range(v, nonzero)
}

/// `strtod`'s ERANGE: an overflow to infinity, or a nonzero number too
/// small for a normal double.
fn in_range(v: f64, nonzero: bool) -> Option<f64> {
    if v.is_infinite() || (nonzero && v.abs() < f64::MIN_POSITIVE) {
        None
    } else {
        Some(v)
    }
}

/// The reply without STORE: the elements, or per element what each GET
/// pattern names (nil when nothing).
fn reply(ctx: &mut Ctx, picked: &[Item], gets: &[&[u8]]) -> CmdResult {
    if gets.is_empty() {
        ctx.out.array(picked.len());
        for it in picked {
            ctx.out.bulk(&it.elem);
        }
        return Ok(());
    }
    ctx.out.array(picked.len() * gets.len());
    for it in picked {
        for pattern in gets {
            match lookup(&mut ctx.keys, pattern, &it.elem) {
                Some(v) => ctx.out.bulk(&v),
                None => ctx.out.null(),
            }
        }
    }
    Ok(())
}

/// STORE: the result as a list under `dest` (an empty string where a GET
/// names nothing), or `dest` deleted when the result is empty; replies
/// with the list's length.
fn store(ctx: &mut Ctx, dest: &[u8], picked: &[Item], gets: &[&[u8]]) -> CmdResult {
    let mut values: Vec<Vec<u8>> = Vec::with_capacity(picked.len() * gets.len().max(1));
    for it in picked {
        if gets.is_empty() {
            values.push(it.elem.clone());
        }
        for pattern in gets {
            values.push(lookup(&mut ctx.keys, pattern, &it.elem).unwrap_or_default());
        }
    }
    let n = values.len();
    if n == 0 {
        if ctx.keys.remove(dest)?.is_some() {
            ctx.keys.notify(Class::GENERIC, "del", dest);
        }
    } else {
        let l = ListValue::from_values(values.iter().map(|v| v.as_slice()), list::limits(ctx));
        ctx.keys.set(dest, Value::List(Box::new(l)), false)?;
        ctx.keys.notify(Class::LIST, "sortstore", dest);
        // Redis counts one change per stored element.
        ctx.keys.dirty += n as u64 - 1;
    }
    ctx.out.int(n as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtod_reads_what_c_reads() {
        assert_eq!(strtod(b"12"), Some(12.0));
        assert_eq!(strtod(b" -1.5e3"), Some(-1500.0));
        assert_eq!(strtod(b""), Some(0.0));
        assert_eq!(strtod(b"  "), None);
        assert_eq!(strtod(b"1."), Some(1.0));
        assert_eq!(strtod(b".5"), Some(0.5));
        assert_eq!(strtod(b".5e1"), Some(5.0));
        assert_eq!(strtod(b"0x10"), Some(16.0));
        assert_eq!(strtod(b"0x1p3"), Some(8.0));
        assert_eq!(strtod(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(strtod(b"Infinity"), Some(f64::INFINITY));
        assert_eq!(strtod(b"7\0junk"), Some(7.0));
        for bad in [
            &b"nan"[..],
            b"1e400",
            b"1e-310",
            b"1 ",
            b"1e",
            b"abc",
            b"0x",
            b".",
            b"-",
        ] {
            assert_eq!(strtod(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(strtod(b"0e-999"), Some(0.0));
    }

    #[test]
    fn keys_are_the_sorted_key_and_the_last_store() {
        let a: Vec<&[u8]> = vec![
            b"sort", b"k", b"by", b"store", b"store", b"d", b"limit", b"0", b"1",
        ];
        assert_eq!(sort_keys(&a).as_slice(), &[1, 5]);
        let a: Vec<&[u8]> = vec![b"sort", b"k", b"store"];
        assert_eq!(sort_keys(&a).as_slice(), &[1]);
    }
}
