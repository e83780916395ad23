//! Generic key commands: DEL, UNLINK, EXISTS, TYPE, TOUCH, the keyspace-wide
//! KEYS, SCAN and RANDOMKEY, RENAME, RENAMENX, COPY, MOVE, SWAPDB, the expiry
//! commands (EXPIRE ... PERSIST, TTL ... PEXPIRETIME) and OBJECT.
//!
//! KEYS locks every shard, so its answer is one instant's. SCAN and
//! RANDOMKEY hold no shard and visit one at a time (see [`ScanCursor`]).

use bytes::Bytes;
use rand::Rng;

use super::args;
use super::table::{flags::*, CommandSpec, KeySpec};
use super::{Ctx, Keys};
use crate::engine::keyspace::Shard;
use crate::engine::{glob, Db, Entry, SHARD_COUNT};
use crate::error::{CmdError, CmdResult};
use crate::state::notify::Class;

const ALL_ARGS: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 1,
};

/// The key of an OBJECT subcommand.
const fn generic(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: super::table::Handler,
    [summary, since, complexity]: [&'static str; 3],
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, keys, handler)
        .documented("generic", summary, since, complexity)
}

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    generic(
        "del",
        -2,
        WRITE,
        ALL_ARGS,
        del,
        [
            "Delete a key",
            "1.0.0",
            "O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1).",
        ],
    ),
    generic(
        "unlink",
        -2,
        WRITE | FAST,
        ALL_ARGS,
        del,
        [
            "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking.",
            "4.0.0",
            "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.",
        ],
    ),
    generic(
        "exists",
        -2,
        READONLY | FAST,
        ALL_ARGS,
        exists,
        [
            "Determine if a key exists",
            "1.0.0",
            "O(N) where N is the number of keys to check.",
        ],
    ),
    generic(
        "type",
        2,
        READONLY | FAST,
        KeySpec::FIRST,
        type_,
        [
            "Determine the type stored at key",
            "1.0.0",
            "O(1)",
        ],
    ),
    generic(
        "touch",
        -2,
        READONLY | FAST,
        ALL_ARGS,
        touch,
        [
            "Alters the last access time of a key(s). Returns the number of existing keys specified.",
            "3.2.1",
            "O(N) where N is the number of keys that will be touched.",
        ],
    ),
    generic(
        "keys",
        2,
        READONLY,
        KeySpec::All,
        keys,
        [
            "Find all keys matching the given pattern",
            "1.0.0",
            "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.",
        ],
    ),
    generic(
        "scan",
        -2,
        READONLY,
        KeySpec::None,
        scan,
        [
            "Incrementally iterate the keys space",
            "2.8.0",
            "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
        ],
    ),
    generic(
        "randomkey",
        1,
        READONLY,
        KeySpec::None,
        randomkey,
        [
            "Return a random key from the keyspace",
            "1.0.0",
            "O(1)",
        ],
    ),
    generic(
        "rename",
        3,
        WRITE,
        KeySpec::FIRST_TWO,
        rename,
        [
            "Rename a key",
            "1.0.0",
            "O(1)",
        ],
    ),
    generic(
        "renamenx",
        3,
        WRITE | FAST,
        KeySpec::FIRST_TWO,
        renamenx,
        [
            "Rename a key, only if the new key does not exist",
            "1.0.0",
            "O(1)",
        ],
    ),
    generic(
        "copy",
        -3,
        WRITE | DENYOOM,
        KeySpec::FIRST_TWO,
        copy,
        [
            "Copy a key",
            "6.2.0",
            "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.",
        ],
    ),
    generic(
        "move",
        3,
        WRITE | FAST,
        KeySpec::FIRST,
        move_,
        [
            "Move a key to another database",
            "1.0.0",
            "O(1)",
        ],
    ),
    generic(
        "swapdb",
        3,
        WRITE | FAST,
        KeySpec::All,
        swapdb,
        [
            "Swaps two Redis databases",
            "4.0.0",
            "O(N) where N is the count of clients watching or blocking on keys from both databases.",
        ],
    ),
    generic(
        "expire",
        -3,
        WRITE | FAST,
        KeySpec::FIRST,
        expire,
        [
            "Set a key's time to live in seconds",
            "1.0.0",
            "O(1)",
        ],
    ),
    generic(
        "pexpire",
        -3,
        WRITE | FAST,
        KeySpec::FIRST,
        pexpire,
        [
            "Set a key's time to live in milliseconds",
            "2.6.0",
            "O(1)",
        ],
    ),
    generic(
        "expireat",
        -3,
        WRITE | FAST,
        KeySpec::FIRST,
        expireat,
        [
            "Set the expiration for a key as a UNIX timestamp",
            "1.2.0",
            "O(1)",
        ],
    ),
    generic(
        "pexpireat",
        -3,
        WRITE | FAST,
        KeySpec::FIRST,
        pexpireat,
        [
            "Set the expiration for a key as a UNIX timestamp specified in milliseconds",
            "2.6.0",
            "O(1)",
        ],
    ),
    generic(
        "ttl",
        2,
        READONLY | FAST,
        KeySpec::FIRST,
        ttl,
        [
            "Get the time to live for a key in seconds",
            "1.0.0",
            "O(1)",
        ],
    ),
    generic(
        "pttl",
        2,
        READONLY | FAST,
        KeySpec::FIRST,
        pttl,
        [
            "Get the time to live for a key in milliseconds",
            "2.6.0",
            "O(1)",
        ],
    ),
    generic(
        "expiretime",
        2,
        READONLY | FAST,
        KeySpec::FIRST,
        expiretime,
        [
            "Get the expiration Unix timestamp for a key",
            "7.0.0",
            "O(1)",
        ],
    ),
    generic(
        "pexpiretime",
        2,
        READONLY | FAST,
        KeySpec::FIRST,
        pexpiretime,
        [
            "Get the expiration Unix timestamp for a key in milliseconds",
            "7.0.0",
            "O(1)",
        ],
    ),
    generic(
        "persist",
        2,
        WRITE | FAST,
        KeySpec::FIRST,
        persist,
        [
            "Remove the expiration from a key",
            "2.2.0",
            "O(1)",
        ],
    ),
    CommandSpec {
        subcommands: OBJECT_SUBS,
        ..generic(
            "object",
            -2,
            0,
            KeySpec::None,
            object_help,
            [
                "A container for object introspection commands",
                "2.2.3",
                "Depends on subcommand.",
            ],
        )
    },
];

const OBJECT_SUBS: &[CommandSpec] = &[
    generic(
        "encoding",
        3,
        READONLY,
        KeySpec::SECOND,
        object_encoding,
        [
            "Inspect the internal encoding of a Redis object",
            "2.2.3",
            "O(1)",
        ],
    ),
    generic(
        "freq",
        3,
        READONLY,
        KeySpec::SECOND,
        object_freq,
        [
            "Get the logarithmic access frequency counter of a Redis object",
            "4.0.0",
            "O(1)",
        ],
    ),
    generic(
        "help",
        2,
        LOADING | STALE,
        KeySpec::None,
        object_help,
        [
            "Show helpful text about the different subcommands",
            "6.2.0",
            "O(1)",
        ],
    ),
    generic(
        "idletime",
        3,
        READONLY,
        KeySpec::SECOND,
        object_idletime,
        [
            "Get the time since a Redis object was last accessed",
            "2.2.3",
            "O(1)",
        ],
    ),
    generic(
        "refcount",
        3,
        READONLY,
        KeySpec::SECOND,
        object_refcount,
        [
            "Get the number of references to the value of the key",
            "2.2.3",
            "O(1)",
        ],
    ),
];

/// `ERR source and destination objects are the same` (MOVE, COPY).
fn same_object() -> CmdError {
    CmdError::line("ERR source and destination objects are the same")
}

fn not_locked() -> CmdError {
    CmdError::err("internal error: keyspace-wide command without every shard locked")
}

/// Whether an entry found by iteration has not expired at `now_ms`.
fn live(e: &Entry, now_ms: u64) -> bool {
    e.expire_at().is_none_or(|t| t > now_ms)
}

/// The live entry under `key` without touching its access time, counting a
/// keyspace hit or miss (Redis's `LOOKUP_NOTOUCH` lookups: TYPE, TTL, ...).
fn peek<'k>(keys: &'k mut Keys<'_>, key: &[u8]) -> Result<Option<&'k Entry>, CmdError> {
    let now = keys.now_ms;
    let found = keys.part(key)?.peek(key, now).is_some();
    if found {
        keys.hits += 1;
    } else {
        keys.note_miss(key)?;
    }
    Ok(keys.part(key)?.peek(key, now))
}

fn del(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let mut n = 0;
    for k in &a[1..] {
        if ctx.keys.remove(k)?.is_some() {
            ctx.keys.notify(Class::GENERIC, "del", k);
            n += 1;
        }
    }
    ctx.out.int(n);
    Ok(())
}

/// EXISTS: a key named twice counts twice.
fn exists(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let mut n = 0;
    for k in &a[1..] {
        if peek(&mut ctx.keys, k)?.is_some() {
            n += 1;
        }
    }
    ctx.out.int(n);
    Ok(())
}

fn type_(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let name = peek(&mut ctx.keys, a[1])?.map_or("none", |e| e.value.type_name());
    ctx.out.simple(name.as_bytes());
    Ok(())
}

/// TOUCH: reads each key, refreshing its access time.
fn touch(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let mut n = 0;
    for k in &a[1..] {
        if ctx.keys.entry(k)?.is_some() {
            n += 1;
        }
    }
    ctx.out.int(n);
    Ok(())
}

fn keys(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let pattern = a[1];
    // Redis special-cases a lone `*`, which as a glob would miss the empty key.
    let all = pattern == b"*";
    let (db, now) = (ctx.keys.db, ctx.keys.now_ms);
    if !ctx.keys.locked.holds_all() {
        return Err(not_locked());
    }
    let mut found: Vec<&[u8]> = Vec::new();
    for i in 0..SHARD_COUNT {
        let g = ctx.keys.locked.guard(i).ok_or_else(not_locked)?;
        let Some(part) = g.shard().dbs.get(db) else {
            continue;
        };
        found.extend(part.iter().filter_map(|(k, e)| {
            (live(e, now) && (all || glob::matches(pattern, k, false))).then_some(k)
        }));
    }
    ctx.out.array(found.len());
    for k in found {
        ctx.out.bulk(k);
    }
    Ok(())
}

/// Runs `f` on shard `idx` for reading: through the held locks when the
/// command holds every shard (inside EXEC or a script), else under a read
/// lock taken just for `f`.
fn with_shard<R>(keys: &Keys<'_>, idx: usize, f: impl FnOnce(&Shard) -> R) -> Result<R, CmdError> {
    if keys.locked.holds_all() {
        let g = keys.locked.guard(idx).ok_or_else(not_locked)?;
        Ok(f(g.shard()))
    } else {
        let g = keys.ks.lock_one(idx, false);
        Ok(f(g.shard()))
    }
}

/// Bits of a SCAN cursor that hold the position inside a shard.
const POS_BITS: u32 = 64 - SHARD_COUNT.trailing_zeros();
const POS_MASK: u64 = (1 << POS_BITS) - 1;

/// Where a SCAN stands: a shard, and a position in that shard's visiting
/// order ([`Db::scan_position`], a stable per-process hash of the key).
///
/// Each call returns, shard after shard, the keys whose position is at or
/// after the cursor's, in position order, and stops after about COUNT keys
/// but only between two positions. As a key's position never changes, a key
/// present for the whole iteration is returned exactly once (keys whose
/// positions collide are always returned together).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanCursor {
    /// Shard index.
    pub shard: usize,
    /// First position not yet visited in that shard.
    pub pos: u64,
}

impl ScanCursor {
    /// Decodes the cursor a client sent (every number is a valid cursor).
    pub fn decode(cursor: u64) -> Self {
        ScanCursor {
            shard: (cursor >> POS_BITS) as usize,
            pos: cursor & POS_MASK,
        }
    }

    /// The number sent to the client; 0 when `shard` is past the end.
    pub fn encode(self) -> u64 {
        if self.shard >= SHARD_COUNT {
            return 0;
        }
        ((self.shard as u64) << POS_BITS) | (self.pos & POS_MASK)
    }
}

/// SCAN's filters, applied after keys are visited (so, as in Redis, COUNT
/// counts visited keys, not returned ones).
struct ScanFilter<'a> {
    pattern: Option<&'a [u8]>,
    type_name: Option<&'a [u8]>,
    now_ms: u64,
}

impl ScanFilter<'_> {
    fn accepts(&self, key: &[u8], e: &Entry) -> bool {
        live(e, self.now_ms)
            && self
                .type_name
                .is_none_or(|t| t.eq_ignore_ascii_case(e.value.type_name().as_bytes()))
            && self.pattern.is_none_or(|p| glob::matches(p, key, false))
    }
}

/// Visits up to about `want` keys of `part` from position `start` on, in
/// position order (never splitting a position), pushing those `filter`
/// accepts. Returns how many were visited and the next position, `None` when
/// the part is done.
fn scan_part(
    part: &Db,
    hasher: &crate::engine::keyspace::KeyHasher,
    start: u64,
    want: usize,
    filter: &ScanFilter<'_>,
    out: &mut Vec<Bytes>,
) -> (usize, Option<u64>) {
    let mut due: Vec<(u64, &[u8], &Entry)> = part
        .iter()
        .filter_map(|(k, e)| {
            let pos = Db::scan_position(hasher, k);
            (pos >= start).then_some((pos, k, e))
        })
        .collect();
    let mut next = None;
    if want > 0 && due.len() > want {
        let (_, last, _) = due.select_nth_unstable_by_key(want - 1, |d| d.0);
        let last = last.0;
        due.retain(|d| d.0 <= last);
        next = last.checked_add(1).filter(|&p| p <= POS_MASK);
    }
    due.sort_unstable_by_key(|d| d.0);
    for (_, k, e) in &due {
        if filter.accepts(k, e) {
            out.push(Bytes::copy_from_slice(k));
        }
    }
    (due.len(), next)
}

fn scan(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let cursor = args::scan_cursor(a[1]).ok_or_else(|| CmdError::err("invalid cursor"))?;
    let opts = args::scan_options(&a[2..], true)?;
    let count = opts.count;
    let filter = ScanFilter {
        pattern: opts.pattern,
        type_name: opts.type_name,
        now_ms: ctx.keys.now_ms,
    };
    let db = ctx.keys.db;
    let hasher = ctx.keys.ks.hasher();
    let mut at = ScanCursor::decode(cursor);
    let mut found = Vec::new();
    let mut visited = 0;
    while at.shard < SHARD_COUNT && visited < count {
        let want = count - visited;
        let (n, next) = with_shard(&ctx.keys, at.shard, |shard| match shard.dbs.get(db) {
            Some(part) => scan_part(part, hasher, at.pos, want, &filter, &mut found),
            None => (0, None),
        })?;
        visited += n;
        at = match next {
            Some(pos) => ScanCursor { pos, ..at },
            None => ScanCursor {
                shard: at.shard + 1,
                pos: 0,
            },
        };
    }
    ctx.out.array(2);
    ctx.out
        .bulk(itoa::Buffer::new().format(at.encode()).as_bytes());
    ctx.out.array(found.len());
    for k in &found {
        ctx.out.bulk(k);
    }
    Ok(())
}

fn randomkey(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let (db, now) = (ctx.keys.db, ctx.keys.now_ms);
    let mut sizes = [0usize; SHARD_COUNT];
    for (i, size) in sizes.iter_mut().enumerate() {
        *size = with_shard(&ctx.keys, i, |s| s.dbs.get(db).map_or(0, Db::len))?;
    }
    let total: usize = sizes.iter().sum();
    let mut rng = rand::rng();
    // Pick stored keys uniformly; an expired one (or a shard that changed
    // meanwhile) costs a retry.
    let attempts = if total == 0 { 0 } else { 64 };
    for _ in 0..attempts {
        let mut nth = rng.random_range(0..total);
        let mut idx = 0;
        while idx < SHARD_COUNT && nth >= sizes[idx] {
            nth -= sizes[idx];
            idx += 1;
        }
        let key = with_shard(&ctx.keys, idx, |s| {
            let (k, e) = s.dbs.get(db)?.iter().nth(nth)?;
            live(e, now).then(|| Bytes::copy_from_slice(k))
        })?;
        if let Some(k) = key {
            ctx.out.bulk(&k);
            return Ok(());
        }
    }
    // Mostly expired keys: take the first live one, if any.
    for i in 0..SHARD_COUNT {
        let key = with_shard(&ctx.keys, i, |s| {
            let part = s.dbs.get(db)?;
            part.iter()
                .find(|(_, e)| live(e, now))
                .map(|(k, _)| Bytes::copy_from_slice(k))
        })?;
        if let Some(k) = key {
            ctx.out.bulk(&k);
            return Ok(());
        }
    }
    ctx.out.null();
    Ok(())
}

fn rename(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    rename_generic(ctx, a, false)
}

fn renamenx(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    rename_generic(ctx, a, true)
}

/// RENAME / RENAMENX: the value keeps its expiry under the new name.
fn rename_generic(ctx: &mut Ctx, a: &[&[u8]], nx: bool) -> CmdResult {
    let (src, dst) = (a[1], a[2]);
    if ctx.keys.entry_mut(src)?.is_none() {
        return Err(CmdError::NoSuchKey);
    }
    if src == dst {
        if nx {
            ctx.out.int(0);
        } else {
            ctx.out.ok();
        }
        return Ok(());
    }
    if ctx.keys.entry_mut(dst)?.is_some() && nx {
        ctx.out.int(0);
        return Ok(());
    }
    let now = ctx.keys.now_ms;
    let Some(entry) = ctx.keys.part_mut(src)?.remove(src) else {
        return Err(CmdError::NoSuchKey);
    };
    let expire_at = entry.expire_at();
    // Redis deletes an existing destination and adds the key anew.
    ctx.keys.notify(Class::NEW, "new", dst);
    ctx.keys
        .part_mut(dst)?
        .insert_with_expiry(dst, entry.value, expire_at, now);
    ctx.keys.modified(src)?;
    ctx.keys.modified(dst)?;
    ctx.keys.notify(Class::GENERIC, "rename_from", src);
    ctx.keys.notify(Class::GENERIC, "rename_to", dst);
    if nx {
        ctx.out.int(1);
    } else {
        ctx.out.ok();
    }
    Ok(())
}

/// A database number argument, read as Redis's `getIntFromObjectOrReply`
/// (`msg` replaces its error lines when given).
fn db_number(arg: &[u8], msg: Option<&'static str>) -> Result<i64, CmdError> {
    let err = |default: CmdError| msg.map_or(default, CmdError::err);
    let v = args::int(arg).map_err(err)?;
    if v < i64::from(i32::MIN) || v > i64::from(i32::MAX) {
        return Err(err(CmdError::err(
            "value is out of range, value must between -2147483648 and 2147483647",
        )));
    }
    Ok(v)
}

/// `n` as the index of an existing database.
fn db_index(keys: &Keys<'_>, n: i64) -> Result<usize, CmdError> {
    usize::try_from(n)
        .ok()
        .filter(|&i| i < keys.ks.databases())
        .ok_or(CmdError::DbIndexOutOfRange)
}

/// Removes `key` from database `db` if it has expired there (Redis's
/// `lookupKeyWrite` on another database); returns whether it is live.
fn live_in(keys: &mut Keys<'_>, key: &[u8], db: usize) -> Result<bool, CmdError> {
    let now = keys.now_ms;
    let part = keys.part_in_mut(key, db)?;
    if part.expire_if_needed(key, now) {
        part.touch_watched(key);
        keys.notify_in(Class::EXPIRED, "expired", key, db);
    }
    Ok(keys.part_in(key, db)?.contains(key, now))
}

fn move_(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let key = a[1];
    let dst = db_index(&ctx.keys, db_number(a[2], None)?)?;
    if dst == ctx.keys.db {
        return Err(same_object());
    }
    if ctx.keys.entry_mut(key)?.is_none() || live_in(&mut ctx.keys, key, dst)? {
        ctx.out.int(0);
        return Ok(());
    }
    let now = ctx.keys.now_ms;
    let Some(entry) = ctx.keys.part_mut(key)?.remove(key) else {
        ctx.out.int(0);
        return Ok(());
    };
    let expire_at = entry.expire_at();
    ctx.keys.notify_in(Class::NEW, "new", key, dst);
    ctx.keys
        .part_in_mut(key, dst)?
        .insert_with_expiry(key, entry.value, expire_at, now);
    ctx.keys.modified(key)?;
    ctx.keys.modified_in(key, dst)?;
    ctx.keys.notify(Class::GENERIC, "move_from", key);
    ctx.keys.notify_in(Class::GENERIC, "move_to", key, dst);
    ctx.out.int(1);
    Ok(())
}

/// COPY source destination [DB n] [REPLACE]: the copy keeps the expiry.
fn copy(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (src, dst) = (a[1], a[2]);
    let mut dst_db = ctx.keys.db;
    let mut replace = false;
    let mut j = 3;
    while j < a.len() {
        if args::is(a[j], "replace") {
            replace = true;
        } else if args::is(a[j], "db") && j + 1 < a.len() {
            dst_db = db_index(&ctx.keys, db_number(a[j + 1], None)?)?;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if dst_db == ctx.keys.db && src == dst {
        return Err(same_object());
    }
    let expire_at = match ctx.keys.entry(src)? {
        Some(e) => e.expire_at(),
        None => {
            ctx.out.int(0);
            return Ok(());
        }
    };
    if live_in(&mut ctx.keys, dst, dst_db)? && !replace {
        ctx.out.int(0);
        return Ok(());
    }
    let now = ctx.keys.now_ms;
    let Some(value) = ctx
        .keys
        .part(src)?
        .peek(src, now)
        .map(|e| e.value.duplicate())
    else {
        ctx.out.int(0);
        return Ok(());
    };
    // REPLACE: Redis deletes the destination and adds the copy anew.
    ctx.keys.notify_in(Class::NEW, "new", dst, dst_db);
    ctx.keys
        .part_in_mut(dst, dst_db)?
        .insert_with_expiry(dst, value, expire_at, now);
    ctx.keys.modified_in(dst, dst_db)?;
    ctx.keys.notify_in(Class::GENERIC, "copy_to", dst, dst_db);
    ctx.out.int(1);
    Ok(())
}

/// SWAPDB: swaps two databases in every shard at once (every shard is held
/// for writing). WATCHes stay with their database number.
fn swapdb(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let x = db_number(a[1], Some("invalid first DB index"))?;
    let y = db_number(a[2], Some("invalid second DB index"))?;
    let (x, y) = (db_index(&ctx.keys, x)?, db_index(&ctx.keys, y)?);
    if !ctx.keys.locked.holds_all() {
        return Err(not_locked());
    }
    if ctx
        .keys
        .locked
        .guards_mut()
        .any(|g| g.shard_mut().is_none())
    {
        return Err(not_locked());
    }
    let now = ctx.keys.now_ms;
    for g in ctx.keys.locked.guards_mut() {
        if let Some(shard) = g.shard_mut() {
            shard.swap_dbs(x, y, now);
        }
    }
    ctx.keys.dirty += 1;
    ctx.out.ok();
    Ok(())
}

/// EXPIRE's NX / XX / GT / LT conditions.
#[derive(Default)]
struct ExpireIf {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

impl ExpireIf {
    fn parse(opts: &[&[u8]]) -> Result<Self, CmdError> {
        let mut c = ExpireIf::default();
        for o in opts {
            if args::is(o, "nx") {
                c.nx = true;
            } else if args::is(o, "xx") {
                c.xx = true;
            } else if args::is(o, "gt") {
                c.gt = true;
            } else if args::is(o, "lt") {
                c.lt = true;
            } else {
                return Err(CmdError::err(format!(
                    "Unsupported option {}",
                    args::text(o)
                )));
            }
        }
        if c.nx && (c.xx || c.gt || c.lt) {
            return Err(CmdError::err(
                "NX and XX, GT or LT options at the same time are not compatible",
            ));
        }
        if c.gt && c.lt {
            return Err(CmdError::err(
                "GT and LT options at the same time are not compatible",
            ));
        }
        Ok(c)
    }

    /// Whether a new expiry `when` may replace `current` (None: no expiry,
    /// which counts as an infinite TTL).
    fn allows(&self, current: Option<i64>, when: i64) -> bool {
        match current {
            None => !self.xx && !self.gt,
            Some(cur) => {
                let refused = self.nx || (self.gt && when <= cur) || (self.lt && when >= cur);
                !refused
            }
        }
    }
}

/// How an EXPIRE-family command reads its time argument.
#[derive(Clone, Copy)]
struct ExpireArg {
    /// Command name for the overflow error.
    name: &'static str,
    /// Seconds (else milliseconds).
    seconds: bool,
    /// Relative to now (else a unix time).
    relative: bool,
}

fn expire(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let how = ExpireArg {
        name: "expire",
        seconds: true,
        relative: true,
    };
    expire_generic(ctx, a, how)
}

fn pexpire(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let how = ExpireArg {
        name: "pexpire",
        seconds: false,
        relative: true,
    };
    expire_generic(ctx, a, how)
}

fn expireat(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let how = ExpireArg {
        name: "expireat",
        seconds: true,
        relative: false,
    };
    expire_generic(ctx, a, how)
}

fn pexpireat(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let how = ExpireArg {
        name: "pexpireat",
        seconds: false,
        relative: false,
    };
    expire_generic(ctx, a, how)
}

/// The EXPIRE family: a time at or before now deletes the key (reply 1).
fn expire_generic(ctx: &mut Ctx, a: &[&[u8]], how: ExpireArg) -> CmdResult {
    let key = a[1];
    let cond = ExpireIf::parse(&a[3..])?;
    let invalid = || CmdError::err(format!("invalid expire time in '{}' command", how.name));
    let mut when = args::int(a[2])?;
    if how.seconds {
        when = when.checked_mul(1000).ok_or_else(invalid)?;
    }
    let now = ctx.keys.now_ms as i64;
    if how.relative {
        when = when.checked_add(now).ok_or_else(invalid)?;
    }
    let current = match ctx.keys.entry_mut(key)? {
        Some(e) => e.expire_at().map(|t| t as i64),
        None => {
            ctx.out.int(0);
            return Ok(());
        }
    };
    if !cond.allows(current, when) {
        ctx.out.int(0);
        return Ok(());
    }
    if when <= now {
        ctx.keys.remove(key)?;
        ctx.keys.notify(Class::GENERIC, "del", key);
    } else {
        ctx.keys.part_mut(key)?.set_expire(key, when as u64);
        ctx.keys.modified(key)?;
        ctx.keys.notify(Class::GENERIC, "expire", key);
    }
    ctx.out.int(1);
    Ok(())
}

fn ttl(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, a, false, false)
}

fn pttl(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, a, true, false)
}

fn expiretime(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, a, false, true)
}

fn pexpiretime(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, a, true, true)
}

/// TTL / PTTL / EXPIRETIME / PEXPIRETIME: -2 for a missing key, -1 for one
/// without expiry; seconds are rounded to the nearest.
fn ttl_generic(ctx: &mut Ctx, a: &[&[u8]], ms: bool, absolute: bool) -> CmdResult {
    let now = ctx.keys.now_ms;
    let reply = match peek(&mut ctx.keys, a[1])? {
        None => -2,
        Some(e) => match e.expire_at() {
            None => -1,
            Some(at) => {
                let t = if absolute { at } else { at.saturating_sub(now) };
                let t = if ms { t } else { (t + 500) / 1000 };
                t as i64
            }
        },
    };
    ctx.out.int(reply);
    Ok(())
}

fn persist(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let key = a[1];
    let removed = ctx.keys.entry_mut(key)?.is_some() && ctx.keys.part_mut(key)?.persist(key);
    if removed {
        ctx.keys.modified(key)?;
        ctx.keys.notify(Class::GENERIC, "persist", key);
    }
    ctx.out.int(removed as i64);
    Ok(())
}

const OBJECT_HELP: &[&str] = &[
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
];

fn object_help(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.help("OBJECT", OBJECT_HELP);
    Ok(())
}

fn object_encoding(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    match peek(&mut ctx.keys, a[2])? {
        Some(e) => ctx.out.bulk(e.value.encoding().as_bytes()),
        None => ctx.out.null(),
    }
    Ok(())
}

/// The reference count Redis shows for shared objects.
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

/// Redis shares the objects of integers below this (OBJ_SHARED_INTEGERS).
const SHARED_INTEGERS: i64 = 10_000;

fn object_refcount(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    // Redis stores small integer strings as shared objects, unless an LRU or
    // LFU policy under a memory limit needs one access clock per key.
    let shares = {
        let c = ctx.server.config.read();
        c.maxmemory == 0
            || !(c.maxmemory_policy.contains("lru") || c.maxmemory_policy.contains("lfu"))
    };
    let n = match peek(&mut ctx.keys, a[2])? {
        None => {
            ctx.out.null();
            return Ok(());
        }
        Some(e) => match &e.value {
            crate::engine::Value::Str(s)
                if shares
                    && s.encoding() == "int"
                    && s.as_i64()
                        .is_some_and(|v| (0..SHARED_INTEGERS).contains(&v)) =>
            {
                SHARED_REFCOUNT
            }
            _ => 1,
        },
    };
    ctx.out.int(n);
    Ok(())
}

/// Whether the eviction policy is an LFU one (OBJECT FREQ vs IDLETIME).
fn lfu_policy(ctx: &Ctx) -> bool {
    ctx.server.config.read().maxmemory_policy.contains("lfu")
}

fn object_idletime(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let lfu = lfu_policy(ctx);
    let now = ctx.keys.now_ms;
    let Some(e) = peek(&mut ctx.keys, a[2])? else {
        ctx.out.null();
        return Ok(());
    };
    if lfu {
        return Err(CmdError::err(
            "An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    let idle = e.idle_secs(now) as i64;
    ctx.out.int(idle);
    Ok(())
}

fn object_freq(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let lfu = lfu_policy(ctx);
    let now = ctx.keys.now_ms;
    let Some(e) = peek(&mut ctx.keys, a[2])? else {
        ctx.out.null();
        return Ok(());
    };
    if !lfu {
        return Err(CmdError::err(
            "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    ctx.out.int(e.frequency(now) as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips() {
        for (shard, pos) in [(0, 0), (0, 1), (3, 12345), (SHARD_COUNT - 1, POS_MASK)] {
            let c = ScanCursor { shard, pos };
            assert_eq!(ScanCursor::decode(c.encode()), c);
        }
        assert_eq!(ScanCursor { shard: 0, pos: 0 }.encode(), 0);
        let end = ScanCursor {
            shard: SHARD_COUNT,
            pos: 0,
        };
        assert_eq!(end.encode(), 0);
        assert_eq!(ScanCursor::decode(u64::MAX).shard, SHARD_COUNT - 1);
    }

    #[test]
    fn scan_part_visits_each_key_once_in_small_steps() {
        use crate::engine::string::StrValue;
        use crate::engine::{Keyspace, Value};
        let ks = Keyspace::new(1);
        let mut g = ks.lock_one(0, true);
        let Some(shard) = g.shard_mut() else {
            panic!("write guard");
        };
        let part = &mut shard.dbs[0];
        for i in 0..500 {
            let k = format!("key:{i}");
            part.insert(
                k.as_bytes(),
                Value::Str(StrValue::from_bytes(b"v")),
                false,
                0,
            );
        }
        part.set_expire(b"key:7", 10);
        let filter = ScanFilter {
            pattern: None,
            type_name: None,
            now_ms: 100,
        };
        let (mut seen, mut pos, mut calls) = (Vec::new(), 0, 0);
        loop {
            calls += 1;
            let (n, next) = scan_part(part, ks.hasher(), pos, 7, &filter, &mut seen);
            assert!(n >= 7 || next.is_none());
            match next {
                Some(p) => pos = p,
                None => break,
            }
        }
        assert!(calls > 50);
        seen.sort();
        let before = seen.len();
        seen.dedup();
        assert_eq!(seen.len(), before, "a key was returned twice");
        assert_eq!(
            seen.len(),
            499,
            "every live key once, the expired one never"
        );
        assert!(!seen.iter().any(|k| &k[..] == b"key:7"));
    }

    #[test]
    fn expire_conditions() {
        let c = |o: &[&[u8]]| ExpireIf::parse(o);
        assert!(c(&[b"nx", b"xx"]).is_err());
        assert!(c(&[b"gt", b"LT"]).is_err());
        assert!(c(&[b"foo"]).is_err());
        let gt = c(&[b"gt"]).unwrap_or_default();
        assert!(!gt.allows(None, 5));
        assert!(gt.allows(Some(4), 5));
        assert!(!gt.allows(Some(5), 5));
        let lt = c(&[b"lt"]).unwrap_or_default();
        assert!(lt.allows(None, 5));
        assert!(!lt.allows(Some(5), 5));
        let nx = c(&[b"nx"]).unwrap_or_default();
        assert!(nx.allows(None, 5) && !nx.allows(Some(1), 5));
        let xx = c(&[b"xx", b"gt"]).unwrap_or_default();
        assert!(!xx.allows(None, 5) && xx.allows(Some(1), 5));
    }

    #[test]
    fn swap_dbs_moves_data_and_fires_watches_of_live_keys() {
        use crate::engine::string::StrValue;
        use crate::engine::{Keyspace, Value};
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let ks = Keyspace::new(2);
        let mut g = ks.lock_one(0, true);
        let Some(shard) = g.shard_mut() else {
            panic!("write guard");
        };
        let v = || Value::Str(StrValue::from_bytes(b"v"));
        shard.dbs[0].insert(b"in0", v(), false, 0);
        shard.dbs[1].insert(b"in1", v(), false, 0);
        shard.dbs[1].set_expire(b"in1", 500);
        let flags: Vec<Arc<AtomicBool>> = (0..3).map(|_| Arc::default()).collect();
        shard.dbs[0].watch(b"in0", &flags[0]);
        shard.dbs[0].watch(b"in1", &flags[1]);
        shard.dbs[0].watch(b"absent", &flags[2]);
        assert!(!shard.swap_dbs(0, 2, 100));
        assert!(shard.swap_dbs(0, 1, 100));
        let fired: Vec<bool> = flags.iter().map(|f| f.load(Ordering::Acquire)).collect();
        assert_eq!(fired, [true, true, false]);
        assert!(shard.dbs[0].contains(b"in1", 100) && shard.dbs[1].contains(b"in0", 100));
        assert_eq!(shard.dbs[0].expires_len(), 1);
        assert_eq!(
            shard.dbs[0].peek(b"in1", 100).and_then(|e| e.expire_at()),
            Some(500)
        );
        // The watches stay with database 0.
        flags[0].store(false, Ordering::Release);
        shard.dbs[0].touch_watched(b"in0");
        assert!(flags[0].load(Ordering::Acquire));
    }
}
