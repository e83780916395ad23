//! List commands: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LRANGE,
//! LINDEX, LSET, LINSERT, LREM, LTRIM, LPOS, LMOVE, RPOPLPUSH, LMPOP, and the
//! blocking BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP. Argument rules, error
//! lines and reply shapes follow Redis 7.0 (including the order in which it
//! checks arguments and the key); the structure lives in `engine::list`.
//!
//! Blocking pops wait through `Ctx::block_on`, like BZPOPMIN: a client that
//! finds nothing is registered on its keys and its command is run again when
//! one of them changes. `Ctx::may_serve` keeps blocked clients in the order
//! they blocked. As in Redis, a pop taken by a blocking command is written
//! to the AOF as its non-blocking form (BLPOP as LPOP, BLMOVE as LMOVE,
//! BLMPOP and LMPOP as `LPOP|RPOP key count`), and a list left empty by a
//! pop, LREM or LTRIM is deleted.

use std::time::Duration;

use smallvec::SmallVec;

use super::args::{self, MPop};
use super::table::{flags::*, CommandSpec, Handler, KeySpec, RunHandler};
use super::{Ctx, Keys};
use crate::engine::list::{Element, InsertWhere, ListLimits, ListValue};
use crate::engine::Value;
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::state::ctx::found_when_blocked;
use crate::state::notify::Class;

/// BLPOP / BRPOP: every argument between the name and the timeout.
const KEYS_BEFORE_TIMEOUT: KeySpec = KeySpec::Range {
    first: 1,
    last: -2,
    step: 1,
};

#[allow(clippy::too_many_arguments)]
const fn list_cmd(
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
        .documented("list", summary, since, complexity)
}

const PUSH_COMPLEXITY: &str = "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.";

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    list_cmd(
        "lpush",
        -3,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        lpush,
        "Prepend one or multiple elements to a list",
        "1.0.0",
        PUSH_COMPLEXITY,
    )
    .batched(RunHandler::Apply(lpush_run)),
    list_cmd(
        "rpush",
        -3,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        rpush,
        "Append one or multiple elements to a list",
        "1.0.0",
        PUSH_COMPLEXITY,
    )
    .batched(RunHandler::Apply(rpush_run)),
    list_cmd(
        "lpushx",
        -3,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        lpushx,
        "Prepend an element to a list, only if the list exists",
        "2.2.0",
        PUSH_COMPLEXITY,
    ),
    list_cmd(
        "rpushx",
        -3,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        rpushx,
        "Append an element to a list, only if the list exists",
        "2.2.0",
        PUSH_COMPLEXITY,
    ),
    list_cmd(
        "lpop",
        -2,
        WRITE | FAST,
        KeySpec::FIRST,
        lpop,
        "Remove and get the first elements in a list",
        "1.0.0",
        "O(N) where N is the number of elements returned",
    )
    .batched(RunHandler::Apply(lpop_run)),
    list_cmd(
        "rpop",
        -2,
        WRITE | FAST,
        KeySpec::FIRST,
        rpop,
        "Remove and get the last elements in a list",
        "1.0.0",
        "O(N) where N is the number of elements returned",
    )
    .batched(RunHandler::Apply(rpop_run)),
    list_cmd(
        "llen",
        2,
        READONLY | FAST,
        KeySpec::FIRST,
        llen,
        "Get the length of a list",
        "1.0.0",
        "O(1)",
    ),
    list_cmd(
        "lrange",
        4,
        READONLY,
        KeySpec::FIRST,
        lrange,
        "Get a range of elements from a list",
        "1.0.0",
        "O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.",
    ),
    list_cmd(
        "lindex",
        3,
        READONLY,
        KeySpec::FIRST,
        lindex,
        "Get an element from a list by its index",
        "1.0.0",
        "O(N) where N is the number of elements to traverse to get to the element at index. This makes asking for the first or the last element of the list O(1).",
    ),
    list_cmd(
        "lset",
        4,
        WRITE | DENYOOM,
        KeySpec::FIRST,
        lset,
        "Set the value of an element in a list by its index",
        "1.0.0",
        "O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).",
    ),
    list_cmd(
        "linsert",
        5,
        WRITE | DENYOOM,
        KeySpec::FIRST,
        linsert,
        "Insert an element before or after another element in a list",
        "2.2.0",
        "O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).",
    ),
    list_cmd(
        "lrem",
        4,
        WRITE,
        KeySpec::FIRST,
        lrem,
        "Remove elements from a list",
        "1.0.0",
        "O(N+M) where N is the length of the list and M is the number of elements removed.",
    ),
    list_cmd(
        "ltrim",
        4,
        WRITE,
        KeySpec::FIRST,
        ltrim,
        "Trim a list to the specified range",
        "1.0.0",
        "O(N) where N is the number of elements to be removed by the operation.",
    ),
    list_cmd(
        "lpos",
        -3,
        READONLY,
        KeySpec::FIRST,
        lpos,
        "Return the index of matching elements on a list",
        "6.0.6",
        "O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.",
    ),
    list_cmd(
        "lmove",
        5,
        WRITE | DENYOOM,
        KeySpec::FIRST_TWO,
        lmove,
        "Pop an element from a list, push it to another list and return it",
        "6.2.0",
        "O(1)",
    ),
    list_cmd(
        "rpoplpush",
        3,
        WRITE | DENYOOM,
        KeySpec::FIRST_TWO,
        rpoplpush,
        "Remove the last element in a list, prepend it to another list and return it",
        "1.2.0",
        "O(1)",
    ),
    list_cmd(
        "lmpop",
        -4,
        WRITE,
        KeySpec::Find(lmpop_keys),
        lmpop,
        "Pop elements from a list",
        "7.0.0",
        "O(N+M) where N is the number of provided keys and M is the number of elements returned.",
    ),
    list_cmd(
        "blpop",
        -3,
        WRITE | NOSCRIPT | BLOCKING,
        KEYS_BEFORE_TIMEOUT,
        blpop,
        "Remove and get the first element in a list, or block until one is available",
        "2.0.0",
        "O(N) where N is the number of provided keys.",
    ),
    list_cmd(
        "brpop",
        -3,
        WRITE | NOSCRIPT | BLOCKING,
        KEYS_BEFORE_TIMEOUT,
        brpop,
        "Remove and get the last element in a list, or block until one is available",
        "2.0.0",
        "O(N) where N is the number of provided keys.",
    ),
    list_cmd(
        "blmove",
        6,
        WRITE | DENYOOM | NOSCRIPT | BLOCKING,
        KeySpec::FIRST_TWO,
        blmove,
        "Pop an element from a list, push it to another list and return it; or block until one is available",
        "6.2.0",
        "O(1)",
    ),
    list_cmd(
        "brpoplpush",
        4,
        WRITE | DENYOOM | NOSCRIPT | BLOCKING,
        KeySpec::FIRST_TWO,
        brpoplpush,
        "Pop an element from a list, push it to another list and return it; or block until one is available",
        "2.2.0",
        "O(1)",
    ),
    list_cmd(
        "blmpop",
        -5,
        WRITE | BLOCKING,
        KeySpec::Find(blmpop_keys),
        blmpop,
        "Pop elements from a list, or block until one is available",
        "7.0.0",
        "O(N+M) where N is the number of provided keys and M is the number of elements returned.",
    ),
];

// ---------------------------------------------------------------------------
// Key positions

fn numkeys_keys(a: &[&[u8]], at: usize) -> SmallVec<[usize; 4]> {
    match a.get(at).and_then(|n| args::int(n).ok()) {
        Some(n) if n > 0 => (at + 1..a.len())
            .take(usize::try_from(n).unwrap_or(usize::MAX))
            .collect(),
        _ => SmallVec::new(),
    }
}

/// LMPOP: `numkeys key... LEFT|RIGHT [COUNT n]`.
fn lmpop_keys(a: &[&[u8]]) -> SmallVec<[usize; 4]> {
    numkeys_keys(a, 1)
}

/// BLMPOP: `timeout numkeys key... LEFT|RIGHT [COUNT n]`.
fn blmpop_keys(a: &[&[u8]]) -> SmallVec<[usize; 4]> {
    numkeys_keys(a, 2)
}

// ---------------------------------------------------------------------------
// Shared helpers

/// Which end of a list a command works at (LEFT is the head).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum End {
    Left,
    Right,
}

impl End {
    /// LEFT or RIGHT, case-insensitively; anything else is a syntax error.
    fn parse(arg: &[u8]) -> Result<End, CmdError> {
        if args::is(arg, "left") {
            Ok(End::Left)
        } else if args::is(arg, "right") {
            Ok(End::Right)
        } else {
            Err(CmdError::Syntax)
        }
    }

    /// The pop command that logs a pop at this end.
    fn pop_name(self) -> &'static [u8] {
        match self {
            End::Left => b"LPOP",
            End::Right => b"RPOP",
        }
    }

    /// The keyspace event of a pop at this end.
    fn pop_event(self) -> &'static str {
        match self {
            End::Left => "lpop",
            End::Right => "rpop",
        }
    }

    /// The keyspace event of a push at this end.
    fn push_event(self) -> &'static str {
        match self {
            End::Left => "lpush",
            End::Right => "rpush",
        }
    }
}

/// `list-max-listpack-size`, read per command so CONFIG SET applies at once.
pub fn limits(ctx: &Ctx) -> ListLimits {
    ListLimits {
        max_listpack_size: ctx.server.config.read().list_max_listpack_size,
    }
}

/// The list under `key` for reading (counts a keyspace hit or miss);
/// `WRONGTYPE` if the key holds another type.
pub fn read_list<'k>(
    keys: &'k mut Keys<'_>,
    key: &[u8],
) -> Result<Option<&'k ListValue>, CmdError> {
    keys.typed(key, |v| match v {
        Value::List(x) => Some(x),
        _ => None,
    })
}

/// The list under `key` for change; `WRONGTYPE` if another type.
fn write_list<'k>(
    keys: &'k mut Keys<'_>,
    key: &[u8],
) -> Result<Option<&'k mut ListValue>, CmdError> {
    keys.typed_mut(key, |v| match v {
        Value::List(x) => Some(x),
        _ => None,
    })
}

/// Records a change of `key` after elements went away, raising `event`:
/// deletes the key when the list became empty (Redis never keeps empty
/// lists; `del` follows), else marks it modified.
fn after_removal(keys: &mut Keys<'_>, key: &[u8], emptied: bool, event: &'static str) -> CmdResult {
    keys.notify(Class::LIST, event, key);
    if emptied {
        keys.remove(key)?;
        keys.notify(Class::GENERIC, "del", key);
        Ok(())
    } else {
        keys.modified(key)
    }
}

fn bulk_element(out: &mut Reply, e: &Element<'_>) {
    let mut buf = itoa::Buffer::new();
    let (a, b) = e.parts(&mut buf);
    out.bulk_parts(a, b);
}

/// Pushes `values` at `end` of the list under `key`, creating it unless
/// `only_existing`; returns the new length (0: no list and none created).
fn push_values(
    ctx: &mut Ctx,
    key: &[u8],
    values: &[&[u8]],
    end: End,
    only_existing: bool,
) -> Result<usize, CmdError> {
    let lim = limits(ctx);
    let push = |l: &mut ListValue| match end {
        End::Left => l.push_front(values.iter().copied(), lim),
        End::Right => l.push_back(values.iter().copied(), lim),
    };
    if let Some(l) = write_list(&mut ctx.keys, key)? {
        push(l);
        let n = l.len();
        ctx.keys.modified(key)?;
        ctx.keys.notify(Class::LIST, end.push_event(), key);
        return Ok(n);
    }
    if only_existing || values.is_empty() {
        return Ok(0);
    }
    let mut l = ListValue::new();
    push(&mut l);
    let n = l.len();
    ctx.keys.set(key, Value::List(Box::new(l)), false)?;
    ctx.keys.notify(Class::LIST, end.push_event(), key);
    Ok(n)
}

/// Pops up to `count` elements from `end` of the (existing, non-empty) list
/// under `key`, deleting the key if that empties it.
fn pop_values(ctx: &mut Ctx, key: &[u8], end: End, count: usize) -> Result<Vec<Vec<u8>>, CmdError> {
    let Some(l) = write_list(&mut ctx.keys, key)? else {
        return Ok(Vec::new());
    };
    let items = match end {
        End::Left => l.pop_front(count),
        End::Right => l.pop_back(count),
    };
    let emptied = l.is_empty();
    if !items.is_empty() {
        after_removal(&mut ctx.keys, key, emptied, end.pop_event())?;
    }
    Ok(items)
}

/// Pipelined calls of LPUSH or RPUSH with one value each, on one key,
/// applied in one go (see `commands::run`): the replies, the list and the
/// changes counted are those of the calls one at a time. False (nothing
/// done) when the key holds another type.
fn push_run(ctx: &mut Ctx, key: &[u8], values: &[&[u8]], end: End) -> bool {
    let lim = limits(ctx);
    let push = |l: &mut ListValue| match end {
        End::Left => l.push_front(values.iter().copied(), lim),
        End::Right => l.push_back(values.iter().copied(), lim),
    };
    let before = match write_list(&mut ctx.keys, key) {
        Ok(Some(l)) => l.len(),
        Ok(None) => 0,
        Err(_) => return false,
    };
    if before == 0 {
        // The first call creates the list, the others change it.
        let mut l = ListValue::new();
        push(&mut l);
        if ctx.keys.set(key, Value::List(Box::new(l)), false).is_err()
            || ctx.keys.modified_times(key, values.len() - 1).is_err()
        {
            return false;
        }
    } else {
        if ctx.keys.modified_times(key, values.len()).is_err() {
            return false;
        }
        match write_list(&mut ctx.keys, key) {
            Ok(Some(l)) => push(l),
            _ => return false,
        }
    }
    for i in 1..=values.len() {
        ctx.out.int((before + i) as i64);
    }
    true
}

/// A run handler's answer for one that applies all the `calls` or none.
fn all_or_none(calls: usize, applied: bool) -> usize {
    if applied {
        calls
    } else {
        0
    }
}

fn lpush_run(ctx: &mut Ctx, key: &[u8], calls: usize, values: &[&[u8]]) -> usize {
    all_or_none(calls, push_run(ctx, key, values, End::Left))
}

fn rpush_run(ctx: &mut Ctx, key: &[u8], calls: usize, values: &[&[u8]]) -> usize {
    all_or_none(calls, push_run(ctx, key, values, End::Right))
}

/// Pipelined calls of LPOP or RPOP without a count, on one key, applied in
/// one go (see `commands::run`): each call pops one element, or answers
/// null once the list is gone (every call, when there is none: a worker
/// polling an empty queue), and the changes counted are the calls'.
/// False (nothing done) when the key holds another type.
fn pop_run(ctx: &mut Ctx, key: &[u8], calls: usize, end: End) -> bool {
    let len = match write_list(&mut ctx.keys, key) {
        Ok(Some(l)) => l.len(),
        Ok(None) => 0,
        Err(_) => return false,
    };
    if len == 0 {
        (0..calls).for_each(|_| ctx.out.null());
        return true;
    }
    let take = calls.min(len);
    let emptied = take == len;
    // Each pop is a change; the one that empties the list deletes the key
    // (counted by the removal).
    if ctx
        .keys
        .modified_times(key, take - emptied as usize)
        .is_err()
    {
        return false;
    }
    let items = match write_list(&mut ctx.keys, key) {
        Ok(Some(l)) => match end {
            End::Left => l.pop_front(take),
            End::Right => l.pop_back(take),
        },
        _ => return false,
    };
    if emptied && ctx.keys.remove(key).is_err() {
        return false;
    }
    for v in &items {
        ctx.out.bulk(v);
    }
    for _ in items.len()..calls {
        ctx.out.null();
    }
    true
}

fn lpop_run(ctx: &mut Ctx, key: &[u8], calls: usize, _rest: &[&[u8]]) -> usize {
    all_or_none(calls, pop_run(ctx, key, calls, End::Left))
}

fn rpop_run(ctx: &mut Ctx, key: &[u8], calls: usize, _rest: &[&[u8]]) -> usize {
    all_or_none(calls, pop_run(ctx, key, calls, End::Right))
}

// ---------------------------------------------------------------------------
// Pushes

fn lpush(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let n = push_values(ctx, a[1], &a[2..], End::Left, false)?;
    ctx.out.int(n as i64);
    Ok(())
}

fn rpush(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let n = push_values(ctx, a[1], &a[2..], End::Right, false)?;
    ctx.out.int(n as i64);
    Ok(())
}

fn lpushx(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let n = push_values(ctx, a[1], &a[2..], End::Left, true)?;
    ctx.out.int(n as i64);
    Ok(())
}

fn rpushx(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let n = push_values(ctx, a[1], &a[2..], End::Right, true)?;
    ctx.out.int(n as i64);
    Ok(())
}

// ---------------------------------------------------------------------------
// Pops

/// LPOP / RPOP `key [count]`: one element as a bulk string, or with a count
/// an array (a null array when the key is missing, in both protocols' null).
fn pop(ctx: &mut Ctx, a: &[&[u8]], end: End, name: &str) -> CmdResult {
    if a.len() > 3 {
        return Err(CmdError::WrongArity(name.to_string()));
    }
    let count = match a.get(2) {
        None => None,
        Some(arg) => {
            let n = args::int(arg)
                .ok()
                .filter(|&n| n >= 0)
                .ok_or_else(|| CmdError::line("ERR value is out of range, must be positive"))?;
            Some(usize::try_from(n).unwrap_or(usize::MAX))
        }
    };
    let key = a[1];
    // Without a count one lookup does: lists are never empty, so nothing
    // popped means no list.
    if count.is_some() && write_list(&mut ctx.keys, key)?.is_none() {
        ctx.out.null_array();
        return Ok(());
    }
    let items = pop_values(ctx, key, end, count.unwrap_or(1))?;
    match count {
        None => match items.first() {
            Some(v) => ctx.out.bulk(v),
            None => ctx.out.null(),
        },
        Some(_) => {
            ctx.out.array(items.len());
            items.iter().for_each(|v| ctx.out.bulk(v));
        }
    }
    Ok(())
}

fn lpop(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    pop(ctx, a, End::Left, "lpop")
}

fn rpop(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    pop(ctx, a, End::Right, "rpop")
}

/// Parses LMPOP / BLMPOP arguments (`numkeys key... LEFT|RIGHT [COUNT
/// count]`) from the numkeys at `numkeys_idx`.
fn parse_mpop<'a>(a: &'a [&'a [u8]], numkeys_idx: usize) -> Result<MPop<'a, End>, CmdError> {
    args::mpop(a, numkeys_idx, End::parse)
}

/// Pops up to `count` elements from `key` (which holds a list) and replies
/// `[key, [elements]]`; logged as `LPOP|RPOP key n`, as Redis does.
fn mpop_from(ctx: &mut Ctx, key: &[u8], end: End, count: usize) -> CmdResult {
    let items = pop_values(ctx, key, end, count)?;
    let out = &mut *ctx.out;
    out.array(2);
    out.bulk(key);
    out.array(items.len());
    items.iter().for_each(|v| out.bulk(v));
    let n = itoa::Buffer::new().format(items.len()).as_bytes().to_vec();
    ctx.keys
        .propagate_as(vec![end.pop_name().to_vec(), key.to_vec(), n]);
    Ok(())
}

/// `LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]`
fn lmpop(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let p = parse_mpop(a, 1)?;
    for &key in p.keys {
        if write_list(&mut ctx.keys, key)?.is_some() {
            return mpop_from(ctx, key, p.end, p.count);
        }
    }
    ctx.out.null_array();
    Ok(())
}

// ---------------------------------------------------------------------------
// Reads

fn llen(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let n = read_list(&mut ctx.keys, a[1])?.map_or(0, |l| l.len());
    ctx.out.int(n as i64);
    Ok(())
}

fn lrange(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let start = args::int(a[2])?;
    let stop = args::int(a[3])?;
    let Some(l) = read_list(&mut ctx.keys, a[1])? else {
        ctx.out.array(0);
        return Ok(());
    };
    let it = l.range(start, stop);
    ctx.out.array(it.len());
    for e in it {
        bulk_element(ctx.out, &e);
    }
    Ok(())
}

fn lindex(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let Some(l) = read_list(&mut ctx.keys, a[1])? else {
        ctx.out.null();
        return Ok(());
    };
    let i = args::int(a[2])?;
    match l.index(i) {
        Some(e) => bulk_element(ctx.out, &e),
        None => ctx.out.null(),
    }
    Ok(())
}

/// LPOS's options, parsed before the key is looked up (as Redis does).
struct LposOptions {
    rank: i64,
    /// `None`: no COUNT given (reply one index or null).
    count: Option<usize>,
    maxlen: usize,
}

fn parse_lpos(opts: &[&[u8]]) -> Result<LposOptions, CmdError> {
    let mut o = LposOptions {
        rank: 1,
        count: None,
        maxlen: 0,
    };
    let mut j = 0;
    while j < opts.len() {
        let Some(&v) = opts.get(j + 1) else {
            return Err(CmdError::Syntax);
        };
        let name = opts[j];
        if args::is(name, "rank") {
            o.rank = args::int(v)?;
            if o.rank == 0 {
                return Err(CmdError::line(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                ));
            }
        } else if args::is(name, "count") {
            let n = args::int(v)
                .ok()
                .filter(|&n| n >= 0)
                .ok_or_else(|| CmdError::line("ERR COUNT can't be negative"))?;
            o.count = Some(usize::try_from(n).unwrap_or(usize::MAX));
        } else if args::is(name, "maxlen") {
            let n = args::int(v)
                .ok()
                .filter(|&n| n >= 0)
                .ok_or_else(|| CmdError::line("ERR MAXLEN can't be negative"))?;
            o.maxlen = usize::try_from(n).unwrap_or(usize::MAX);
        } else {
            return Err(CmdError::Syntax);
        }
        j += 2;
    }
    Ok(o)
}

/// `LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]`
fn lpos(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let o = parse_lpos(&a[3..])?;
    let Some(l) = read_list(&mut ctx.keys, a[1])? else {
        match o.count {
            Some(_) => ctx.out.array(0),
            None => ctx.out.null(),
        }
        return Ok(());
    };
    // Redis negates a negative rank in a C long: -2^63 stays -2^63, which
    // then matches from the first match at the tail on, and overflows the
    // COUNT check so that every match is reported.
    let (rank, count) = match o.rank {
        i64::MIN => (-1, o.count.map(|_| 0)),
        rank => (rank, o.count),
    };
    match count {
        Some(count) => {
            let found = l.positions(a[2], rank, count, o.maxlen);
            ctx.out.array(found.len());
            found.iter().for_each(|&i| ctx.out.int(i as i64));
        }
        None => match l.positions(a[2], rank, 1, o.maxlen).first() {
            Some(&i) => ctx.out.int(i as i64),
            None => ctx.out.null(),
        },
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Changes in place

fn lset(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let lim = limits(ctx);
    let key = a[1];
    let Some(l) = write_list(&mut ctx.keys, key)? else {
        return Err(CmdError::NoSuchKey);
    };
    let i = args::int(a[2])?;
    l.set(i, a[3], lim)
        .map_err(|e| CmdError::line(e.to_string()))?;
    ctx.keys.modified(key)?;
    ctx.keys.notify(Class::LIST, "lset", key);
    ctx.out.ok();
    Ok(())
}

fn linsert(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let place = if args::is(a[2], "after") {
        InsertWhere::After
    } else if args::is(a[2], "before") {
        InsertWhere::Before
    } else {
        return Err(CmdError::Syntax);
    };
    let lim = limits(ctx);
    let key = a[1];
    let Some(l) = write_list(&mut ctx.keys, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    match l.insert(place, a[3], a[4], lim) {
        Some(n) => {
            ctx.keys.modified(key)?;
            ctx.keys.notify(Class::LIST, "linsert", key);
            ctx.out.int(n as i64);
        }
        None => ctx.out.int(-1),
    }
    Ok(())
}

fn lrem(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let count = args::int(a[2])?;
    let lim = limits(ctx);
    let key = a[1];
    let Some(l) = write_list(&mut ctx.keys, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let removed = l.remove(count, a[3], lim);
    let emptied = l.is_empty();
    if removed > 0 {
        after_removal(&mut ctx.keys, key, emptied, "lrem")?;
    }
    ctx.out.int(removed as i64);
    Ok(())
}

fn ltrim(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let start = args::int(a[2])?;
    let stop = args::int(a[3])?;
    let key = a[1];
    if let Some(l) = write_list(&mut ctx.keys, key)? {
        let removed = l.trim(start, stop);
        let emptied = l.is_empty();
        if removed > 0 {
            after_removal(&mut ctx.keys, key, emptied, "ltrim")?;
        } else {
            // Redis raises `ltrim` even when nothing was trimmed.
            ctx.keys.notify(Class::LIST, "ltrim", key);
        }
    }
    ctx.out.ok();
    Ok(())
}

// ---------------------------------------------------------------------------
// Moves

/// Moves one element from `from` of `src` to `to` of `dst` and replies it
/// (Redis's `lmoveGenericCommand`): null when `src` has no list; `dst` must
/// hold a list or nothing. `src` and `dst` may be the same list (a
/// rotation).
fn move_element(ctx: &mut Ctx, src: &[u8], dst: &[u8], from: End, to: End) -> CmdResult {
    if write_list(&mut ctx.keys, src)?.is_none() {
        ctx.out.null();
        return Ok(());
    }
    write_list(&mut ctx.keys, dst)?;
    let lim = limits(ctx);
    let Some(l) = write_list(&mut ctx.keys, src)? else {
        ctx.out.null();
        return Ok(());
    };
    let popped = match from {
        End::Left => l.pop_front(1),
        End::Right => l.pop_back(1),
    };
    let Some(value) = popped.into_iter().next() else {
        ctx.out.null();
        return Ok(());
    };
    if src == dst {
        match to {
            End::Left => l.push_front([value.as_slice()], lim),
            End::Right => l.push_back([value.as_slice()], lim),
        }
        ctx.keys.modified(src)?;
        ctx.keys.notify(Class::LIST, to.push_event(), src);
        ctx.keys.notify(Class::LIST, from.pop_event(), src);
    } else {
        // Redis pushes first, then records the pop (and deletes `src`).
        let emptied = l.is_empty();
        push_values(ctx, dst, &[value.as_slice()], to, false)?;
        after_removal(&mut ctx.keys, src, emptied, from.pop_event())?;
    }
    ctx.out.bulk(&value);
    Ok(())
}

/// `LMOVE source destination LEFT|RIGHT LEFT|RIGHT`
fn lmove(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let from = End::parse(a[3])?;
    let to = End::parse(a[4])?;
    move_element(ctx, a[1], a[2], from, to)
}

/// `RPOPLPUSH source destination`
fn rpoplpush(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    move_element(ctx, a[1], a[2], End::Right, End::Left)
}

// ---------------------------------------------------------------------------
// Blocking commands

/// BLPOP / BRPOP / BLMPOP: pops from the first key holding a list this
/// client may take from, or blocks on `keys`. Where blocking is not allowed
/// (MULTI, scripts) it replies a null array, as on timeout.
fn blocking_pop(
    ctx: &mut Ctx,
    a: &[&[u8]],
    keys: &[&[u8]],
    timeout: Option<Duration>,
    end: End,
    count: Option<usize>,
) -> CmdResult {
    let rerun = ctx.client.rerun;
    for &key in keys {
        let mine = ctx.may_serve(key);
        if found_when_blocked(rerun, write_list(&mut ctx.keys, key))?.is_some() && mine {
            let Some(count) = count else {
                let items = pop_values(ctx, key, end, 1)?;
                let out = &mut *ctx.out;
                out.array(2);
                out.bulk(key);
                out.bulk(items.first().map_or(&[][..], |v| v.as_slice()));
                ctx.keys
                    .propagate_as(vec![end.pop_name().to_vec(), key.to_vec()]);
                return Ok(());
            };
            return mpop_from(ctx, key, end, count);
        }
    }
    if !ctx.block_on(keys, timeout, a) {
        ctx.out.null_array();
    }
    Ok(())
}

fn bpop(ctx: &mut Ctx, a: &[&[u8]], end: End) -> CmdResult {
    let last = a.len() - 1;
    let timeout = args::timeout(a[last])?;
    blocking_pop(ctx, a, &a[1..last], timeout, end, None)
}

/// `BLPOP key [key ...] timeout`
fn blpop(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    bpop(ctx, a, End::Left)
}

/// `BRPOP key [key ...] timeout`
fn brpop(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    bpop(ctx, a, End::Right)
}

/// `BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]`
fn blmpop(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let p = parse_mpop(a, 2)?;
    let timeout = args::timeout(a[1])?;
    blocking_pop(ctx, a, p.keys, timeout, p.end, Some(p.count))
}

/// BLMOVE / BRPOPLPUSH: moves at once when `src` holds a list this client
/// may take from (logged as LMOVE), else blocks on `src`. Where blocking is
/// not allowed it replies a null bulk string, as Redis does.
fn blocking_move(
    ctx: &mut Ctx,
    a: &[&[u8]],
    from: End,
    to: End,
    timeout: Option<Duration>,
) -> CmdResult {
    let (src, dst) = (a[1], a[2]);
    let mine = ctx.may_serve(src);
    let found = found_when_blocked(ctx.client.rerun, write_list(&mut ctx.keys, src))?;
    if found.is_some() && mine {
        move_element(ctx, src, dst, from, to)?;
        let logged = if args::is(a[0], "brpoplpush") {
            vec![b"RPOPLPUSH".to_vec(), src.to_vec(), dst.to_vec()]
        } else {
            vec![
                b"LMOVE".to_vec(),
                src.to_vec(),
                dst.to_vec(),
                a[3].to_vec(),
                a[4].to_vec(),
            ]
        };
        ctx.keys.propagate_as(logged);
        return Ok(());
    }
    if !ctx.block_on(&[src], timeout, a) {
        ctx.out.null();
    }
    Ok(())
}

/// `BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout`
fn blmove(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let from = End::parse(a[3])?;
    let to = End::parse(a[4])?;
    let timeout = args::timeout(a[5])?;
    blocking_move(ctx, a, from, to, timeout)
}

/// `BRPOPLPUSH source destination timeout`
fn brpoplpush(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let timeout = args::timeout(a[3])?;
    blocking_move(ctx, a, End::Right, End::Left, timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpop_arguments() {
        let a: Vec<&[u8]> = vec![b"lmpop", b"2", b"a", b"b", b"right", b"COUNT", b"3"];
        let p = parse_mpop(&a, 1).unwrap();
        assert_eq!(p.keys, &a[2..4]);
        assert!(p.end == End::Right && p.count == 3);
        let numkeys = CmdError::line("ERR numkeys should be greater than 0");
        for n in [&b"0"[..], b"-1", b"x"] {
            let a: Vec<&[u8]> = vec![b"lmpop", n, b"a", b"left"];
            assert_eq!(parse_mpop(&a, 1).err(), Some(numkeys.clone()));
        }
        let a: Vec<&[u8]> = vec![b"lmpop", b"9223372036854775807", b"a", b"left"];
        assert_eq!(parse_mpop(&a, 1).err(), Some(CmdError::Syntax));
        let a: Vec<&[u8]> = vec![b"lmpop", b"1", b"a", b"up"];
        assert_eq!(parse_mpop(&a, 1).err(), Some(CmdError::Syntax));
        let a: Vec<&[u8]> = vec![b"blmpop", b"0", b"1", b"a", b"LEFT"];
        assert_eq!(blmpop_keys(&a).as_slice(), &[3]);
    }

    #[test]
    fn lpos_options() {
        let o = parse_lpos(&[b"RANK", b"-2", b"count", b"0", b"MAXLEN", b"5"]).unwrap();
        assert_eq!((o.rank, o.count, o.maxlen), (-2, Some(0), 5));
        assert!(parse_lpos(&[b"rank", b"0"]).is_err());
        assert_eq!(
            parse_lpos(&[b"count", b"abc"]).err(),
            Some(CmdError::line("ERR COUNT can't be negative"))
        );
        assert_eq!(parse_lpos(&[b"rank"]).err(), Some(CmdError::Syntax));
        assert_eq!(parse_lpos(&[b"foo", b"1"]).err(), Some(CmdError::Syntax));
    }
}
