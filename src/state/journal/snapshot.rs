//! The point-in-time snapshot behind BGSAVE, SAVE, SHUTDOWN's save, the
//! AOF rewrite and DEBUG RELOAD (and a replica's full sync): one
//! mechanism, [`Job`] + [`write_all`], written as RDB records or as
//! commands ([`Format`]).
//!
//! The snapshot point T0 is taken with every shard locked for a moment
//! (the caller installs the job then). After it, each shard's capture is
//! *started* once, before anything in it changes: by the snapshot thread
//! as it reaches the shard, or first by a command about to write to it
//! ([`presave`], called by the dispatcher, eviction and anything else that
//! writes). Starting it is O(databases): each database part's key table
//! gets a walk (`engine::keycapture`) that the snapshot thread advances
//! [`STEP_KEYS`] keys at a time under the shard lock, and a write to a key
//! the walk has not reached first hands that key, as it is, to the
//! snapshot (copy before write, per key). Each key the walk or a write
//! hands on is written out at once if small; a big sorted set gets a
//! copy-before-write log instead (`engine::zset::cow`) and joins the job's
//! list of big values. The snapshot thread then walks each big set in
//! steps of [`STEP_MEMBERS`] members, taking the shard lock for one step
//! at a time; a write to a member the walk has not reached first saves
//! that member's old score in the log. So no client waits on the snapshot
//! for more than one step, however many keys a shard has and however big
//! a board is, and the output is exactly the data as of T0. Memory held
//! for it (saved members, touched members, keys handed on by writes and
//! not yet in the file) is counted in [`Job::cow`], INFO's
//! `current_cow_size`.
//!
//! Big leaderboards are walked the same way (`engine::leaderboard::cow`):
//! their entries in steps, in the board's order, with a copy-before-write
//! log; what comes before and after the entries in the file (options,
//! season, closed periods, dedup window) is written when the shard is
//! captured.
//!
//! Big hashes and sets (`hashtable`) are walked the same way over their
//! arena (`engine::cow::ArenaLog`): the table writes nothing in place and
//! compacts nothing while captured, and notes the entries of T0 it removes
//! or replaces before the walk reads them. Big lists and streams share their
//! nodes (blocks) with a copy taken at capture (O(nodes)), written out with
//! no lock held; a write copies a shared node first.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use smallvec::SmallVec;

use super::encode::{write_command, write_select};
use crate::engine::bitmap::CHUNK_BYTES;
use crate::engine::cow::SharedArenaLog;
use crate::engine::hash::{self, HashValue};
use crate::engine::keycapture::KeySink;
use crate::engine::keyspace::{Entry, Keyspace, Locked, Shard, ShardGuard, SHARD_COUNT};
use crate::engine::leaderboard::cow::SharedBoardCow;
use crate::engine::leaderboard::{ArchiveData, EntryRef, Leaderboard};
use crate::engine::list::ListValue;
use crate::engine::rdb;
use crate::engine::rdb::encode::EncodeOptions;
use crate::engine::set::{self, Member, SetValue};
use crate::engine::stream::{Stream, StreamId};
use crate::engine::string::StrValue;
use crate::engine::zset::cow::{CowCounter, SharedCow};
use crate::engine::zset::ZSet;
use crate::engine::Value;
use crate::protocol::number::{format_double, MAX_DOUBLE_CHARS};
use crate::state::clock::unix_ms;

/// Most elements per ZADD / SADD / RPUSH / HSET command in a rewritten file (Redis's
/// AOF_REWRITE_ITEMS_PER_CMD).
pub const ITEMS_PER_COMMAND: usize = 64;

/// Sorted sets of more members than this are walked in steps of this many
/// (each step under the shard lock, the lock let go between steps).
pub const STEP_MEMBERS: usize = 1024;

/// Small keys are written in steps of at most this many (each step under
/// the shard lock; a string key takes about a microsecond to encode).
pub const STEP_KEYS: usize = 256;

/// A big value captured at T0 and not written yet:
/// where it lives, its expiry and member count at T0, and its
/// copy-before-write log.
struct BigKey {
    shard: usize,
    db: usize,
    key: Bytes,
    expire: Option<u64>,
    len: usize,
    log: BigLog,
}

/// The log of a big value, by type.
enum BigLog {
    ZSet(SharedCow),
    /// A `hashtable` hash walked over its arena (`engine::cow::ArenaLog`).
    Hash(SharedArenaLog),
    /// A `hashtable` set walked over its arena.
    Set(SharedArenaLog),
    /// A list or stream sharing its nodes (blocks) with the keyspace's
    /// value, which copies a shared one before changing it: written whole,
    /// outside the lock.
    Shared(Value),
    /// A board's entries are walked; what comes before and after them in
    /// the file (options, season, closed periods, dedup window, expiry)
    /// is written at T0, held here (and counted as held memory).
    Board {
        log: SharedBoardCow,
        head: Vec<u8>,
        tail: Vec<u8>,
    },
}

/// What a snapshot writes each shard as.
#[derive(Debug, Clone, Copy)]
pub enum Format {
    /// Commands (the AOF rewrite).
    Aof,
    /// RDB key records (BGSAVE, SAVE).
    Rdb(EncodeOptions),
}

/// A running rewrite or RDB save, shared with the dispatcher.
pub struct Job {
    /// How shards are written out.
    pub format: Format,
    /// Shards already written out (by the rewrite or by [`presave`]).
    done: Vec<AtomicBool>,
    /// Shards written out by commands, waiting to go to the file.
    pub chunks: Mutex<Vec<Vec<u8>>>,
    /// Big sorted sets captured, waiting for their stepwise walk.
    big: Mutex<Vec<BigKey>>,
    /// Memory held because of writes made during the snapshot.
    pub cow: Arc<CowCounter>,
    /// Keys at T0, and keys written or captured so far.
    pub keys_total: AtomicU64,
    pub keys_done: AtomicU64,
    /// Set to give up (shutdown).
    pub abort: AtomicBool,
    /// The longest a shard lock was held for this snapshot (a shard's
    /// capture, by the snapshot or by a command, or one step of a walk),
    /// in µs: what a command may wait on it.
    pub longest_hold_us: AtomicU64,
    /// The same in CPU time of the thread holding it: what the step itself
    /// costs, without the time it waited for a CPU (on a busy machine, a
    /// thread preempted while it holds the lock).
    pub longest_hold_cpu_us: AtomicU64,
    /// Tells this snapshot's key walks (`engine::keycapture`) from those a
    /// snapshot given up may have left.
    id: u64,
}

/// The next [`Job::id`].
static NEXT_JOB_ID: AtomicU64 = AtomicU64::new(1);

impl Default for Job {
    fn default() -> Self {
        Self::new()
    }
}

impl Job {
    /// A rewrite that has read no shard yet.
    pub fn new() -> Self {
        Self::with_format(Format::Aof)
    }

    /// A snapshot in `format` that has read no shard yet.
    pub fn with_format(format: Format) -> Self {
        Job {
            format,
            done: (0..SHARD_COUNT).map(|_| AtomicBool::new(false)).collect(),
            chunks: Mutex::new(Vec::new()),
            big: Mutex::new(Vec::new()),
            cow: Arc::new(CowCounter::default()),
            keys_total: AtomicU64::new(0),
            keys_done: AtomicU64::new(0),
            abort: AtomicBool::new(false),
            longest_hold_us: AtomicU64::new(0),
            longest_hold_cpu_us: AtomicU64::new(0),
            id: NEXT_JOB_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Records the key count at T0; `all` holds every shard.
    pub fn begin(&self, all: &Locked<'_>) {
        let total: usize = all
            .shards()
            .filter_map(|i| all.guard(i))
            .flat_map(|g| g.shard().dbs.iter().map(|d| d.len()))
            .sum();
        self.keys_total.store(total as u64, Ordering::Relaxed);
    }

    /// A shard captured by a command, to go to the file next.
    fn push_chunk(&self, chunk: Vec<u8>) {
        self.cow.add(chunk.capacity());
        self.chunks.lock().push(chunk);
    }

    /// Takes the shards captured by commands, for the file (their memory
    /// is no longer held once the caller has written them).
    pub fn take_chunks(&self) -> Vec<Vec<u8>> {
        let chunks = std::mem::take(&mut *self.chunks.lock());
        self.cow.sub(chunks.iter().map(|c| c.capacity()).sum());
        chunks
    }

    /// Records a hold of a shard lock that began at `since`.
    fn held_since(&self, (since, cpu): (std::time::Instant, u64)) {
        let us = since.elapsed().as_micros() as u64;
        self.longest_hold_us.fetch_max(us, Ordering::Relaxed);
        let cpu_us = thread_cpu_us().saturating_sub(cpu);
        self.longest_hold_cpu_us
            .fetch_max(cpu_us, Ordering::Relaxed);
    }

    /// Whether shard `i` is written out already.
    pub fn is_done(&self, i: usize) -> bool {
        self.done.get(i).is_some_and(|d| d.load(Ordering::Acquire))
    }

    /// Records that shard `i` is written out.
    pub fn mark_done(&self, i: usize) {
        if let Some(d) = self.done.get(i) {
            d.store(true, Ordering::Release);
        }
    }
}

/// CPU time used by the calling thread, in µs (0 where it cannot be read).
fn thread_cpu_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes one timespec through the pointer,
    // which points at `ts`, a live and exclusively borrowed timespec.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return 0;
    }
    (ts.tv_sec as u64) * 1_000_000 + (ts.tv_nsec as u64) / 1000
}

/// The elements of a sorted set, for its ZADD commands.
fn zset_items(z: &ZSet) -> impl Iterator<Item = (&[u8], f64)> {
    z.iter()
}

/// The members of a set, for its SADD commands (intset members formatted).
fn set_members(s: &SetValue) -> impl Iterator<Item = Cow<'_, [u8]>> {
    s.iter().map(|m| match m {
        Member::Int(n) => Cow::Owned(itoa::Buffer::new().format(n).as_bytes().to_vec()),
        Member::Bytes(b) => Cow::Borrowed(b),
    })
}

/// Appends `ZADD key score member ...` commands of at most
/// [`ITEMS_PER_COMMAND`] pairs.
pub fn write_zadds<'a>(
    out: &mut Vec<u8>,
    key: &[u8],
    items: impl Iterator<Item = (&'a [u8], f64)>,
) {
    let mut batch: Vec<(Vec<u8>, &'a [u8])> = Vec::with_capacity(ITEMS_PER_COMMAND);
    let flush = |batch: &mut Vec<(Vec<u8>, &'a [u8])>, out: &mut Vec<u8>| {
        if batch.is_empty() {
            return;
        }
        let mut args: Vec<&[u8]> = Vec::with_capacity(2 + batch.len() * 2);
        args.push(b"ZADD");
        args.push(key);
        for (score, member) in batch.iter() {
            args.push(score);
            args.push(member);
        }
        write_command(out, args.into_iter());
        batch.clear();
    };
    let mut num = [0u8; MAX_DOUBLE_CHARS];
    for (member, score) in items {
        let n = format_double(score, &mut num);
        batch.push((num[..n].to_vec(), member));
        if batch.len() == ITEMS_PER_COMMAND {
            flush(&mut batch, out);
        }
    }
    flush(&mut batch, out);
}

/// Appends `SADD key member ...` commands of at most [`ITEMS_PER_COMMAND`]
/// members.
pub fn write_sadds<'a>(
    out: &mut Vec<u8>,
    key: &[u8],
    members: impl Iterator<Item = Cow<'a, [u8]>>,
) {
    let mut batch: Vec<Cow<'a, [u8]>> = Vec::with_capacity(ITEMS_PER_COMMAND);
    let flush = |batch: &mut Vec<Cow<'a, [u8]>>, out: &mut Vec<u8>| {
        if batch.is_empty() {
            return;
        }
        let mut args: Vec<&[u8]> = Vec::with_capacity(2 + batch.len());
        args.push(b"SADD");
        args.push(key);
        args.extend(batch.iter().map(|m| m.as_ref()));
        write_command(out, args.into_iter());
        batch.clear();
    };
    for m in members {
        batch.push(m);
        if batch.len() == ITEMS_PER_COMMAND {
            flush(&mut batch, out);
        }
    }
    flush(&mut batch, out);
}

/// Appends `RPUSH key element ...` commands of at most
/// [`ITEMS_PER_COMMAND`] elements, front to back.
pub fn write_rpushes(out: &mut Vec<u8>, key: &[u8], list: &ListValue) {
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(ITEMS_PER_COMMAND);
    let flush = |batch: &mut Vec<Vec<u8>>, out: &mut Vec<u8>| {
        if batch.is_empty() {
            return;
        }
        let mut args: Vec<&[u8]> = Vec::with_capacity(2 + batch.len());
        args.push(b"RPUSH");
        args.push(key);
        args.extend(batch.iter().map(|e| e.as_slice()));
        write_command(out, args.into_iter());
        batch.clear();
    };
    for e in list.iter() {
        batch.push(e.to_vec());
        if batch.len() == ITEMS_PER_COMMAND {
            flush(&mut batch, out);
        }
    }
    flush(&mut batch, out);
}

/// Appends `HSET key field value ...` commands of at most
/// [`ITEMS_PER_COMMAND`] pairs, for pairs read in steps.
fn write_hset_pairs(out: &mut Vec<u8>, key: &[u8], pairs: &[(Vec<u8>, Vec<u8>)]) {
    for batch in pairs.chunks(ITEMS_PER_COMMAND) {
        let mut args: Vec<&[u8]> = Vec::with_capacity(2 + 2 * batch.len());
        args.push(b"HSET");
        args.push(key);
        for (f, v) in batch {
            args.push(f);
            args.push(v);
        }
        write_command(out, args.into_iter());
    }
}

/// Writes a list or stream captured as a value sharing its nodes (see
/// [`BigLog::Shared`]), with no lock held: its nodes cannot change.
fn write_shared(job: &Job, b: &BigKey, v: &Value, put: &mut Put<'_>) -> Result<(), String> {
    check_abort(job)?;
    let mut buf = Vec::new();
    match job.format {
        Format::Rdb(o) => {
            rdb::encode::write_select_db(&mut buf, b.db);
            // A big stream is handed on in pieces as it is encoded: the
            // file never waits on its whole encoding in memory.
            rdb::encode::write_key_in_pieces::<String>(
                &mut buf,
                &b.key,
                v,
                b.expire,
                o,
                &mut |piece| {
                    check_abort(job)?;
                    put(piece)?;
                    piece.clear();
                    Ok(())
                },
            )?;
        }
        Format::Aof => {
            write_select(&mut buf, b.db);
            write_value(&mut buf, &b.key, v);
            if let Some(t) = b.expire {
                let mut num = itoa::Buffer::new();
                let ms = num.format(t).as_bytes();
                write_command(&mut buf, [&b"PEXPIREAT"[..], &b.key, ms].into_iter());
            }
        }
    }
    // What the snapshot held because of writes: the nodes the value has
    // copied or let go of since the capture, kept alive by this copy.
    let held = match v {
        Value::List(l) => l.unshared_bytes(),
        Value::Stream(st) => st.unshared_bytes(),
        _ => 0,
    };
    job.cow.add(held);
    job.cow.sub(held);
    job.keys_done.fetch_add(1, Ordering::Relaxed);
    put(&buf)
}

/// Appends `HSET key field value ...` commands of at most
/// [`ITEMS_PER_COMMAND`] pairs.
pub fn write_hsets(out: &mut Vec<u8>, key: &[u8], h: &HashValue) {
    let mut pairs = h.iter().peekable();
    while pairs.peek().is_some() {
        // The values are held here: an integer one is written out on read.
        let batch: Vec<_> = pairs.by_ref().take(ITEMS_PER_COMMAND).collect();
        let mut args: Vec<&[u8]> = Vec::with_capacity(2 + 2 * batch.len());
        args.push(b"HSET");
        args.push(key);
        for (f, v) in &batch {
            args.push(f);
            args.push(v);
        }
        write_command(out, args.into_iter());
    }
}

/// A compressed (sparse) bitmap as SETRANGE commands: its last byte first
/// (which sets the length), then each block holding a set bit, so the
/// rewrite never builds the whole zero-filled string.
fn write_sparse_string(out: &mut Vec<u8>, key: &[u8], s: &StrValue) {
    let len = s.len() as u64;
    if len == 0 {
        write_command(out, [&b"SET"[..], key, b""].into_iter());
        return;
    }
    let mut num = itoa::Buffer::new();
    let mut last = [0u8; 1];
    s.read_bytes(len - 1, &mut last);
    write_command(
        out,
        [&b"SETRANGE"[..], key, num.format(len - 1).as_bytes(), &last].into_iter(),
    );
    let mut block = vec![0u8; CHUNK_BYTES];
    for k in s.nonzero_blocks() {
        let start = k * CHUNK_BYTES as u64;
        let n = (len - start.min(len)).min(CHUNK_BYTES as u64) as usize;
        let Some(buf) = block.get_mut(..n) else {
            continue;
        };
        s.read_bytes(start, buf);
        write_command(
            out,
            [&b"SETRANGE"[..], key, num.format(start).as_bytes(), buf].into_iter(),
        );
    }
}

/// Appends the commands that recreate `key` holding `value`.
pub fn write_value(out: &mut Vec<u8>, key: &[u8], value: &Value) {
    match value {
        Value::Str(s) if s.is_compressed() => write_sparse_string(out, key, s),
        Value::Str(s) => write_command(out, [&b"SET"[..], key, &s.as_bytes()].into_iter()),
        Value::ZSet(z) => write_zadds(out, key, zset_items(z)),
        Value::Set(s) => write_sadds(out, key, set_members(s)),
        Value::List(l) => write_rpushes(out, key, l),
        Value::Hash(h) => write_hsets(out, key, h),
        Value::Leaderboard(b) => write_leaderboard(out, key, b),
        Value::Stream(st) => write_stream(out, key, st),
    }
}

/// A stream as Redis's rewrite writes one: its entries as XADDs (an empty
/// stream as an XADD trimmed away at once), then XSETID with the last id,
/// entries-added and max-deleted-id; each group as XGROUP CREATE with its
/// last-delivered id and entries-read, each consumer as XGROUP
/// CREATECONSUMER, and each pending entry as an XCLAIM ... FORCE JUSTID
/// that restores its owner, delivery time and count.
fn write_stream(out: &mut Vec<u8>, key: &[u8], st: &Stream) {
    if st.is_empty() {
        let id = st.last_id.max(StreamId::new(0, 1)).to_string();
        write_command(
            out,
            [
                &b"XADD"[..],
                key,
                b"MAXLEN",
                b"0",
                id.as_bytes(),
                b"x",
                b"y",
            ]
            .into_iter(),
        );
    } else {
        st.for_each_in(StreamId::MIN, StreamId::MAX, false, |id, fields| {
            let id = id.to_string();
            let args: Vec<&[u8]> = [&b"XADD"[..], key, id.as_bytes()]
                .into_iter()
                .chain(fields.iter().copied())
                .collect();
            write_command(out, args.into_iter());
            true
        });
    }
    let (last, added, deleted) = (
        st.last_id.to_string(),
        st.entries_added.to_string(),
        st.max_deleted_id.to_string(),
    );
    write_command(
        out,
        [
            &b"XSETID"[..],
            key,
            last.as_bytes(),
            b"ENTRIESADDED",
            added.as_bytes(),
            b"MAXDELETEDID",
            deleted.as_bytes(),
        ]
        .into_iter(),
    );
    for (name, g) in &st.groups {
        let last = g.last_id.to_string();
        let read = g.entries_read.map_or(-1, |n| n as i64).to_string();
        write_command(
            out,
            [
                &b"XGROUP"[..],
                b"CREATE",
                key,
                name,
                last.as_bytes(),
                b"ENTRIESREAD",
                read.as_bytes(),
            ]
            .into_iter(),
        );
        for (cname, c) in &g.consumers {
            write_command(
                out,
                [&b"XGROUP"[..], b"CREATECONSUMER", key, name, cname].into_iter(),
            );
            for id in &c.pel {
                let Some(p) = g.pel.get(id) else {
                    continue;
                };
                let (id, time, count) = (
                    id.to_string(),
                    p.delivery_time.to_string(),
                    p.delivery_count.to_string(),
                );
                write_command(
                    out,
                    [
                        &b"XCLAIM"[..],
                        key,
                        name,
                        cname,
                        b"0",
                        id.as_bytes(),
                        b"TIME",
                        time.as_bytes(),
                        b"RETRYCOUNT",
                        count.as_bytes(),
                        b"JUSTID",
                        b"FORCE",
                    ]
                    .into_iter(),
                );
            }
        }
    }
}

/// A board as `LB.CREATE key <every option>`, then one `LB.SUBMIT` per
/// entry, best first, with its subscore, time and metadata, then its dedup
/// window's ids (`LB.SEEN`, oldest first): a reload
/// rebuilds the same order (the times are kept, and every member is new
/// to the board, so no POLICY applies).
///
/// A seasonal board (issue 17): LB.CREATE carries the season options and
/// the number and start of the oldest period kept; each closed period,
/// oldest first, is its entries, `LB.CONFIG key SET HISTORY n AT end-1`
/// (so that no boundary of today's schedule falls inside it) and
/// `LB.RESET key AT end`; then the
/// current period's entries, and `LB.CONFIG key SET HISTORY n AT end-1`
/// so that the current period ends where it ends now (a schedule changed
/// mid-period ends it at the new schedule's first boundary after the
/// change, not after its start).
fn write_leaderboard(out: &mut Vec<u8>, key: &[u8], b: &Leaderboard) {
    write_leaderboard_head(out, key, b);
    write_entries(out, key, b);
    write_leaderboard_tail(out, key, b);
}

/// A board's commands before its current period's entries: LB.CREATE and
/// the closed periods.
fn write_leaderboard_head(out: &mut Vec<u8>, key: &[u8], b: &Leaderboard) {
    let o = b.options();
    let mut num = itoa::Buffer::new();
    let capacity = num.format(o.capacity).to_owned();
    let mut create: Vec<Vec<u8>> = [
        &b"LB.CREATE"[..],
        key,
        b"ORDER",
        o.order.name().as_bytes(),
        b"POLICY",
        o.policy.name().as_bytes(),
        b"TIEBREAK",
        o.tiebreak.name().as_bytes(),
        b"RANKING",
        o.ranking.name().as_bytes(),
        b"CAPACITY",
        capacity.as_bytes(),
    ]
    .iter()
    .map(|x| x.to_vec())
    .collect();
    if let Some(s) = b.season() {
        let (number, since) = s
            .archives()
            .next()
            .map_or((s.number, s.start), |a| (a.number, a.start));
        create.push(b"RESET".to_vec());
        create.extend(s.opts.schedule.words().into_iter().map(String::into_bytes));
        for (word, value) in [
            ("TZ", s.opts.zone.to_string()),
            ("HISTORY", s.opts.history.to_string()),
            ("ARCHIVE", s.opts.archive.name().to_string()),
            ("NUMBER", number.to_string()),
            ("SINCE", since.to_string()),
        ] {
            create.push(word.as_bytes().to_vec());
            create.push(value.into_bytes());
        }
    }
    write_command(out, create.iter().map(|x| x.as_slice()));
    if let Some(s) = b.season() {
        let history = s.opts.history.to_string();
        for a in s.archives() {
            if let ArchiveData::Memory(board) = &a.data {
                write_entries(out, key, board);
            }
            // The period ends at `end` whatever schedule it had then: no
            // boundary of today's schedule falls before it.
            let (end, before) = (a.end.to_string(), a.end.saturating_sub(1).to_string());
            write_command(
                out,
                [
                    &b"LB.CONFIG"[..],
                    key,
                    b"SET",
                    b"HISTORY",
                    history.as_bytes(),
                    b"AT",
                    before.as_bytes(),
                ]
                .into_iter(),
            );
            // A period on disk is referred to, not copied: LB.ATTACH
            // closes the (empty) period at `end` and gives it the file's
            // entries, checked against the checksum.
            let file = match &a.data {
                ArchiveData::Memory(_) => None,
                ArchiveData::Disk(d) => Some((d.name(), d.crc())),
                ArchiveData::Unavailable(u) => Some((u.name.clone(), 0)),
            };
            match file {
                None => write_command(
                    out,
                    [&b"LB.RESET"[..], key, b"AT", end.as_bytes()].into_iter(),
                ),
                Some((name, crc)) => {
                    let crc = format!("{crc:016x}");
                    write_command(
                        out,
                        [
                            &b"LB.ATTACH"[..],
                            key,
                            b"AT",
                            end.as_bytes(),
                            b"FILE",
                            name.as_bytes(),
                            b"CRC",
                            crc.as_bytes(),
                        ]
                        .into_iter(),
                    )
                }
            }
        }
    }
}

/// A board's commands after its current period's entries: where the
/// period ends, and the dedup window.
fn write_leaderboard_tail(out: &mut Vec<u8>, key: &[u8], b: &Leaderboard) {
    if let Some((s, end)) = b.season().and_then(|s| Some((s, s.end()?))) {
        let (history, at) = (s.opts.history.to_string(), (end - 1).to_string());
        write_command(
            out,
            [
                &b"LB.CONFIG"[..],
                key,
                b"SET",
                b"HISTORY",
                history.as_bytes(),
                b"AT",
                at.as_bytes(),
            ]
            .into_iter(),
        );
    }
    let ids: Vec<&[u8]> = b.ids.iter().collect();
    for batch in ids.chunks(ITEMS_PER_COMMAND) {
        let args: Vec<&[u8]> = [&b"LB.SEEN"[..], key]
            .into_iter()
            .chain(batch.iter().copied())
            .collect();
        write_command(out, args.into_iter());
    }
}

/// One `LB.SUBMIT ... SUBSCORE s AT t [META m]` per entry of `b`.
fn write_entries(out: &mut Vec<u8>, key: &[u8], b: &Leaderboard) {
    for (_, e) in b.iter() {
        write_entry(out, key, e);
    }
}

/// `LB.SUBMIT key member score SUBSCORE s AT t [META m]`.
fn write_entry(out: &mut Vec<u8>, key: &[u8], e: EntryRef<'_>) {
    {
        let (score, sub, at) = (
            e.score.to_string(),
            e.subscore.to_string(),
            e.time.to_string(),
        );
        let mut args: Vec<&[u8]> = vec![
            b"LB.SUBMIT",
            key,
            e.member,
            score.as_bytes(),
            b"SUBSCORE",
            sub.as_bytes(),
            b"AT",
            at.as_bytes(),
        ];
        if let Some(m) = e.meta {
            args.push(b"META");
            args.push(m);
        }
        write_command(out, args.into_iter());
    }
}

/// Appends every live key of a shard (all databases) as commands, each
/// database after its SELECT.
pub fn write_shard(out: &mut Vec<u8>, shard: &Shard, now_ms: u64) {
    let mut num = itoa::Buffer::new();
    for (i, db) in shard.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        let mut selected = false;
        for (key, entry) in db.iter() {
            let at = entry.expire_at();
            if at.is_some_and(|t| t <= now_ms) {
                continue;
            }
            if !selected {
                write_select(out, i);
                selected = true;
            }
            write_value(out, key, &entry.value);
            if let Some(t) = at {
                let ms = num.format(t).as_bytes();
                write_command(out, [&b"PEXPIREAT"[..], key, ms].into_iter());
            }
        }
    }
}

/// Where a shard's key walk (`engine::keycapture`) hands each key of T0:
/// a small key is encoded into `out` (handed to the job as a chunk at the
/// end of each step), a big value gets its own copy-before-write log and
/// joins the job's big values.
struct KeySinkOf {
    job: Arc<Job>,
    shard: usize,
    db: usize,
    /// Keys past their expiry when the capture began are not written.
    now_ms: u64,
    /// The RESIZEDB hint, for the first chunk only.
    sizes: Option<(usize, usize)>,
    out: Vec<u8>,
    big: Vec<BigKey>,
    keys: u64,
    /// Bytes the walk's set of slots to skip holds, counted in the job's
    /// `cow` (INFO `current_cow_size`).
    held: usize,
}

impl KeySink for KeySinkOf {
    fn held(&mut self, bytes: usize) {
        if bytes > self.held {
            self.job.cow.add(bytes - self.held);
        } else {
            self.job.cow.sub(self.held - bytes);
        }
        self.held = bytes;
    }

    fn capture(&mut self, key: &[u8], entry: &mut Entry) {
        if self.job.abort.load(Ordering::Relaxed) {
            return;
        }
        let at = entry.expire_at();
        if at.is_some_and(|t| t <= self.now_ms) {
            return;
        }
        if let Some(b) = capture_big(&self.job, self.shard, self.db, key, at, &mut entry.value) {
            self.big.push(b);
            return;
        }
        if self.out.is_empty() {
            match (self.job.format, self.sizes.take()) {
                (Format::Aof, _) => write_select(&mut self.out, self.db),
                (Format::Rdb(_), Some((len, expires))) => {
                    rdb::encode::write_db_head(&mut self.out, self.db, len, expires)
                }
                (Format::Rdb(_), None) => rdb::encode::write_select_db(&mut self.out, self.db),
            }
        }
        match self.job.format {
            Format::Aof => {
                write_value(&mut self.out, key, &entry.value);
                if let Some(t) = at {
                    let mut num = itoa::Buffer::new();
                    let ms = num.format(t).as_bytes();
                    write_command(&mut self.out, [&b"PEXPIREAT"[..], key, ms].into_iter());
                }
            }
            Format::Rdb(o) => rdb::encode::write_key(&mut self.out, key, &entry.value, at, o),
        }
        self.keys += 1;
    }

    fn flush(&mut self) {
        if !self.out.is_empty() {
            self.job.push_chunk(std::mem::take(&mut self.out));
        }
        if !self.big.is_empty() {
            self.job.big.lock().append(&mut self.big);
        }
        self.job
            .keys_done
            .fetch_add(std::mem::take(&mut self.keys), Ordering::Relaxed);
    }
}

/// Starts the capture of shard `idx` as it is now (see the module docs):
/// O(databases); its keys are handed on by the walk in steps
/// ([`walk_shard`]) or before a write changes them.
fn capture(job: &Arc<Job>, idx: usize, shard: &mut Shard, now_ms: u64) {
    for (i, db) in shard.dbs.iter_mut().enumerate() {
        if db.is_empty() {
            continue;
        }
        let sink = KeySinkOf {
            job: job.clone(),
            shard: idx,
            db: i,
            now_ms,
            sizes: Some((db.len(), db.expires_len())),
            out: Vec::new(),
            big: Vec::new(),
            keys: 0,
            held: 0,
        };
        db.begin_capture(job.id, Box::new(sink));
    }
}

/// Starts the stepwise capture of `value` (key `key` of database `db` in
/// shard `shard`) if it is big: a sorted set, leaderboard, hash or set of
/// more than [`STEP_MEMBERS`] members gets a copy-before-write log, a big
/// list or stream a copy sharing its nodes; `None` for a value written
/// whole.
fn capture_big(
    job: &Job,
    shard: usize,
    db: usize,
    key: &[u8],
    at: Option<u64>,
    value: &mut Value,
) -> Option<BigKey> {
    let big = |len: usize, log: BigLog| BigKey {
        shard,
        db,
        key: Bytes::copy_from_slice(key),
        expire: at,
        len,
        log,
    };
    match value {
        Value::ZSet(z) if z.len() > STEP_MEMBERS => {
            let len = z.len();
            z.begin_snapshot(job.cow.clone())
                .map(|log| big(len, BigLog::ZSet(log)))
        }
        Value::Hash(h) if h.len() > STEP_MEMBERS => {
            let len = h.len();
            h.begin_snapshot(job.cow.clone())
                .map(|log| big(len, BigLog::Hash(log)))
        }
        Value::Set(s) if s.len() > STEP_MEMBERS => {
            let len = s.len();
            s.begin_snapshot(job.cow.clone())
                .map(|log| big(len, BigLog::Set(log)))
        }
        // A copy of the node (block) pointers, O(nodes).
        Value::List(l) if l.len() > STEP_MEMBERS => {
            Some(big(1, BigLog::Shared(Value::List(Box::new(l.share())))))
        }
        Value::Stream(st) if st.len() > STEP_MEMBERS as u64 => {
            Some(big(1, BigLog::Shared(Value::Stream(Box::new(st.share())))))
        }
        Value::Leaderboard(b) if b.len() > STEP_MEMBERS => {
            Some(capture_board(job, shard, db, key, at, b))
        }
        _ => None,
    }
}

/// Starts the stepwise capture of big board `b` (key `key` of database
/// `db` in shard `shard`): what comes before and after its entries is
/// written now.
fn capture_board(
    job: &Job,
    shard: usize,
    db: usize,
    key: &[u8],
    expire: Option<u64>,
    b: &mut Leaderboard,
) -> BigKey {
    let (mut head, mut tail) = (Vec::new(), Vec::new());
    match job.format {
        Format::Rdb(o) => {
            rdb::encode::write_leaderboard_head(&mut head, db, key, expire, b, o);
            rdb::encode::write_leaderboard_tail(&mut tail, b, o);
        }
        Format::Aof => {
            write_select(&mut head, db);
            write_leaderboard_head(&mut head, key, b);
            write_leaderboard_tail(&mut tail, key, b);
            if let Some(t) = expire {
                let mut num = itoa::Buffer::new();
                let ms = num.format(t).as_bytes();
                write_command(&mut tail, [&b"PEXPIREAT"[..], key, ms].into_iter());
            }
        }
    }
    job.cow.add(head.capacity() + tail.capacity());
    BigKey {
        shard,
        db,
        key: Bytes::copy_from_slice(key),
        expire,
        len: b.len(),
        log: BigLog::Board {
            log: b.begin_snapshot(job.cow.clone()),
            head,
            tail,
        },
    }
}

/// Copy before write: starts the capture of the shards a command holds
/// for writing and may change (`None`: every shard), unless the snapshot
/// has started it already: O(databases) each; from then on a write hands
/// the key it changes to the snapshot first.
pub fn presave(job: &Arc<Job>, shards: Option<SmallVec<[usize; 4]>>, locked: &mut Locked<'_>) {
    let shards = match shards {
        Some(s) => s,
        None => (0..SHARD_COUNT).collect(),
    };
    for i in shards {
        if job.is_done(i) {
            continue;
        }
        // Only a write lock keeps the shard still (and the snapshot out).
        let Some(ShardGuard::Write(g)) = locked.guard_mut(i) else {
            continue;
        };
        capture(job, i, g, unix_ms());
        job.mark_done(i);
    }
}

/// Where a snapshot's bytes go, in file order.
pub type Put<'a> = dyn FnMut(&[u8]) -> Result<(), String> + 'a;

fn flush(job: &Job, put: &mut Put<'_>) -> Result<(), String> {
    for c in job.take_chunks() {
        put(&c)?;
    }
    Ok(())
}

fn check_abort(job: &Job) -> Result<(), String> {
    if job.abort.load(Ordering::Acquire) {
        return Err("snapshot aborted".into());
    }
    Ok(())
}

/// Writes the whole snapshot of `ks` through `put`: every shard (captured
/// here unless a command did it first), then each big sorted set in
/// steps. The job must have been installed at T0 (every shard locked),
/// so that commands capture what they change first.
pub fn write_all(ks: &Keyspace, job: &Arc<Job>, put: &mut Put<'_>) -> Result<(), String> {
    let result = write_shards(ks, job, put);
    tracing::info!(
        "Snapshot: a shard lock was held at most {} us at a time ({} us of CPU)",
        job.longest_hold_us.load(Ordering::Relaxed),
        job.longest_hold_cpu_us.load(Ordering::Relaxed)
    );
    if result.is_err() {
        // Sets still carrying a log must stop feeding it.
        // Tables still walked must stop handing keys on.
        for i in 0..SHARD_COUNT {
            if let Some(shard) = ks.lock_one(i, true).shard_mut() {
                shard.dbs.iter_mut().for_each(|db| db.abandon_capture());
            }
        }
        let rest = std::mem::take(&mut *job.big.lock());
        for b in &rest {
            abandon(ks, job, b);
        }
        job.take_chunks();
    }
    result
}

/// Detaches `b`'s log from its set, if the set is still where it was.
fn abandon(ks: &Keyspace, job: &Job, b: &BigKey) {
    let mut g = ks.lock_one(b.shard, true);
    let value = g
        .shard_mut()
        .and_then(|s| s.dbs.get_mut(b.db))
        .and_then(|d| d.peek_mut(&b.key))
        .map(|e| &mut e.value);
    match (value, &b.log) {
        (Some(Value::ZSet(z)), BigLog::ZSet(log)) if z.is_captured_by(log) => z.abandon_snapshot(),
        (Some(Value::Leaderboard(lb)), BigLog::Board { log, .. }) if lb.is_captured_by(log) => {
            lb.abandon_snapshot()
        }
        (Some(Value::Hash(h)), BigLog::Hash(log)) if h.is_captured_by(log) => h.abandon_snapshot(),
        (Some(Value::Set(s)), BigLog::Set(log)) if s.is_captured_by(log) => s.abandon_snapshot(),
        _ => {}
    }
    if let BigLog::Board { head, tail, .. } = &b.log {
        job.cow.sub(head.capacity() + tail.capacity());
    }
}

fn write_shards(ks: &Keyspace, job: &Arc<Job>, put: &mut Put<'_>) -> Result<(), String> {
    for i in 0..SHARD_COUNT {
        check_abort(job)?;
        flush(job, put)?;
        write_big_keys(ks, job, put)?;
        walk_shard(ks, job, i, put)?;
    }
    flush(job, put)?;
    write_big_keys(ks, job, put)?;
    flush(job, put)
}

/// Captures shard `i` (unless a command started it already) and walks its
/// tables in steps of [`STEP_KEYS`] keys, the shard lock let go between
/// steps; each step's keys go to the file at once.
fn walk_shard(ks: &Keyspace, job: &Arc<Job>, i: usize, put: &mut Put<'_>) -> Result<(), String> {
    for step in 1usize.. {
        check_abort(job)?;
        let mut g = ks.lock_one(i, true);
        let t = (std::time::Instant::now(), thread_cpu_us());
        let over = match g.shard_mut() {
            Some(shard) => {
                if !job.is_done(i) {
                    capture(job, i, shard, unix_ms());
                    job.mark_done(i);
                }
                let mut over = true;
                for db in shard.dbs.iter_mut().filter(|db| db.is_capturing()) {
                    // One table's step at a time: the lock is let go after it.
                    if !db.capture_step(job.id, STEP_KEYS) {
                        over = false;
                        break;
                    }
                }
                over
            }
            None => true,
        };
        // A command waiting for the shard goes before the next step.
        g.unlock_fair();
        job.held_since(t);
        flush(job, put)?;
        if over {
            break;
        }
        // Now and then, let the commands just handed the lock run (a
        // yield per step costs a scheduling round each on a busy machine).
        if step.is_multiple_of(16) {
            std::thread::yield_now();
        }
    }
    Ok(())
}

/// Writes every big sorted set queued so far.
fn write_big_keys(ks: &Keyspace, job: &Job, put: &mut Put<'_>) -> Result<(), String> {
    loop {
        let Some(b) = job.big.lock().pop() else {
            return Ok(());
        };
        let result = flush(job, put).and_then(|()| write_big(ks, job, &b, put));
        if result.is_err() {
            abandon(ks, job, &b);
            return result;
        }
    }
}

/// Writes one big sorted set or board as of T0: its walk in steps (each
/// under the shard lock, found again by database and key), then the
/// members saved before writes. Another record never comes between the
/// pieces.
fn write_big(ks: &Keyspace, job: &Job, b: &BigKey, put: &mut Put<'_>) -> Result<(), String> {
    if let BigLog::Shared(v) = &b.log {
        return write_shared(job, b, v, put);
    }
    let mut buf = Vec::with_capacity(1 << 16);
    let mut items: Vec<(Vec<u8>, f64)> = Vec::new();
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut members: Vec<Vec<u8>> = Vec::new();
    let mut written = 0usize;
    match (&b.log, job.format) {
        (BigLog::ZSet(_), Format::Rdb(o)) => {
            rdb::encode::write_zset_head(&mut buf, b.db, &b.key, b.expire, b.len, o)
        }
        (BigLog::Hash(_), Format::Rdb(o)) => {
            rdb::encode::write_hash_head(&mut buf, b.db, &b.key, b.expire, b.len, o)
        }
        (BigLog::Set(_), Format::Rdb(o)) => {
            rdb::encode::write_set_head(&mut buf, b.db, &b.key, b.expire, b.len, o)
        }
        (BigLog::ZSet(_) | BigLog::Hash(_) | BigLog::Set(_), Format::Aof) => {
            write_select(&mut buf, b.db)
        }
        (BigLog::Board { head, .. }, _) => buf.extend_from_slice(head),
        (BigLog::Shared(_), _) => {}
    }
    loop {
        check_abort(job)?;
        let mut g = ks.lock_one(b.shard, true);
        let t = (std::time::Instant::now(), thread_cpu_us());
        let over = {
            let value = g
                .shard_mut()
                .and_then(|s| s.dbs.get_mut(b.db))
                .and_then(|d| d.peek_mut(&b.key))
                .map(|e| &mut e.value);
            match (value, &b.log, job.format) {
                (Some(Value::ZSet(z)), BigLog::ZSet(log), format) if z.is_captured_by(log) => {
                    match format {
                        Format::Rdb(o) => z.snapshot_step(STEP_MEMBERS, &mut |m, s| {
                            rdb::encode::write_zset_member(&mut buf, m, s, o);
                            written += 1;
                        }),
                        Format::Aof => {
                            z.snapshot_step(STEP_MEMBERS, &mut |m, s| items.push((m.to_vec(), s)))
                        }
                    }
                }
                (Some(Value::Leaderboard(lb)), BigLog::Board { log, .. }, format)
                    if lb.is_captured_by(log) =>
                {
                    lb.snapshot_step(STEP_MEMBERS, &mut |e| {
                        match format {
                            Format::Rdb(o) => rdb::encode::write_leaderboard_entry(&mut buf, e, o),
                            Format::Aof => write_entry(&mut buf, &b.key, e),
                        }
                        written += 1;
                    })
                }
                (Some(Value::Hash(h)), BigLog::Hash(log), format) if h.is_captured_by(log) => h
                    .snapshot_step(STEP_MEMBERS, &mut |f, v| match format {
                        Format::Rdb(o) => {
                            rdb::encode::write_hash_field(&mut buf, f, v, o);
                            written += 1;
                        }
                        Format::Aof => pairs.push((f.to_vec(), v.to_vec())),
                    }),
                (Some(Value::Set(st)), BigLog::Set(log), format) if st.is_captured_by(log) => st
                    .snapshot_step(STEP_MEMBERS, &mut |m| match format {
                        Format::Rdb(o) => {
                            rdb::encode::write_set_member(&mut buf, m, o);
                            written += 1;
                        }
                        Format::Aof => members.push(m.to_vec()),
                    }),
                // Gone or replaced: ending the capture saved the rest.
                _ => true,
            }
        };
        // A command waiting for the shard goes before the next step.
        g.unlock_fair();
        job.held_since(t);
        if !items.is_empty() {
            written += items.len();
            write_zadds(
                &mut buf,
                &b.key,
                items.iter().map(|(m, s)| (m.as_slice(), *s)),
            );
            items.clear();
        }
        if !pairs.is_empty() {
            written += pairs.len();
            write_hset_pairs(&mut buf, &b.key, &pairs);
            pairs.clear();
        }
        if !members.is_empty() {
            written += members.len();
            write_sadds(
                &mut buf,
                &b.key,
                members.iter().map(|m| Cow::Borrowed(m.as_slice())),
            );
            members.clear();
        }
        put(&buf)?;
        buf.clear();
        if over {
            break;
        }
        // Let the commands just handed the lock run before the next step
        // (on a busy machine a walk preempted while it holds the lock is
        // what a command waits on).
        std::thread::yield_now();
    }
    let lost = || {
        format!(
            "internal error: the snapshot lost track of '{}'",
            String::from_utf8_lossy(&b.key)
        )
    };
    let expire_cmd = |buf: &mut Vec<u8>| {
        if let (Some(t), Format::Aof) = (b.expire, job.format) {
            let mut num = itoa::Buffer::new();
            let ms = num.format(t).as_bytes();
            write_command(buf, [&b"PEXPIREAT"[..], &b.key, ms].into_iter());
        }
    };
    match &b.log {
        BigLog::Shared(_) => {}
        BigLog::Hash(log) | BigLog::Set(log) => {
            let saved = {
                let mut log = log.lock();
                if !log.is_finished() {
                    return Err(lost());
                }
                log.take_saved()
            };
            if let BigLog::Hash(_) = &b.log {
                hash::for_each_saved_pair(&saved, &mut |f, v| {
                    written += 1;
                    match job.format {
                        Format::Rdb(o) => rdb::encode::write_hash_field(&mut buf, f, v, o),
                        Format::Aof => pairs.push((f.to_vec(), v.to_vec())),
                    }
                });
                write_hset_pairs(&mut buf, &b.key, &pairs);
            } else {
                set::for_each_saved_member(&saved, &mut |m| {
                    written += 1;
                    match job.format {
                        Format::Rdb(o) => rdb::encode::write_set_member(&mut buf, m, o),
                        Format::Aof => members.push(m.to_vec()),
                    }
                });
                write_sadds(
                    &mut buf,
                    &b.key,
                    members.iter().map(|m| Cow::Borrowed(m.as_slice())),
                );
            }
            expire_cmd(&mut buf);
        }
        BigLog::ZSet(log) => {
            let saved = {
                let mut log = log.lock();
                if !log.is_finished() {
                    return Err(lost());
                }
                log.take_saved()
            };
            written += saved.len();
            match job.format {
                Format::Rdb(o) => {
                    for (m, s) in &saved {
                        rdb::encode::write_zset_member(&mut buf, m, *s, o);
                    }
                }
                Format::Aof => {
                    write_zadds(&mut buf, &b.key, saved.iter().map(|(m, s)| (&m[..], *s)));
                    if let Some(t) = b.expire {
                        let mut num = itoa::Buffer::new();
                        let ms = num.format(t).as_bytes();
                        write_command(&mut buf, [&b"PEXPIREAT"[..], &b.key, ms].into_iter());
                    }
                }
            }
        }
        BigLog::Board { log, head, tail } => {
            let saved = {
                let mut log = log.lock();
                if !log.is_finished() {
                    return Err(lost());
                }
                log.take_saved()
            };
            written += saved.len();
            for e in &saved {
                match job.format {
                    Format::Rdb(o) => rdb::encode::write_leaderboard_entry(&mut buf, e.as_ref(), o),
                    Format::Aof => write_entry(&mut buf, &b.key, e.as_ref()),
                }
            }
            buf.extend_from_slice(tail);
            job.cow.sub(head.capacity() + tail.capacity());
        }
    }
    if written != b.len {
        return Err(format!(
            "internal error: '{}' written with {written} of its {} members",
            String::from_utf8_lossy(&b.key),
            b.len
        ));
    }
    job.keys_done.fetch_add(1, Ordering::Relaxed);
    put(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zadd_batches_are_bounded() {
        let members: Vec<Vec<u8>> = (0..130).map(|i| format!("m{i}").into_bytes()).collect();
        let mut out = Vec::new();
        write_zadds(&mut out, b"k", members.iter().map(|m| (m.as_slice(), 0.1)));
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("ZADD").count(), 3);
        assert!(text.starts_with("*130\r\n$4\r\nZADD\r\n$1\r\nk\r\n$19\r\n0.10000000000000001\r\n"));
        assert!(text.contains("*6\r\n$4\r\nZADD"));
        let mut out = Vec::new();
        write_sadds(
            &mut out,
            b"s",
            members.iter().take(65).map(|m| Cow::Borrowed(m.as_slice())),
        );
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("SADD").count(), 2);
        assert!(text.contains("*3\r\n$4\r\nSADD\r\n$1\r\ns\r\n$3\r\nm64\r\n"));
    }

    #[test]
    fn rpush_batches_are_bounded_and_in_order() {
        let elements: Vec<Vec<u8>> = (0..129).map(|i| format!("e{i}").into_bytes()).collect();
        let list =
            ListValue::from_values(elements.iter().map(|e| e.as_slice()), Default::default());
        let mut out = Vec::new();
        write_value(&mut out, b"l", &Value::List(Box::new(list)));
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("RPUSH").count(), 3);
        assert!(text.starts_with("*66\r\n$5\r\nRPUSH\r\n$1\r\nl\r\n$2\r\ne0\r\n$2\r\ne1\r\n"));
        assert!(text.ends_with("*3\r\n$5\r\nRPUSH\r\n$1\r\nl\r\n$4\r\ne128\r\n"));
    }

    #[test]
    fn hset_batches_are_bounded() {
        use crate::engine::hash::HashLimits;
        let mut h = HashValue::new();
        for i in 0..129 {
            h.set(format!("f{i}").as_bytes(), b"v", HashLimits::default());
        }
        let mut out = Vec::new();
        write_hsets(&mut out, b"h", &h);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("HSET").count(), 3);
        assert_eq!(text.matches("*130\r\n$4\r\nHSET\r\n").count(), 2);
        assert!(text.contains("*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n"));
        let mut out = Vec::new();
        write_value(&mut out, b"e", &Value::Hash(HashValue::new()));
        assert!(out.is_empty());
    }
}
