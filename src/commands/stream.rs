//! Stream commands: XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XSETID,
//! XREAD, XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM and
//! XINFO. Argument order, error lines, id rules and reply shapes follow
//! Redis 7.0 (`t_stream.c`); the log and its groups live in
//! `engine::stream`.
//!
//! Writes whose effect depends on the clock or on what was pending go to
//! the AOF as the commands that reproduce them, as Redis propagates them:
//! XADD with its generated id (and trimming as an exact XTRIM), each
//! delivery or claim as `XCLAIM ... TIME t RETRYCOUNT n FORCE JUSTID
//! LASTID id`, the group's position as `XGROUP SETID ... ENTRIESREAD n`.
//!
//! XREAD and XREADGROUP block through `Ctx::block_on` and are run again
//! when a key changes; XREAD's `$` is resolved before blocking so the rerun
//! waits for entries after the id that was last when it blocked.

use std::time::Duration;

use smallvec::SmallVec;

use super::args;
use super::table::{flags::*, CommandSpec, Handler, KeySpec};
use super::{Ctx, Keys};
use crate::engine::stream::{EntryRef, Group, Stream, StreamId, Trim};
use crate::engine::Value;
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::state::notify::Class;

#[allow(clippy::too_many_arguments)]
const fn stream_cmd(
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
        .documented("stream", summary, since, complexity)
}

const O1: &str = "O(1)";
const ON: &str = "O(N) with N being the number of elements returned.";

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    stream_cmd(
        "xadd",
        -5,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        xadd,
        "Appends a new entry to a stream",
        "5.0.0",
        "O(1) when adding a new entry, O(N) when trimming where N being the number of entries evicted.",
    ),
    stream_cmd(
        "xrange",
        -4,
        READONLY,
        KeySpec::FIRST,
        xrange,
        "Return a range of elements in a stream, with IDs matching the specified IDs interval",
        "5.0.0",
        ON,
    ),
    stream_cmd(
        "xrevrange",
        -4,
        READONLY,
        KeySpec::FIRST,
        xrevrange,
        "Return a range of elements in a stream, with IDs matching the specified IDs interval, in reverse order (from greater to smaller IDs) compared to XRANGE",
        "5.0.0",
        ON,
    ),
    stream_cmd(
        "xlen",
        2,
        READONLY | FAST,
        KeySpec::FIRST,
        xlen,
        "Return the number of entries in a stream",
        "5.0.0",
        O1,
    ),
    stream_cmd(
        "xdel",
        -3,
        WRITE | FAST,
        KeySpec::FIRST,
        xdel,
        "Removes the specified entries from the stream. Returns the number of items actually deleted, that may be different from the number of IDs passed in case certain IDs do not exist.",
        "5.0.0",
        "O(1) for each single item to delete in the stream, regardless of the stream size.",
    ),
    stream_cmd(
        "xtrim",
        -4,
        WRITE,
        KeySpec::FIRST,
        xtrim,
        "Trims the stream to (approximately if '~' is passed) a certain size",
        "5.0.0",
        "O(N), with N being the number of evicted entries.",
    ),
    stream_cmd(
        "xsetid",
        -3,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        xsetid,
        "An internal command for replicating stream values",
        "5.0.0",
        O1,
    ),
    stream_cmd(
        "xread",
        -4,
        READONLY | BLOCKING,
        KeySpec::Find(read_keys),
        xread,
        "Return never seen elements in multiple streams, with IDs greater than the ones reported by the caller for each stream. Can block.",
        "5.0.0",
        "For each stream mentioned: O(N) with N being the number of elements being returned.",
    ),
    stream_cmd(
        "xreadgroup",
        -7,
        WRITE | BLOCKING,
        KeySpec::Find(read_keys),
        xreadgroup,
        "Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block.",
        "5.0.0",
        "For each stream mentioned: O(M) with M being the number of elements returned.",
    ),
    stream_cmd(
        "xack",
        -4,
        WRITE | FAST,
        KeySpec::FIRST,
        xack,
        "Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group.",
        "5.0.0",
        "O(1) for each message ID processed.",
    ),
    stream_cmd(
        "xpending",
        -3,
        READONLY,
        KeySpec::FIRST,
        xpending,
        "Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged.",
        "5.0.0",
        "O(N) with N being the number of elements returned.",
    ),
    stream_cmd(
        "xclaim",
        -6,
        WRITE | FAST,
        KeySpec::FIRST,
        xclaim,
        "Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer.",
        "5.0.0",
        "O(log N) with N being the number of messages in the PEL of the consumer group.",
    ),
    stream_cmd(
        "xautoclaim",
        -6,
        WRITE | FAST,
        KeySpec::FIRST,
        xautoclaim,
        "Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer.",
        "6.2.0",
        "O(1) if COUNT is small.",
    ),
    CommandSpec {
        subcommands: XGROUP_SUBS,
        ..stream_cmd(
            "xgroup",
            -2,
            0,
            KeySpec::None,
            xgroup_help,
            "A container for consumer groups commands",
            "5.0.0",
            "Depends on subcommand.",
        )
    },
    CommandSpec {
        subcommands: XINFO_SUBS,
        ..stream_cmd(
            "xinfo",
            -2,
            0,
            KeySpec::None,
            xinfo_help,
            "A container for stream introspection commands",
            "5.0.0",
            "Depends on subcommand.",
        )
    },
];

const XGROUP_SUBS: &[CommandSpec] = &[
    stream_cmd(
        "create",
        -5,
        WRITE | DENYOOM,
        KeySpec::SECOND,
        xgroup_create,
        "Create a consumer group.",
        "5.0.0",
        O1,
    ),
    stream_cmd(
        "setid",
        -5,
        WRITE,
        KeySpec::SECOND,
        xgroup_setid,
        "Set a consumer group to an arbitrary last delivered ID value.",
        "5.0.0",
        O1,
    ),
    stream_cmd(
        "destroy",
        4,
        WRITE,
        KeySpec::SECOND,
        xgroup_destroy,
        "Destroy a consumer group.",
        "5.0.0",
        "O(N) where N is the number of entries in the group's pending entries list (PEL).",
    ),
    stream_cmd(
        "createconsumer",
        5,
        WRITE | DENYOOM,
        KeySpec::SECOND,
        xgroup_createconsumer,
        "Create a consumer in a consumer group.",
        "6.2.0",
        O1,
    ),
    stream_cmd(
        "delconsumer",
        5,
        WRITE,
        KeySpec::SECOND,
        xgroup_delconsumer,
        "Delete a consumer from a consumer group.",
        "5.0.0",
        O1,
    ),
    stream_cmd(
        "help",
        2,
        LOADING | STALE,
        KeySpec::None,
        xgroup_help,
        "Show helpful text about the different subcommands",
        "5.0.0",
        O1,
    ),
];

const XINFO_SUBS: &[CommandSpec] = &[
    stream_cmd(
        "stream",
        -3,
        READONLY,
        KeySpec::SECOND,
        xinfo_stream,
        "Get information about a stream",
        "5.0.0",
        O1,
    ),
    stream_cmd(
        "groups",
        3,
        READONLY,
        KeySpec::SECOND,
        xinfo_groups,
        "List the consumer groups of a stream",
        "5.0.0",
        O1,
    ),
    stream_cmd(
        "consumers",
        4,
        READONLY,
        KeySpec::SECOND,
        xinfo_consumers,
        "List the consumers in a consumer group",
        "5.0.0",
        O1,
    ),
    stream_cmd(
        "help",
        2,
        LOADING | STALE,
        KeySpec::None,
        xinfo_help,
        "Show helpful text about the different subcommands",
        "5.0.0",
        O1,
    ),
];

// ---------------------------------------------------------------------------
// Ids and shared helpers

fn invalid_id() -> CmdError {
    CmdError::err("Invalid stream ID specified as stream command argument")
}

/// Redis's `string2ull`: decimal digits (an optional `+`), within u64.
fn parse_u64(s: &[u8]) -> Option<u64> {
    let digits = s.strip_prefix(b"+").unwrap_or(s);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// An id as `ms[-seq]` (a missing seq is `missing_seq`). `-` and `+` are
/// the extremes unless `strict`. With `auto_seq`, `ms-*` is accepted and
/// reported as `(id, false)`.
fn parse_id_with(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    auto_seq: bool,
) -> Result<(StreamId, bool), CmdError> {
    if arg.len() > 127 {
        return Err(invalid_id());
    }
    if !strict {
        if arg == b"-" {
            return Ok((StreamId::MIN, true));
        }
        if arg == b"+" {
            return Ok((StreamId::MAX, true));
        }
    }
    let (ms, seq) = match arg.iter().position(|&b| b == b'-') {
        Some(p) => (&arg[..p], Some(&arg[p + 1..])),
        None => (arg, None),
    };
    let ms = parse_u64(ms).ok_or_else(invalid_id)?;
    match seq {
        None => Ok((StreamId::new(ms, missing_seq), true)),
        Some(b"*") if auto_seq => Ok((StreamId::new(ms, 0), false)),
        Some(s) => Ok((
            StreamId::new(ms, parse_u64(s).ok_or_else(invalid_id)?),
            true,
        )),
    }
}

/// A strict id (no `-`/`+`), a missing seq being 0.
fn strict_id(arg: &[u8]) -> Result<StreamId, CmdError> {
    parse_id_with(arg, 0, true, false).map(|(id, _)| id)
}

/// One end of an interval: `-`, `+`, an id, or `(id` (exclusive; then
/// strict). Returns the id and whether it was exclusive.
fn interval_id(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), CmdError> {
    if arg.len() > 1 && arg[0] == b'(' {
        let (id, _) = parse_id_with(&arg[1..], missing_seq, true, false)?;
        return Ok((id, true));
    }
    parse_id_with(arg, missing_seq, false, false).map(|(id, _)| (id, false))
}

/// The inclusive start of an interval (an exclusive one moves up).
fn interval_start(arg: &[u8]) -> Result<StreamId, CmdError> {
    let (id, ex) = interval_id(arg, 0)?;
    if ex {
        return id
            .next()
            .ok_or_else(|| CmdError::err("invalid start ID for the interval"));
    }
    Ok(id)
}

/// The inclusive end of an interval (an exclusive one moves down).
fn interval_end(arg: &[u8]) -> Result<StreamId, CmdError> {
    let (id, ex) = interval_id(arg, u64::MAX)?;
    if ex {
        return id
            .prev()
            .ok_or_else(|| CmdError::err("invalid end ID for the interval"));
    }
    Ok(id)
}

fn read_stream<'k>(keys: &'k mut Keys<'_>, key: &[u8]) -> Result<Option<&'k Stream>, CmdError> {
    keys.typed(key, |v| match v {
        Value::Stream(x) => Some(&**x),
        _ => None,
    })
}

fn write_stream<'k>(
    keys: &'k mut Keys<'_>,
    key: &[u8],
) -> Result<Option<&'k mut Stream>, CmdError> {
    keys.typed_mut(key, |v| match v {
        Value::Stream(x) => Some(&mut **x),
        _ => None,
    })
}

/// The time stream commands stamp deliveries and consumers with: the
/// command's clock, or the wall clock while the AOF loads (where the
/// command clock reads 0 and XCLAIM's TIME must not be clamped to it).
fn stream_now(ctx: &Ctx) -> u64 {
    match ctx.keys.now_ms {
        0 => crate::state::clock::unix_ms(),
        t => t,
    }
}

/// Entries copied out of a stream, with their ids.
type Entries = Vec<(StreamId, Vec<Vec<u8>>)>;

/// An id as a bulk string, `ms-seq` (written without allocating).
fn id_bulk(out: &mut Reply, id: StreamId) {
    push_id(&mut out.buf, id);
}

/// [`id_bulk`] into a reply's bytes: `$n`, `ms-seq`, with one growth check.
fn push_id(buf: &mut Vec<u8>, id: StreamId) {
    let mut ms = itoa::Buffer::new();
    let mut seq = itoa::Buffer::new();
    let ms = ms.format(id.ms).as_bytes();
    let seq = seq.format(id.seq).as_bytes();
    buf.reserve(ms.len() + seq.len() + 9);
    push_header(buf, b'$', ms.len() + 1 + seq.len());
    buf.extend_from_slice(ms);
    buf.push(b'-');
    buf.extend_from_slice(seq);
    buf.extend_from_slice(b"\r\n");
}

/// One entry: `[id, [field, value, ...]]`, written with one growth check
/// for the whole entry (an XRANGE COUNT 100 reply is 800 elements).
fn write_entry(out: &mut Reply, id: StreamId, fields: &[&[u8]]) {
    let buf = &mut out.buf;
    // Each header is at most 24 bytes with its CRLF; an id at most 41.
    let size: usize = fields.iter().map(|f| f.len() + 26).sum::<usize>() + 3 * 26 + 41;
    buf.reserve(size);
    buf.extend_from_slice(b"*2\r\n");
    push_id(buf, id);
    push_header(buf, b'*', fields.len());
    for f in fields {
        push_header(buf, b'$', f.len());
        buf.extend_from_slice(f);
        buf.extend_from_slice(b"\r\n");
    }
}

/// A RESP header line (`$5\r\n`, `*6\r\n`): short ones as one fixed-size
/// store, as `Reply` writes them.
fn push_header(buf: &mut Vec<u8>, prefix: u8, n: usize) {
    if n < 10 {
        buf.extend_from_slice(&[prefix, b'0' + n as u8, b'\r', b'\n']);
    } else if n < 100 {
        buf.extend_from_slice(&[
            prefix,
            b'0' + (n / 10) as u8,
            b'0' + (n % 10) as u8,
            b'\r',
            b'\n',
        ]);
    } else {
        let mut ib = itoa::Buffer::new();
        buf.push(prefix);
        buf.extend_from_slice(ib.format(n).as_bytes());
        buf.extend_from_slice(b"\r\n");
    }
}

/// Entries between `start` and `end` (up to `count`) written as they are
/// decoded, with no list of them in between: the array's header, whose
/// length is known only at the end, is put in front of them then.
fn write_range(
    out: &mut Reply,
    s: &Stream,
    start: StreamId,
    end: StreamId,
    rev: bool,
    count: Option<usize>,
) {
    let at = out.buf.len();
    let mut n = 0usize;
    if count != Some(0) {
        s.for_each_entry(start, end, rev, |e| {
            write_entry(out, e.id, &e.fields);
            n += 1;
            count.is_none_or(|c| n < c)
        });
    }
    let mut ib = itoa::Buffer::new();
    let digits = ib.format(n).as_bytes();
    let mut head = [0u8; 24];
    let len = digits.len() + 3;
    head[0] = b'*';
    head[1..len - 2].copy_from_slice(digits);
    head[len - 2..len].copy_from_slice(b"\r\n");
    out.buf.splice(at..at, head[..len].iter().copied());
}

/// `entries` (borrowed from the stream) as an array of entries.
fn write_entry_refs(out: &mut Reply, entries: &[EntryRef<'_>]) {
    out.array(entries.len());
    for e in entries {
        write_entry(out, e.id, &e.fields);
    }
}

/// `entries` (owned) as an array of entries.
fn write_entries(out: &mut Reply, entries: &[(StreamId, Vec<Vec<u8>>)]) {
    out.array(entries.len());
    for (id, fields) in entries {
        let refs: Vec<&[u8]> = fields.iter().map(|f| f.as_slice()).collect();
        write_entry(out, *id, &refs);
    }
}

fn nogroup(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::line(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

fn subcommand_syntax(command: &str, sub: &[u8]) -> CmdError {
    CmdError::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        String::from_utf8_lossy(sub),
        command
    ))
}

fn bytes_of(n: impl ToString) -> Vec<u8> {
    n.to_string().into_bytes()
}

/// Whether this command's changes are recorded (the AOF on or being
/// rewritten, or a replication backlog: `journal::feeding`): when not, the
/// commands that would reproduce them (XADD's id, XREADGROUP's XCLAIMs)
/// are not built, as the journal would drop them unread. (A backlog
/// started by a first replica between this check and the feed gets the
/// command as received, ahead of the snapshot that replica loads.)
fn logging(ctx: &Ctx) -> bool {
    crate::state::journal::feeding(&ctx.server.aof)
}

/// The AOF form of a delivery or claim: Redis's propagated XCLAIM.
fn claim_command(key: &[u8], group: &[u8], g: &Group, id: StreamId) -> Option<Vec<Vec<u8>>> {
    let p = g.pel.get(&id)?;
    Some(vec![
        b"XCLAIM".to_vec(),
        key.to_vec(),
        group.to_vec(),
        p.consumer.to_vec(),
        b"0".to_vec(),
        id.to_bytes(),
        b"TIME".to_vec(),
        bytes_of(p.delivery_time),
        b"RETRYCOUNT".to_vec(),
        bytes_of(p.delivery_count),
        b"FORCE".to_vec(),
        b"JUSTID".to_vec(),
        b"LASTID".to_vec(),
        g.last_id.to_bytes(),
    ])
}

/// The AOF form of a group's position.
fn setid_command(key: &[u8], group: &[u8], g: &Group) -> Vec<Vec<u8>> {
    vec![
        b"XGROUP".to_vec(),
        b"SETID".to_vec(),
        key.to_vec(),
        group.to_vec(),
        g.last_id.to_bytes(),
        b"ENTRIESREAD".to_vec(),
        bytes_of(g.entries_read.map_or(-1, |n| n as i64)),
    ]
}

/// The AOF form of a consumer's creation.
fn createconsumer_command(key: &[u8], group: &[u8], consumer: &[u8]) -> Vec<Vec<u8>> {
    vec![
        b"XGROUP".to_vec(),
        b"CREATECONSUMER".to_vec(),
        key.to_vec(),
        group.to_vec(),
        consumer.to_vec(),
    ]
}

// ---------------------------------------------------------------------------
// XADD, XTRIM

/// XADD's and XTRIM's trimming options.
#[derive(Default)]
struct TrimArgs {
    how: Option<Trim>,
    approx: bool,
    limit: u64,
    nomkstream: bool,
    /// XADD's id: None for `*`; the flag is false for `ms-*`.
    id: Option<(StreamId, bool)>,
}

/// Parses options from `a[2..]`; for XADD stops at the id (returns its
/// index), for XTRIM consumes everything.
fn parse_trim_args(a: &[&[u8]], xadd: bool) -> Result<(TrimArgs, usize), CmdError> {
    let mut t = TrimArgs::default();
    let mut limit_given = false;
    let mut i = 2;
    while i < a.len() {
        let more = a.len() - 1 - i;
        let opt = a[i];
        if xadd && opt == b"*" {
            break;
        } else if (args::is(opt, "maxlen") || args::is(opt, "minid")) && more > 0 {
            if t.how.is_some() {
                return Err(CmdError::err(
                    "syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            t.approx = false;
            if more >= 2 && a[i + 1] == b"~" {
                t.approx = true;
                i += 1;
            } else if more >= 2 && a[i + 1] == b"=" {
                i += 1;
            }
            if args::is(opt, "maxlen") {
                let n = args::int(a[i + 1])?;
                if n < 0 {
                    return Err(CmdError::err("The MAXLEN argument must be >= 0."));
                }
                t.how = Some(Trim::MaxLen(n as u64));
            } else {
                t.how = Some(Trim::MinId(strict_id(a[i + 1])?));
            }
            i += 1;
        } else if args::is(opt, "limit") && more > 0 {
            let n = args::int(a[i + 1])?;
            if n < 0 {
                return Err(CmdError::err("The LIMIT argument must be >= 0."));
            }
            t.limit = n as u64;
            limit_given = true;
            i += 1;
        } else if xadd && args::is(opt, "nomkstream") {
            t.nomkstream = true;
        } else if xadd {
            t.id = Some(parse_id_with(opt, 0, true, true)?);
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if t.limit != 0 && t.how.is_none() {
        return Err(CmdError::err(
            "syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && t.how.is_none() {
        return Err(CmdError::err(
            "syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if limit_given {
        if !t.approx {
            return Err(CmdError::err(
                "syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    } else if t.approx {
        t.limit = 100 * u64::from(crate::engine::stream::block::MAX_ENTRIES);
    } else {
        t.limit = 0;
    }
    Ok((t, i))
}

/// Applies the trim; returns entries removed.
fn apply_trim(s: &mut Stream, t: &TrimArgs) -> u64 {
    match t.how {
        Some(how) => s.trim(how, t.approx, t.limit),
        None => 0,
    }
}

fn xadd(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let key = a[1];
    let (t, i) = parse_trim_args(a, true)?;
    let fields = &a[i + 1..];
    if fields.len() < 2 || !fields.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity("xadd".into()));
    }
    if let Some((id, true)) = t.id {
        if id.is_zero() {
            return Err(CmdError::err(
                "The ID specified in XADD must be greater than 0-0",
            ));
        }
    }
    let now = stream_now(ctx);
    // The key is looked up once: a new stream is filled, then stored.
    let added = match write_stream(&mut ctx.keys, key)? {
        Some(s) => add_entry(s, &t, fields, now),
        None if t.nomkstream => {
            ctx.out.null();
            return Ok(());
        }
        None => {
            let mut s = Box::<Stream>::default();
            let added = add_entry(&mut s, &t, fields, now);
            // A stream XADD created stays whatever the add did (Redis
            // creates it first, too).
            ctx.keys.set(key, Value::Stream(s), false)?;
            added
        }
    };
    let (id, trimmed, len) = added?;
    ctx.keys.modified(key)?;
    ctx.keys.notify(Class::STREAM, "xadd", key);
    if logging(ctx) {
        let mut logged: Vec<Vec<u8>> = Vec::with_capacity(3 + fields.len());
        logged.extend([b"XADD".to_vec(), key.to_vec(), id.to_bytes()]);
        logged.extend(fields.iter().map(|f| f.to_vec()));
        ctx.keys.propagate_as(logged);
        if trimmed > 0 {
            ctx.keys.propagate_as(exact_trim_command(key, len));
        }
    }
    if trimmed > 0 {
        ctx.keys.notify(Class::STREAM, "xtrim", key);
    }
    id_bulk(ctx.out, id);
    Ok(())
}

/// XADD's work on the stream: the id (generated or checked against the
/// stream's last), the append and the trim. Returns the id, the entries
/// trimmed and the length left.
fn add_entry(
    s: &mut Stream,
    t: &TrimArgs,
    fields: &[&[u8]],
    now: u64,
) -> Result<(StreamId, u64, u64), CmdError> {
    let last = s.last_id;
    if last == StreamId::MAX {
        return Err(CmdError::err(
            "The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let too_small = || {
        CmdError::err(
            "The ID specified in XADD is equal or smaller than the target stream top item",
        )
    };
    let id = match t.id {
        Some((id, true)) => id,
        Some((id, false)) if id.ms == last.ms => {
            if last.seq == u64::MAX {
                return Err(too_small());
            }
            StreamId::new(last.ms, last.seq + 1)
        }
        Some((id, false)) => id,
        None if now > last.ms => StreamId::new(now, 0),
        None => last.next().ok_or_else(too_small)?,
    };
    if id <= last {
        return Err(too_small());
    }
    s.append(id, fields);
    let trimmed = apply_trim(s, t);
    Ok((id, trimmed, s.len()))
}

/// A trim as the AOF records it: exact, to the length it left.
fn exact_trim_command(key: &[u8], len: u64) -> Vec<Vec<u8>> {
    vec![
        b"XTRIM".to_vec(),
        key.to_vec(),
        b"MAXLEN".to_vec(),
        b"=".to_vec(),
        bytes_of(len),
    ]
}

fn xtrim(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let key = a[1];
    let (t, _) = parse_trim_args(a, false)?;
    let Some(s) = write_stream(&mut ctx.keys, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let n = apply_trim(s, &t);
    let len = s.len();
    if n > 0 {
        ctx.keys.modified(key)?;
        ctx.keys.notify(Class::STREAM, "xtrim", key);
        ctx.keys.propagate_as(exact_trim_command(key, len));
    }
    ctx.out.int(n as i64);
    Ok(())
}

// ---------------------------------------------------------------------------
// XRANGE, XREVRANGE, XLEN, XDEL, XSETID

fn range_command(ctx: &mut Ctx, a: &[&[u8]], rev: bool) -> CmdResult {
    let (sa, ea) = if rev { (a[3], a[2]) } else { (a[2], a[3]) };
    // The start is read (and moved past an exclusive bound) before the end.
    let start = interval_start(sa)?;
    let end = interval_end(ea)?;
    let mut count: Option<usize> = None;
    let mut j = 4;
    while j < a.len() {
        if args::is(a[j], "count") && j + 1 < a.len() {
            let n = args::int(a[j + 1])?;
            count = Some(n.max(0) as usize);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let Some(s) = read_stream(&mut ctx.keys, a[1])? else {
        ctx.out.array(0);
        return Ok(());
    };
    if count == Some(0) {
        ctx.out.null_array();
        return Ok(());
    }
    write_range(ctx.out, s, start, end, rev, count);
    Ok(())
}

fn xrange(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    range_command(ctx, a, false)
}

fn xrevrange(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    range_command(ctx, a, true)
}

fn xlen(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let n = read_stream(&mut ctx.keys, a[1])?.map_or(0, |s| s.len());
    ctx.out.int(n as i64);
    Ok(())
}

fn xdel(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let key = a[1];
    // As Redis: a missing key answers 0 and another type WRONGTYPE before
    // the ids are checked.
    if write_stream(&mut ctx.keys, key)?.is_none() {
        ctx.out.int(0);
        return Ok(());
    }
    let ids = a[2..]
        .iter()
        .map(|x| strict_id(x))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(s) = write_stream(&mut ctx.keys, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let deleted = ids.iter().filter(|id| s.delete(**id)).count();
    if deleted > 0 {
        ctx.keys.modified(key)?;
        ctx.keys.notify(Class::STREAM, "xdel", key);
    }
    ctx.out.int(deleted as i64);
    Ok(())
}

fn xsetid(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let key = a[1];
    let id = strict_id(a[2])?;
    let mut entries_added: Option<u64> = None;
    let mut max_deleted = StreamId::MIN;
    let mut i = 3;
    while i < a.len() {
        let more = i + 1 < a.len();
        if args::is(a[i], "entriesadded") && more {
            let n = args::int(a[i + 1])?;
            if n < 0 {
                return Err(CmdError::err("entries_added must be positive"));
            }
            entries_added = Some(n as u64);
        } else if args::is(a[i], "maxdeletedid") && more {
            max_deleted = strict_id(a[i + 1])?;
            if id < max_deleted {
                return Err(CmdError::err(
                    "The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let Some(s) = write_stream(&mut ctx.keys, key)? else {
        return Err(CmdError::NoSuchKey);
    };
    if !s.is_empty() {
        if id < s.last_entry_id() {
            return Err(CmdError::err(
                "The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if entries_added.is_some_and(|n| s.len() > n) {
            return Err(CmdError::err(
                "The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    s.last_id = id;
    if let Some(n) = entries_added {
        s.entries_added = n;
    }
    if !max_deleted.is_zero() {
        s.max_deleted_id = max_deleted;
    }
    ctx.keys.modified(key)?;
    ctx.keys.notify(Class::STREAM, "xsetid", key);
    ctx.out.ok();
    Ok(())
}

// ---------------------------------------------------------------------------
// XREAD, XREADGROUP

/// Where XREAD's / XREADGROUP's keys are: the first half of what follows
/// STREAMS (nothing when the list is unbalanced; the command then fails).
fn read_keys(a: &[&[u8]]) -> SmallVec<[usize; 4]> {
    let mut i = 1;
    while i < a.len() {
        if args::is(a[i], "streams") {
            let rest = a.len() - i - 1;
            if rest.is_multiple_of(2) {
                return (i + 1..i + 1 + rest / 2).collect();
            }
            return SmallVec::new();
        }
        // BLOCK's and COUNT's values, GROUP's names are not keywords.
        if args::is(a[i], "block") || args::is(a[i], "count") {
            i += 2;
        } else if args::is(a[i], "group") {
            i += 3;
        } else {
            i += 1;
        }
    }
    SmallVec::new()
}

/// What XREAD / XREADGROUP were asked.
struct ReadArgs<'a> {
    count: usize,
    block: Option<Option<Duration>>,
    group: Option<(&'a [u8], &'a [u8])>,
    noack: bool,
    streams: usize,
    n: usize,
}

fn parse_read_args<'a>(a: &[&'a [u8]], group_cmd: bool) -> Result<ReadArgs<'a>, CmdError> {
    let mut r = ReadArgs {
        count: 0,
        block: None,
        group: None,
        noack: false,
        streams: 0,
        n: 0,
    };
    let mut i = 1;
    while i < a.len() {
        let more = a.len() - i - 1;
        let o = a[i];
        if args::is(o, "block") && more > 0 {
            i += 1;
            let ms = args::int_with(a[i], || {
                CmdError::err("timeout is not an integer or out of range")
            })?;
            if ms < 0 {
                return Err(CmdError::err("timeout is negative"));
            }
            r.block = Some(if ms == 0 {
                None
            } else {
                Some(Duration::from_millis(ms as u64))
            });
        } else if args::is(o, "count") && more > 0 {
            i += 1;
            r.count = args::int(a[i])?.max(0) as usize;
        } else if args::is(o, "streams") && more > 0 {
            r.streams = i + 1;
            let rest = a.len() - r.streams;
            if !rest.is_multiple_of(2) {
                let (name, sym) = if group_cmd {
                    ("XREADGROUP", '>')
                } else {
                    ("XREAD", '$')
                };
                return Err(CmdError::err(format!(
                    "Unbalanced {name} list of streams: for each stream key an ID or '{sym}' must be specified."
                )));
            }
            r.n = rest / 2;
            break;
        } else if args::is(o, "group") && more >= 2 {
            if !group_cmd {
                return Err(CmdError::err(
                    "The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.group = Some((a[i + 1], a[i + 2]));
            i += 2;
        } else if args::is(o, "noack") {
            if !group_cmd {
                return Err(CmdError::err(
                    "The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.noack = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if r.streams == 0 {
        return Err(CmdError::Syntax);
    }
    if group_cmd && r.group.is_none() {
        return Err(CmdError::err("Missing GROUP option for XREADGROUP"));
    }
    Ok(r)
}

/// One stream's id in an XREAD / XREADGROUP: after this id, or `>`.
#[derive(Clone, Copy)]
enum ReadFrom {
    After(StreamId),
    New,
}

fn xread(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    read_command(ctx, a, false)
}

fn xreadgroup(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    read_command(ctx, a, true)
}

fn read_command(ctx: &mut Ctx, a: &[&[u8]], group_cmd: bool) -> CmdResult {
    let r = parse_read_args(a, group_cmd)?;
    let keys = &a[r.streams..r.streams + r.n];
    let id_args = &a[r.streams + r.n..];
    let mut from = Vec::with_capacity(r.n);
    for (key, arg) in keys.iter().zip(id_args) {
        let s = read_stream(&mut ctx.keys, key)?;
        if let Some((group, _)) = r.group {
            if s.is_none_or(|s| !s.groups.contains_key(group)) {
                return Err(CmdError::line(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(group)
                )));
            }
        }
        if *arg == b"$" {
            if group_cmd {
                return Err(CmdError::err("The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."));
            }
            from.push(ReadFrom::After(s.map_or(StreamId::MIN, |s| s.last_id)));
        } else if *arg == b">" {
            if !group_cmd {
                return Err(CmdError::err(
                    "The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                ));
            }
            from.push(ReadFrom::New);
        } else {
            let id = strict_id(arg)?;
            // Redis marks `>` as the largest id: that id, given, is `>`.
            if group_cmd && id == StreamId::MAX {
                from.push(ReadFrom::New);
            } else {
                from.push(ReadFrom::After(id));
            }
        }
    }
    let served = match r.group {
        None => serve_xread(ctx, keys, &from, r.count)?,
        Some((group, consumer)) => {
            serve_group(ctx, keys, &from, r.count, group, consumer, r.noack)?
        }
    };
    if served {
        return Ok(());
    }
    if let Some(timeout) = r.block {
        // `$` is pinned to the id it stood for, so a rerun after a wake-up
        // waits for what comes after it.
        let mut rerun: Vec<Vec<u8>> = a.iter().map(|x| x.to_vec()).collect();
        for (k, f) in from.iter().enumerate() {
            if let (ReadFrom::After(id), true) = (f, id_args[k] == b"$") {
                rerun[r.streams + r.n + k] = id.to_bytes();
            }
        }
        let rerun_refs: Vec<&[u8]> = rerun.iter().map(|x| x.as_slice()).collect();
        let group = r.group.map(|(g, _)| g);
        if ctx.block_in_group(keys, timeout, &rerun_refs, group) {
            return Ok(());
        }
    }
    ctx.out.null_array();
    Ok(())
}

/// The header of XREAD's reply with `n` streams (a map in RESP3).
fn read_reply_header(out: &mut Reply, n: usize) {
    if out.resp3 {
        out.map(n);
    } else {
        out.array(n);
    }
}

/// One stream of the reply: its key (RESP2 wraps key and entries in a
/// pair; RESP3's map does not).
fn read_reply_key(out: &mut Reply, key: &[u8], resp3: bool) {
    if !resp3 {
        out.array(2);
    }
    out.bulk(key);
}

fn serve_xread(
    ctx: &mut Ctx,
    keys: &[&[u8]],
    from: &[ReadFrom],
    count: usize,
) -> Result<bool, CmdError> {
    let limit = (count > 0).then_some(count);
    let mut found: Vec<(usize, Entries)> = Vec::new();
    for (k, key) in keys.iter().enumerate() {
        let ReadFrom::After(after) = from[k] else {
            continue;
        };
        let Some(s) = read_stream(&mut ctx.keys, key)? else {
            continue;
        };
        if s.is_empty() || s.last_entry_id() <= after {
            continue;
        }
        let Some(start) = after.next() else {
            continue;
        };
        found.push((k, s.range(start, StreamId::MAX, false, limit)));
    }
    if found.is_empty() {
        return Ok(false);
    }
    let resp3 = ctx.out.resp3;
    read_reply_header(ctx.out, found.len());
    for (k, entries) in &found {
        read_reply_key(ctx.out, keys[*k], resp3);
        write_entries(ctx.out, entries);
    }
    Ok(true)
}

#[allow(clippy::too_many_arguments)]
fn serve_group(
    ctx: &mut Ctx,
    keys: &[&[u8]],
    from: &[ReadFrom],
    count: usize,
    group: &[u8],
    consumer: &[u8],
    noack: bool,
) -> Result<bool, CmdError> {
    let now = stream_now(ctx);
    let resp3 = ctx.out.resp3;
    // The commands that reproduce the reads are built only when something
    // records them (see `logging`); `changed` says whether the read changed
    // the group either way.
    let logging = logging(ctx);
    let mut changed = false;
    let mut replies: Vec<(usize, Reply)> = Vec::new();
    let mut logged: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut created = Vec::new();
    // New entries go to the group's clients in the order they blocked: not
    // to this one while an earlier one waits for them (it was woken too).
    let mine: SmallVec<[bool; 4]> = keys
        .iter()
        .map(|key| ctx.may_serve_in_group(key, Some(group)))
        .collect();
    for (k, key) in keys.iter().enumerate() {
        let Some(s) = write_stream(&mut ctx.keys, key)? else {
            continue;
        };
        // The groups are moved out while the stream's entries are read
        // (put back below), so the group can change meanwhile.
        let mut groups = std::mem::take(&mut s.groups);
        let Some(g) = groups.get_mut(group) else {
            s.groups = groups;
            continue;
        };
        // The consumer is created (and seen) only when the read is served
        // now, as in Redis: a `>` with nothing new leaves it alone.
        let serve_now = match from[k] {
            ReadFrom::After(_) => true,
            ReadFrom::New => mine[k] && !s.is_empty() && s.last_entry_id() > g.last_id,
        };
        if serve_now {
            if g.create_consumer(consumer, now) {
                created.push(k);
                changed = true;
                if logging {
                    logged.push(createconsumer_command(key, group, consumer));
                }
            }
            if let Some(c) = g.consumers.get_mut(consumer) {
                c.seen_time = now;
            }
        }
        let mut out = Reply::new(resp3);
        let served = match from[k] {
            ReadFrom::After(after) => {
                // History: this consumer's pending entries after `after`.
                let ids: Vec<StreamId> = match (g.consumers.get(consumer), after.next()) {
                    (Some(c), Some(first)) => c
                        .pel
                        .range(first..)
                        .take(if count == 0 { usize::MAX } else { count })
                        .copied()
                        .collect(),
                    _ => Vec::new(),
                };
                out.array(ids.len());
                s.for_each_of(&ids, |id, entry| match entry {
                    Some(e) => write_entry(&mut out, id, &e.fields),
                    None => {
                        out.array(2);
                        id_bulk(&mut out, id);
                        out.null_array();
                    }
                });
                for id in ids {
                    if let Some(p) = g.pel.get_mut(&id) {
                        p.delivery_time = now;
                        p.delivery_count += 1;
                        changed = true;
                        if logging {
                            logged.extend(claim_command(key, group, g, id));
                        }
                    }
                }
                true
            }
            ReadFrom::New => {
                if !serve_now {
                    false
                } else {
                    let start = g.last_id.next().unwrap_or(StreamId::MAX);
                    let limit = (count > 0).then_some(count);
                    let entries = s.range_refs(start, StreamId::MAX, false, limit);
                    write_entry_refs(&mut out, &entries);
                    for e in &entries {
                        s.deliver_to(g, e.id);
                        if !noack {
                            g.assign(e.id, consumer, now, 1);
                            if logging {
                                logged.extend(claim_command(key, group, g, e.id));
                            }
                        }
                    }
                    changed = true;
                    if logging {
                        logged.push(setid_command(key, group, g));
                    }
                    true
                }
            }
        };
        s.groups = groups;
        if served {
            replies.push((k, out));
        }
    }
    for k in &created {
        ctx.keys
            .notify(Class::STREAM, "xgroup-createconsumer", keys[*k]);
    }
    if changed {
        for (k, _) in &replies {
            ctx.keys.modified(keys[*k])?;
        }
        for k in &created {
            ctx.keys.modified(keys[*k])?;
        }
        for c in logged {
            ctx.keys.propagate_as(c);
        }
    }
    if replies.is_empty() {
        return Ok(false);
    }
    read_reply_header(ctx.out, replies.len());
    for (k, r) in &replies {
        read_reply_key(ctx.out, keys[*k], resp3);
        ctx.out.raw(&r.buf);
    }
    Ok(true)
}

// ---------------------------------------------------------------------------
// XGROUP

const XGROUP_HELP: &[&str] = &[
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
];

fn xgroup_help(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if a.len() > 2 || (a.len() == 2 && !args::is(a[1], "help")) {
        return Err(subcommand_syntax(
            "XGROUP",
            a.get(1).copied().unwrap_or(b""),
        ));
    }
    ctx.out.help("XGROUP", XGROUP_HELP);
    Ok(())
}

/// CREATE's and SETID's options after the id: MKSTREAM (CREATE only)
/// and ENTRIESREAD.
fn group_options(a: &[&[u8]], create: bool) -> Result<(bool, Option<u64>), CmdError> {
    let mut mkstream = false;
    let mut entries_read = None;
    let mut i = 5;
    while i < a.len() {
        if create && args::is(a[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if args::is(a[i], "entriesread") && i + 1 < a.len() {
            let n = args::int(a[i + 1])?;
            if n < -1 {
                return Err(CmdError::err(
                    "value for ENTRIESREAD must be positive or -1",
                ));
            }
            entries_read = (n >= 0).then_some(n as u64);
            i += 2;
        } else {
            return Err(subcommand_syntax("XGROUP", a[1]));
        }
    }
    Ok((mkstream, entries_read))
}

fn key_must_exist() -> CmdError {
    CmdError::err("The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")
}

fn no_such_group(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::line(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        String::from_utf8_lossy(group),
        String::from_utf8_lossy(key)
    ))
}

/// The stream under `key` with its group `group` for an XGROUP
/// subcommand that needs both.
fn group_target<'k>(
    keys: &'k mut Keys<'_>,
    key: &[u8],
    group: &[u8],
) -> Result<&'k mut Stream, CmdError> {
    let s = write_stream(keys, key)?.ok_or_else(key_must_exist)?;
    if !s.groups.contains_key(group) {
        return Err(no_such_group(key, group));
    }
    Ok(s)
}

fn xgroup_create(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (key, group) = (a[2], a[3]);
    let (mkstream, entries_read) = group_options(a, true)?;
    let exists = write_stream(&mut ctx.keys, key)?.is_some();
    if !exists && !mkstream {
        return Err(key_must_exist());
    }
    let id = if a[4] == b"$" {
        None
    } else {
        Some(strict_id(a[4])?)
    };
    if !exists {
        ctx.keys.set(key, Value::Stream(Box::default()), false)?;
    }
    let Some(s) = write_stream(&mut ctx.keys, key)? else {
        return Err(key_must_exist());
    };
    if s.groups.contains_key(group) {
        return Err(CmdError::line(
            "BUSYGROUP Consumer Group name already exists",
        ));
    }
    let id = id.unwrap_or(s.last_id);
    s.groups
        .insert(group.to_vec(), Group::new(id, entries_read));
    ctx.keys.modified(key)?;
    ctx.keys.notify(Class::STREAM, "xgroup-create", key);
    ctx.out.ok();
    Ok(())
}

fn xgroup_setid(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (key, group) = (a[2], a[3]);
    let (_, entries_read) = group_options(a, false)?;
    let s = group_target(&mut ctx.keys, key, group)?;
    if a.len() != 5 && a.len() != 7 {
        return Err(subcommand_syntax("XGROUP", a[1]));
    }
    let id = if a[4] == b"$" {
        s.last_id
    } else {
        parse_id_with(a[4], 0, false, false)?.0
    };
    if let Some(g) = s.groups.get_mut(group) {
        g.last_id = id;
        g.entries_read = entries_read;
    }
    ctx.keys.modified(key)?;
    ctx.keys.notify(Class::STREAM, "xgroup-setid", key);
    ctx.out.ok();
    Ok(())
}

fn xgroup_destroy(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (key, group) = (a[2], a[3]);
    let s = write_stream(&mut ctx.keys, key)?.ok_or_else(key_must_exist)?;
    if s.groups.remove(group).is_none() {
        ctx.out.int(0);
        return Ok(());
    }
    ctx.keys.modified(key)?;
    ctx.keys.notify(Class::STREAM, "xgroup-destroy", key);
    ctx.out.int(1);
    Ok(())
}

fn xgroup_createconsumer(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (key, group, consumer) = (a[2], a[3], a[4]);
    let now = stream_now(ctx);
    let s = group_target(&mut ctx.keys, key, group)?;
    let created = s
        .groups
        .get_mut(group)
        .is_some_and(|g| g.create_consumer(consumer, now));
    if created {
        ctx.keys.modified(key)?;
        ctx.keys.notify(Class::STREAM, "xgroup-createconsumer", key);
    }
    ctx.out.int(created as i64);
    Ok(())
}

fn xgroup_delconsumer(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (key, group, consumer) = (a[2], a[3], a[4]);
    let s = group_target(&mut ctx.keys, key, group)?;
    let pending = s
        .groups
        .get_mut(group)
        .and_then(|g| g.delete_consumer(consumer));
    if let Some(n) = pending {
        ctx.keys.modified(key)?;
        ctx.keys.notify(Class::STREAM, "xgroup-delconsumer", key);
        ctx.out.int(n as i64);
    } else {
        ctx.out.int(0);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// XACK, XPENDING, XCLAIM, XAUTOCLAIM

fn xack(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (key, group) = (a[1], a[2]);
    // No key or group: nothing to ack, whatever the ids (Redis answers
    // before parsing them).
    if !read_stream(&mut ctx.keys, key)?.is_some_and(|s| s.groups.contains_key(group)) {
        ctx.out.int(0);
        return Ok(());
    }
    let ids = a[3..]
        .iter()
        .map(|x| strict_id(x))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(g) = write_stream(&mut ctx.keys, key)?.and_then(|s| s.groups.get_mut(group)) else {
        ctx.out.int(0);
        return Ok(());
    };
    let acked = ids.iter().filter(|id| g.ack(**id)).count();
    if acked > 0 {
        ctx.keys.modified(key)?;
    }
    ctx.out.int(acked as i64);
    Ok(())
}

fn xpending(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (key, group) = (a[1], a[2]);
    let summary = a.len() == 3;
    if a.len() != 3 && (a.len() < 6 || a.len() > 9) {
        return Err(CmdError::Syntax);
    }
    let mut min_idle: i64 = 0;
    let mut range = (StreamId::MIN, StreamId::MAX, 0usize, None::<&[u8]>);
    if a.len() >= 6 {
        let mut at = 3;
        if args::is(a[3], "idle") {
            min_idle = args::int(a[4])?;
            if a.len() < 8 {
                return Err(CmdError::Syntax);
            }
            at += 2;
        }
        let count = args::int(a[at + 2])?.max(0) as usize;
        let start = interval_start(a[at])?;
        let end = interval_end(a[at + 1])?;
        range = (start, end, count, a.get(at + 3).copied());
    }
    let now = stream_now(ctx);
    let s = read_stream(&mut ctx.keys, key)?;
    let Some(g) = s.and_then(|s| s.groups.get(group)) else {
        return Err(nogroup(key, group));
    };
    let out = &mut *ctx.out;
    if summary {
        out.array(4);
        out.int(g.pel.len() as i64);
        match (g.pel.first_key(), g.pel.last_key()) {
            (Some(first), Some(last)) => {
                id_bulk(out, first);
                id_bulk(out, last);
                let owners: Vec<_> = g
                    .consumers
                    .iter()
                    .filter(|(_, c)| !c.pel.is_empty())
                    .collect();
                out.array(owners.len());
                for (name, c) in owners {
                    out.array(2);
                    out.bulk(name);
                    out.bulk_int(c.pel.len() as i64);
                }
            }
            _ => {
                out.null();
                out.null();
                out.null_array();
            }
        }
        return Ok(());
    }
    let (start, end, mut count, consumer) = range;
    let ids: Vec<StreamId> = match consumer {
        Some(name) => match g.consumers.get(name) {
            Some(c) if start <= end => c.pel.range(start..=end).copied().collect(),
            Some(_) => Vec::new(),
            None => {
                out.array(0);
                return Ok(());
            }
        },
        None if start <= end => g.pel.range(start..=end).map(|(id, _)| *id).collect(),
        None => Vec::new(),
    };
    let mut rows = Vec::new();
    for id in ids {
        if count == 0 {
            break;
        }
        let Some(p) = g.pel.get(&id) else {
            continue;
        };
        let idle = now as i64 - p.delivery_time as i64;
        if min_idle != 0 && idle < min_idle {
            continue;
        }
        count -= 1;
        rows.push((id, p.consumer.clone(), idle.max(0), p.delivery_count));
    }
    out.array(rows.len());
    for (id, c, idle, n) in rows {
        out.array(4);
        id_bulk(out, id);
        out.bulk(&c);
        out.int(idle);
        out.int(n as i64);
    }
    Ok(())
}

fn xclaim(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (key, group, consumer) = (a[1], a[2], a[3]);
    let exists = read_stream(&mut ctx.keys, key)?.is_some_and(|s| s.groups.contains_key(group));
    if !exists {
        return Err(nogroup(key, group));
    }
    let min_idle = args::int_with(a[4], || {
        CmdError::err("Invalid min-idle-time argument for XCLAIM")
    })?
    .max(0);
    let mut j = 5;
    let mut ids = Vec::new();
    while j < a.len() {
        match strict_id(a[j]) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = stream_now(ctx) as i64;
    let (mut force, mut justid) = (false, false);
    let mut delivery: Option<i64> = None;
    let mut retry: Option<i64> = None;
    let mut last_id = StreamId::MIN;
    while j < a.len() {
        let more = j + 1 < a.len();
        let opt = a[j];
        if args::is(opt, "force") {
            force = true;
        } else if args::is(opt, "justid") {
            justid = true;
        } else if args::is(opt, "idle") && more {
            j += 1;
            let v = args::int_with(a[j], || {
                CmdError::err("Invalid IDLE option argument for XCLAIM")
            })?;
            delivery = Some(now - v);
        } else if args::is(opt, "time") && more {
            j += 1;
            delivery = Some(args::int_with(a[j], || {
                CmdError::err("Invalid TIME option argument for XCLAIM")
            })?);
        } else if args::is(opt, "retrycount") && more {
            j += 1;
            retry = Some(args::int_with(a[j], || {
                CmdError::err("Invalid RETRYCOUNT option argument for XCLAIM")
            })?);
        } else if args::is(opt, "lastid") && more {
            j += 1;
            last_id = strict_id(a[j])?;
        } else {
            return Err(CmdError::err(format!(
                "Unrecognized XCLAIM option '{}'",
                String::from_utf8_lossy(opt)
            )));
        }
        j += 1;
    }
    let delivery = match delivery {
        Some(t) if t >= 0 && t <= now => t as u64,
        _ => now as u64,
    };
    let Some(s) = write_stream(&mut ctx.keys, key)? else {
        return Err(nogroup(key, group));
    };
    let Some(mut g) = s.groups.remove(group) else {
        return Err(nogroup(key, group));
    };
    let mut changed = false;
    let mut logged = Vec::new();
    if last_id > g.last_id {
        g.last_id = last_id;
        changed = true;
    }
    let mut created = false;
    let mut claimed: Vec<(StreamId, Option<Vec<Vec<u8>>>)> = Vec::new();
    for id in ids {
        let fields = s.get(id);
        let pending = g.pel.get(&id).map(|p| (p.delivery_time, p.delivery_count));
        if fields.is_none() {
            if pending.is_some() {
                g.ack(id);
                logged.push(vec![
                    b"XACK".to_vec(),
                    key.to_vec(),
                    group.to_vec(),
                    id.to_bytes(),
                ]);
                changed = true;
            }
            continue;
        }
        let (old_count, was_pending) = match pending {
            Some((time, n)) => {
                if min_idle != 0 && now - (time as i64) < min_idle {
                    continue;
                }
                (n, true)
            }
            None if force => (1, false),
            None => continue,
        };
        let _ = was_pending;
        if g.create_consumer(consumer, now as u64) {
            created = true;
            logged.push(createconsumer_command(key, group, consumer));
        }
        let n = match retry {
            Some(r) if r >= 0 => r as u64,
            _ if justid => old_count,
            _ => old_count + 1,
        };
        g.assign(id, consumer, delivery, n);
        if let Some(c) = g.consumers.get_mut(consumer) {
            c.seen_time = now as u64;
        }
        logged.extend(claim_command(key, group, &g, id));
        changed = true;
        claimed.push((id, if justid { None } else { fields }));
    }
    if last_id == g.last_id && logged.is_empty() && changed {
        logged.push(setid_command(key, group, &g));
    }
    s.groups.insert(group.to_vec(), g);
    if created {
        ctx.keys.notify(Class::STREAM, "xgroup-createconsumer", key);
    }
    if changed {
        ctx.keys.modified(key)?;
        for c in logged {
            ctx.keys.propagate_as(c);
        }
    }
    let out = &mut *ctx.out;
    out.array(claimed.len());
    for (id, fields) in claimed {
        match fields {
            Some(f) => {
                let refs: Vec<&[u8]> = f.iter().map(|x| x.as_slice()).collect();
                write_entry(out, id, &refs);
            }
            None => id_bulk(out, id),
        }
    }
    Ok(())
}

fn xautoclaim(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (key, group, consumer) = (a[1], a[2], a[3]);
    // As Redis: the arguments are checked before the key's type and group.
    let min_idle = args::int_with(a[4], || {
        CmdError::err("Invalid min-idle-time argument for XAUTOCLAIM")
    })?
    .max(0);
    let start = interval_start(a[5])?;
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < a.len() {
        let more = j + 1 < a.len();
        if args::is(a[j], "count") && more {
            let max = i64::MAX / 16;
            count = match args::int(a[j + 1]) {
                Ok(n) if (1..=max).contains(&n) => n,
                _ => return Err(CmdError::err("COUNT must be > 0")),
            };
            j += 1;
        } else if args::is(a[j], "justid") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let exists = read_stream(&mut ctx.keys, key)?.is_some_and(|s| s.groups.contains_key(group));
    if !exists {
        return Err(nogroup(key, group));
    }
    let now = stream_now(ctx);
    let Some(s) = write_stream(&mut ctx.keys, key)? else {
        return Err(nogroup(key, group));
    };
    let Some(mut g) = s.groups.remove(group) else {
        return Err(nogroup(key, group));
    };
    let mut attempts = count.saturating_mul(10);
    let mut claimed: Vec<(StreamId, Option<Vec<Vec<u8>>>)> = Vec::new();
    let mut deleted = Vec::new();
    let mut logged = Vec::new();
    let mut created = false;
    // The next PEL id to look at (None: past the largest id).
    let mut cursor = Some(start);
    let mut next: Option<StreamId>;
    loop {
        next = cursor.and_then(|c| g.pel.range(c..).next().map(|(id, _)| *id));
        if attempts <= 0 || count <= 0 {
            break;
        }
        attempts -= 1;
        let Some(id) = next else {
            break;
        };
        cursor = id.next();
        let Some(fields) = s.get(id) else {
            g.ack(id);
            logged.push(vec![
                b"XACK".to_vec(),
                key.to_vec(),
                group.to_vec(),
                id.to_bytes(),
            ]);
            deleted.push(id);
            count -= 1;
            continue;
        };
        let Some(p) = g.pel.get(&id) else {
            continue;
        };
        if min_idle != 0 && (now as i64 - p.delivery_time as i64) < min_idle {
            continue;
        }
        let n = if justid {
            p.delivery_count
        } else {
            p.delivery_count + 1
        };
        if g.create_consumer(consumer, now) {
            created = true;
            logged.push(createconsumer_command(key, group, consumer));
        }
        g.assign(id, consumer, now, n);
        if let Some(c) = g.consumers.get_mut(consumer) {
            c.seen_time = now;
        }
        logged.extend(claim_command(key, group, &g, id));
        claimed.push((id, if justid { None } else { Some(fields) }));
        count -= 1;
    }
    s.groups.insert(group.to_vec(), g);
    if created {
        ctx.keys.notify(Class::STREAM, "xgroup-createconsumer", key);
    }
    if !logged.is_empty() {
        ctx.keys.modified(key)?;
        for c in logged {
            ctx.keys.propagate_as(c);
        }
    }
    let out = &mut *ctx.out;
    out.array(3);
    id_bulk(out, next.unwrap_or(StreamId::MIN));
    out.array(claimed.len());
    for (id, fields) in claimed {
        match fields {
            Some(f) => {
                let refs: Vec<&[u8]> = f.iter().map(|x| x.as_slice()).collect();
                write_entry(out, id, &refs);
            }
            None => id_bulk(out, id),
        }
    }
    out.array(deleted.len());
    for id in deleted {
        id_bulk(out, id);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// XINFO

const XINFO_HELP: &[&str] = &[
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
];

fn xinfo_help(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if a.len() > 2 || (a.len() == 2 && !args::is(a[1], "help")) {
        return Err(subcommand_syntax("XINFO", a.get(1).copied().unwrap_or(b"")));
    }
    ctx.out.help("XINFO", XINFO_HELP);
    Ok(())
}

fn info_target<'k>(keys: &'k mut Keys<'_>, key: &[u8]) -> Result<&'k Stream, CmdError> {
    read_stream(keys, key)?.ok_or(CmdError::NoSuchKey)
}

fn entries_read_reply(out: &mut Reply, g: &Group) {
    match g.entries_read {
        Some(n) => out.int(n as i64),
        None => out.null(),
    }
}

fn lag_reply(out: &mut Reply, s: &Stream, g: &Group) {
    match s.lag(g) {
        Some(n) => out.int(n),
        None => out.null(),
    }
}

fn edge_entry(out: &mut Reply, s: &Stream, rev: bool) {
    match s.range(StreamId::MIN, StreamId::MAX, rev, Some(1)).first() {
        Some((id, fields)) => {
            let refs: Vec<&[u8]> = fields.iter().map(|f| f.as_slice()).collect();
            write_entry(out, *id, &refs);
        }
        None => out.null(),
    }
}

fn xinfo_stream(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let opts = &a[3..];
    let mut full = None;
    if !opts.is_empty() {
        if (opts.len() != 1 && opts.len() != 3) || !args::is(opts[0], "full") {
            return Err(subcommand_syntax("XINFO", a[1]));
        }
        let mut count = 10usize;
        if opts.len() == 3 {
            if !args::is(opts[1], "count") {
                return Err(subcommand_syntax("XINFO", a[1]));
            }
            count = args::int(opts[2])?.max(0) as usize;
        }
        full = Some(count);
    }
    let s = info_target(&mut ctx.keys, a[2])?;
    let out = &mut *ctx.out;
    out.map(if full.is_some() { 9 } else { 10 });
    out.bulk(b"length");
    out.int(s.len() as i64);
    out.bulk(b"radix-tree-keys");
    out.int(s.block_count() as i64);
    out.bulk(b"radix-tree-nodes");
    out.int(s.block_count() as i64 + 1);
    out.bulk(b"last-generated-id");
    id_bulk(out, s.last_id);
    out.bulk(b"max-deleted-entry-id");
    id_bulk(out, s.max_deleted_id);
    out.bulk(b"entries-added");
    out.int(s.entries_added as i64);
    out.bulk(b"recorded-first-entry-id");
    id_bulk(out, s.first_id());
    let Some(count) = full else {
        out.bulk(b"groups");
        out.int(s.groups.len() as i64);
        out.bulk(b"first-entry");
        edge_entry(out, s, false);
        out.bulk(b"last-entry");
        edge_entry(out, s, true);
        return Ok(());
    };
    let limit = (count > 0).then_some(count);
    let take = if count == 0 { usize::MAX } else { count };
    out.bulk(b"entries");
    write_entries(out, &s.range(StreamId::MIN, StreamId::MAX, false, limit));
    out.bulk(b"groups");
    out.array(s.groups.len());
    for (name, g) in &s.groups {
        out.map(7);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"last-delivered-id");
        id_bulk(out, g.last_id);
        out.bulk(b"entries-read");
        entries_read_reply(out, g);
        out.bulk(b"lag");
        lag_reply(out, s, g);
        out.bulk(b"pel-count");
        out.int(g.pel.len() as i64);
        out.bulk(b"pending");
        let pel: Vec<_> = g.pel.iter().take(take).collect();
        out.array(pel.len());
        for (id, p) in pel {
            out.array(4);
            id_bulk(out, *id);
            out.bulk(&p.consumer);
            out.int(p.delivery_time as i64);
            out.int(p.delivery_count as i64);
        }
        out.bulk(b"consumers");
        out.array(g.consumers.len());
        for (cname, c) in &g.consumers {
            out.map(4);
            out.bulk(b"name");
            out.bulk(cname);
            out.bulk(b"seen-time");
            out.int(c.seen_time as i64);
            out.bulk(b"pel-count");
            out.int(c.pel.len() as i64);
            out.bulk(b"pending");
            let pel: Vec<_> = c.pel.iter().take(take).collect();
            out.array(pel.len());
            for id in pel {
                let (time, n) = g
                    .pel
                    .get(id)
                    .map_or((0, 0), |p| (p.delivery_time, p.delivery_count));
                out.array(3);
                id_bulk(out, *id);
                out.int(time as i64);
                out.int(n as i64);
            }
        }
    }
    Ok(())
}

fn xinfo_groups(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let s = info_target(&mut ctx.keys, a[2])?;
    let out = &mut *ctx.out;
    out.array(s.groups.len());
    for (name, g) in &s.groups {
        out.map(6);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"consumers");
        out.int(g.consumers.len() as i64);
        out.bulk(b"pending");
        out.int(g.pel.len() as i64);
        out.bulk(b"last-delivered-id");
        id_bulk(out, g.last_id);
        out.bulk(b"entries-read");
        entries_read_reply(out, g);
        out.bulk(b"lag");
        lag_reply(out, s, g);
    }
    Ok(())
}

fn xinfo_consumers(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (key, group) = (a[2], a[3]);
    let now = stream_now(ctx);
    let s = info_target(&mut ctx.keys, key)?;
    let g = s
        .groups
        .get(group)
        .ok_or_else(|| no_such_group(key, group))?;
    let out = &mut *ctx.out;
    out.array(g.consumers.len());
    for (name, c) in &g.consumers {
        out.map(3);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"pending");
        out.int(c.pel.len() as i64);
        out.bulk(b"idle");
        out.int((now as i64 - c.seen_time as i64).max(0));
    }
    Ok(())
}
