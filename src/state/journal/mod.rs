//! The AOF journal: the one feed through which every write leaves the
//! command layer, and the file it becomes, in the format of Redis's
//! single `appendonly.aof` (RESP commands; `redis-check-aof` and
//! redis-server load it).
//!
//! - [`feed`] (called by the dispatcher while the command's shards are
//!   still locked, so the log order is the apply order) turns what a
//!   command changed into RESP in a buffer ([`encode`]);
//! - [`writer`] writes that buffer and fsyncs it as `appendfsync` says,
//!   publishing the offset that clients' replies wait for: written to the
//!   file (write(2), by the worker about to reply) under `everysec` and
//!   `no`, as Redis writes before it replies, so a killed process loses
//!   no acknowledged write; fsynced too under `always` (the writer
//!   thread's group commit);
//! - [`snapshot`] is the rewrite's copy-before-write: a command about to
//!   change a shard the running rewrite has not read yet writes it out
//!   first ([`before_write`]).
//!
//! What replays a file (`persistence::load`) and the rewrite thread
//! (`persistence::rewrite`) drive the dispatcher or walk the keyspace, so
//! they live above `commands`; this module knows neither commands nor
//! clients. Expired keys are logged as DELs and the loader runs with expiry
//! off (as Redis does), so replaying the file needs no clock.

pub mod backlog;
pub mod encode;
pub mod snapshot;
pub mod writer;

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex, RwLock};
use smallvec::SmallVec;
use tokio::sync::watch;

use super::clock::unix_ms;
use super::config::Config;
use super::keys::{Keys, Propagation};
use crate::engine::keyspace::Locked;
use encode::Target;

/// `aof_state`: no file is written.
const OFF: u8 = 0;
/// Every change is appended to the file.
const ON: u8 = 1;
/// Turned on at run time: waiting for the first rewrite to create the file.
const WAIT_REWRITE: u8 = 2;

/// The `appendfsync` policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fsync {
    /// fsync before a write is acknowledged.
    Always,
    /// fsync in the background once a second.
    Everysec,
    /// Leave it to the operating system.
    No,
}

impl Fsync {
    /// The policy named by the config value (`everysec` if unknown).
    pub fn parse(s: &str) -> Fsync {
        match s.to_ascii_lowercase().as_str() {
            "always" => Fsync::Always,
            "no" => Fsync::No,
            _ => Fsync::Everysec,
        }
    }

    fn from_u8(v: u8) -> Fsync {
        match v {
            0 => Fsync::Always,
            2 => Fsync::No,
            _ => Fsync::Everysec,
        }
    }

    fn as_u8(self) -> u8 {
        match self {
            Fsync::Always => 0,
            Fsync::Everysec => 1,
            Fsync::No => 2,
        }
    }
}

/// A RESP stream being built: its bytes and the database its last command
/// ran in (`None`: the next command writes a SELECT first).
#[derive(Debug, Default)]
pub(crate) struct Stream {
    pub(crate) buf: Vec<u8>,
    pub(crate) db: Option<usize>,
    /// The unix second of the last `#TS:` annotation written
    /// (`aof-timestamp-enabled`).
    pub(crate) ts: u64,
}

/// What the dispatcher hands to the writer, under [`feed`]'s mutex.
#[derive(Debug, Default)]
pub(crate) struct Feed {
    /// Bytes for the file not yet taken by the writer.
    pub(crate) main: Stream,
    /// Offset of the end of the fed stream (bytes ever fed to `main`).
    pub(crate) fed: u64,
    /// While a rewrite runs: every change since it started.
    pub(crate) rewrite: Option<Stream>,
    /// A new file for the writer to append to from now on (after a rewrite
    /// or at start-up), with its size.
    pub(crate) install: Option<(File, u64)>,
    /// The AOF was turned off: flush, fsync and close the file.
    pub(crate) close: bool,
    /// The server is exiting: flush, fsync and stop.
    pub(crate) stop: bool,
    /// The writer has stopped.
    pub(crate) stopped: bool,
    /// The fed offset up to which the writer was asked to write (and
    /// under `always` fsync) now ([`Aof::worker_idle`]).
    pub(crate) kick_to: u64,
}

/// Rewrite bookkeeping (INFO, BGREWRITEAOF, SAVE).
#[derive(Debug)]
pub(crate) struct RewriteStatus {
    /// A rewrite was asked for and not yet started.
    pub(crate) requested: bool,
    /// Start another one when the current one ends (BGSAVE SCHEDULE).
    pub(crate) scheduled: bool,
    /// When the running rewrite started.
    pub(crate) started: Option<Instant>,
    /// Duration of the last rewrite in seconds, -1 if none.
    pub(crate) last_secs: i64,
    /// Whether the last rewrite succeeded.
    pub(crate) last_ok: bool,
    /// Rewrites done (INFO aof_rewrites).
    pub(crate) count: u64,
    /// Failures in a row.
    pub(crate) failures: u64,
    /// Rewrites finished, successful or not (SAVE waits on this).
    pub(crate) finished: u64,
    /// The server is exiting.
    pub(crate) stop: bool,
    /// An RDB save was asked for (BGSAVE, SAVE, a save point) and not yet
    /// started.
    pub(crate) rdb_requested: bool,
    /// BGSAVE SCHEDULE: start one once the running rewrite ends.
    pub(crate) rdb_scheduled: bool,
    /// When the running RDB save started.
    pub(crate) rdb_started: Option<Instant>,
    /// When the last RDB save was tried (a failed one is retried by the
    /// save points only 5 seconds later, as Redis does).
    pub(crate) rdb_last_try: Option<Instant>,
    /// Duration of the last RDB save in seconds, -1 if none.
    pub(crate) rdb_last_secs: i64,
    /// Whether the last RDB save succeeded.
    pub(crate) rdb_last_ok: bool,
    /// RDB saves done (INFO rdb_saves).
    pub(crate) rdb_saves: u64,
    /// RDB saves finished, successful or not (SAVE waits on this).
    pub(crate) rdb_finished: u64,
    /// Diskless full syncs waiting for a snapshot in memory: those queued
    /// when the snapshot thread takes them share one.
    pub(crate) repl_waiters: Vec<tokio::sync::oneshot::Sender<ReplSnapshot>>,
}

/// The AOF's shared state, one per server (`Server::aof`).
pub struct Aof {
    state: AtomicU8,
    fsync: AtomicU8,
    loading: AtomicBool,
    pub(crate) feed: Mutex<Feed>,
    /// The file and what is being written to it (see `writer`).
    pub(crate) output: Mutex<writer::Output>,
    pub(crate) wake_writer: Condvar,
    /// Writes were fed that no idle worker has handed to the writer yet.
    unkicked: AtomicBool,
    /// Offset of the fed stream known to be in the file (and fsynced
    /// under `always`): replies to the writes before it may go out.
    pub(crate) synced: watch::Sender<u64>,
    /// The last write or fsync error, `None` when writes succeed.
    pub(crate) write_error: Mutex<Option<String>>,
    write_failed: AtomicBool,
    /// Bytes in the incr file the writer appends to.
    pub(crate) current_size: AtomicU64,
    /// Bytes in the AOF's files before it (the base and any earlier incr):
    /// INFO's `aof_base_size`; `aof_current_size` is the sum of both.
    pub(crate) base_size: AtomicU64,
    pub(crate) rewrite: Mutex<RewriteStatus>,
    pub(crate) wake_rewriter: Condvar,
    pub(crate) rewrite_done: Condvar,
    /// A rewrite is collecting changes (hot flag for the dispatcher).
    rewriting: AtomicBool,
    pub(crate) job: RwLock<Option<Arc<snapshot::Job>>>,
    /// Peak memory held by the last RDB save's and the last rewrite's
    /// snapshot (INFO `rdb_last_cow_size`, `aof_last_cow_size`).
    pub(crate) rdb_last_cow: AtomicU64,
    pub(crate) aof_last_cow: AtomicU64,
    dirty_since_save: AtomicU64,
    /// Unix seconds of the last successful save (LASTSAVE).
    pub lastsave: AtomicU64,
    /// The last background RDB save failed (for MISCONF under
    /// `stop-writes-on-bgsave-error`).
    pub rdb_failed: AtomicBool,
    /// SHUTDOWN took care of the final save (or of not saving): the exit
    /// after a signal must not save again.
    pub exit_saved: AtomicBool,
    /// Keys the last RDB load read, and those it dropped as expired.
    pub rdb_loaded_keys: AtomicU64,
    pub rdb_expired_keys: AtomicU64,
    /// Set once the writer and rewrite threads are started.
    pub started: AtomicBool,
    /// The writer thread, joined at shutdown.
    pub writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Test-only fault switch: while this file exists, AOF writes fail with
    /// ENOSPC (set by the `ROSTRUM_AOF_FAULT_FILE` environment variable).
    pub(crate) fault: Option<PathBuf>,
    /// The replication backlog: the feed's second consumer.
    pub backlog: backlog::Backlog,
    /// `aof-timestamp-enabled`: a `#TS:<unix seconds>` line goes before
    /// the first record of each new second, as Redis 7.0 writes it.
    timestamps: AtomicBool,
}

impl Aof {
    /// The AOF state of a server with this configuration (nothing runs
    /// until [`start`]).
    pub fn new(config: &Config) -> Self {
        let (synced, _) = watch::channel(0);
        Aof {
            state: AtomicU8::new(OFF),
            fsync: AtomicU8::new(Fsync::parse(&config.appendfsync).as_u8()),
            loading: AtomicBool::new(false),
            feed: Mutex::new(Feed::default()),
            output: Mutex::new(writer::Output::default()),
            wake_writer: Condvar::new(),
            unkicked: AtomicBool::new(false),
            synced,
            write_error: Mutex::new(None),
            write_failed: AtomicBool::new(false),
            current_size: AtomicU64::new(0),
            base_size: AtomicU64::new(0),
            rewrite: Mutex::new(RewriteStatus {
                requested: false,
                scheduled: false,
                started: None,
                last_secs: -1,
                last_ok: true,
                count: 0,
                failures: 0,
                finished: 0,
                stop: false,
                rdb_requested: false,
                rdb_scheduled: false,
                rdb_started: None,
                rdb_last_try: None,
                rdb_last_secs: -1,
                rdb_last_ok: true,
                rdb_saves: 0,
                rdb_finished: 0,
                repl_waiters: Vec::new(),
            }),
            wake_rewriter: Condvar::new(),
            rewrite_done: Condvar::new(),
            rewriting: AtomicBool::new(false),
            job: RwLock::new(None),
            rdb_last_cow: AtomicU64::new(0),
            aof_last_cow: AtomicU64::new(0),
            dirty_since_save: AtomicU64::new(0),
            lastsave: AtomicU64::new(unix_ms() / 1000),
            rdb_failed: AtomicBool::new(false),
            exit_saved: AtomicBool::new(false),
            rdb_loaded_keys: AtomicU64::new(0),
            rdb_expired_keys: AtomicU64::new(0),
            started: AtomicBool::new(false),
            writer_thread: Mutex::new(None),
            fault: std::env::var_os("ROSTRUM_AOF_FAULT_FILE").map(PathBuf::from),
            backlog: backlog::Backlog::new(),
            timestamps: AtomicBool::new(config.param("aof-timestamp-enabled") == "yes"),
        }
    }

    fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }

    /// Whether the AOF is on (or waiting for its first rewrite).
    pub fn enabled(&self) -> bool {
        self.state() != OFF
    }

    /// The fsync policy in force.
    pub fn fsync(&self) -> Fsync {
        Fsync::from_u8(self.fsync.load(Ordering::Relaxed))
    }

    /// Whether the file is being loaded (commands run without expiry).
    pub fn loading(&self) -> bool {
        self.loading.load(Ordering::Relaxed)
    }

    /// Whether a rewrite is running.
    pub fn rewriting(&self) -> bool {
        self.rewriting.load(Ordering::Acquire)
    }

    /// Whether changes must be fed (AOF on, a rewrite collecting them, or
    /// a replication backlog).
    fn feeding(&self) -> bool {
        self.state() != OFF || self.rewriting() || self.backlog.emitting()
    }

    /// The error of the last failed write or fsync, while it lasts.
    pub fn write_error(&self) -> Option<String> {
        if !self.write_failed.load(Ordering::Acquire) {
            return None;
        }
        self.write_error.lock().clone()
    }

    pub(crate) fn set_write_error(&self, e: Option<String>) {
        let mut g = self.write_error.lock();
        self.write_failed.store(e.is_some(), Ordering::Release);
        *g = e;
    }

    /// Whether the fed stream is written (and under `always` fsynced) up
    /// to `offset`.
    pub fn written(&self, offset: u64) -> bool {
        *self.synced.borrow() >= offset
    }

    /// A receiver of the durable offset (see [`wait_synced`]).
    pub fn synced_watch(&self) -> watch::Receiver<u64> {
        self.synced.subscribe()
    }

    /// Called by a tokio worker about to park (it has run every client
    /// that was ready). The writer then writes (and under `appendfsync
    /// always` fsyncs) everything fed so far in one go, as Redis does
    /// before its event loop sleeps: one write(2) or fsync costs about the
    /// same for one command or fifty, and starting it at the first write
    /// of a turn would leave the rest of the turn's clients waiting for a
    /// second one. (The writer does not wait for this longer than its
    /// `KICK_WAIT`.)
    pub fn worker_idle(&self) {
        // The load first: a parking worker with nothing fed writes nothing.
        if self.unkicked.load(Ordering::Acquire) && self.unkicked.swap(false, Ordering::AcqRel) {
            let mut f = self.feed.lock();
            f.kick_to = f.fed;
            drop(f);
            self.wake_writer.notify_one();
        }
    }

    /// After a write (an fsync under `always`): forgets the kicks for writes fed past
    /// `synced`, so the next fsync waits for a worker to go idle from now
    /// on. That worker first sends the replies this fsync released, and the
    /// commands those clients send back as it does join the next fsync,
    /// instead of waiting for the one after it: with 50 clients at -P 1,
    /// about 39 writes per fsync instead of 21 (Redis: 30), and ~15% more
    /// requests per second.
    pub(crate) fn await_fresh_kick(&self, synced: u64) {
        let mut f = self.feed.lock();
        if f.kick_to > synced {
            f.kick_to = synced;
        }
        if f.fed > synced {
            self.unkicked.store(true, Ordering::Release);
        }
    }

    /// Publishes that everything fed up to `offset` is on disk.
    pub(crate) fn publish_synced(&self, offset: u64) {
        self.synced.send_if_modified(|cur| {
            if offset > *cur {
                *cur = offset;
                true
            } else {
                false
            }
        });
    }

    /// Raised by the rewrite while it collects changes.
    pub fn set_rewriting(&self, on: bool) {
        self.rewriting.store(on, Ordering::Release);
    }

    /// Marks the file as loading (commands then run without expiry).
    pub fn set_loading(&self, on: bool) {
        self.loading.store(on, Ordering::Release);
    }

    /// Marks the AOF as on, once its file is open.
    pub fn set_state_on(&self) {
        self.state.store(ON, Ordering::Release);
    }

    /// Applies `aof-timestamp-enabled`.
    pub fn set_timestamps(&self, on: bool) {
        self.timestamps.store(on, Ordering::Relaxed);
    }

    /// Whether `#TS:` annotations are written.
    pub fn timestamps(&self) -> bool {
        self.timestamps.load(Ordering::Relaxed)
    }

    /// Turned on at run time and waiting for its first rewrite.
    pub fn waiting_rewrite(&self) -> bool {
        self.state() == WAIT_REWRITE
    }
}

/// Applies `appendonly` / `appendfsync` after CONFIG SET changed them.
/// Turning the AOF on starts a rewrite that creates the file (writes are
/// collected meanwhile); turning it off flushes, fsyncs and closes it.
pub fn on_config_change(aof: &Aof, config: &Config) -> Result<(), String> {
    let (on, policy) = (config.appendonly, Fsync::parse(&config.appendfsync));
    aof.fsync.store(policy.as_u8(), Ordering::Relaxed);
    let state = aof.state();
    if on && state == OFF {
        aof.state.store(WAIT_REWRITE, Ordering::Release);
        request_rewrite(aof);
    } else if !on && state != OFF {
        let mut f = aof.feed.lock();
        aof.state.store(OFF, Ordering::Release);
        f.close = true;
        f.main.db = None;
        let fed = f.fed;
        drop(f);
        aof.wake_writer.notify_one();
        // Nothing more will be made durable: release waiting clients.
        aof.publish_synced(fed);
        aof.set_write_error(None);
    }
    aof.wake_writer.notify_one();
    Ok(())
}

/// Why a rewrite could not be started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewriteStart {
    /// Started.
    Started,
    /// One is already running.
    InProgress,
    /// An RDB save runs: the rewrite starts after it.
    Scheduled,
}

fn snapshot_busy(st: &RewriteStatus) -> bool {
    st.requested || st.started.is_some() || st.rdb_requested || st.rdb_started.is_some()
}

/// Asks the rewrite thread for a rewrite (BGREWRITEAOF, automatic rewrite,
/// turning the AOF on); while an RDB save runs it is scheduled after it.
pub fn request_rewrite(aof: &Aof) -> RewriteStart {
    let mut st = aof.rewrite.lock();
    if st.requested || st.started.is_some() {
        return RewriteStart::InProgress;
    }
    if st.rdb_requested || st.rdb_started.is_some() {
        st.scheduled = true;
        return RewriteStart::Scheduled;
    }
    st.requested = true;
    aof.wake_rewriter.notify_one();
    RewriteStart::Started
}

/// What BGSAVE gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BgsaveStart {
    /// Started.
    Started,
    /// An RDB save is already running.
    InProgress,
    /// An AOF rewrite runs (and SCHEDULE was not given).
    RewriteRunning,
    /// An AOF rewrite runs: the save starts after it (SCHEDULE).
    Scheduled,
}

/// Asks the snapshot thread for an RDB save (BGSAVE, a save point).
pub fn request_bgsave(aof: &Aof, schedule: bool) -> BgsaveStart {
    let mut st = aof.rewrite.lock();
    if st.rdb_requested || st.rdb_started.is_some() {
        return BgsaveStart::InProgress;
    }
    if st.requested || st.started.is_some() {
        if schedule {
            st.rdb_scheduled = true;
            return BgsaveStart::Scheduled;
        }
        return BgsaveStart::RewriteRunning;
    }
    st.rdb_requested = true;
    aof.wake_rewriter.notify_one();
    BgsaveStart::Started
}

/// Whether an RDB save runs or is about to.
pub fn bgsave_in_progress(aof: &Aof) -> bool {
    let st = aof.rewrite.lock();
    st.rdb_requested || st.rdb_started.is_some()
}

/// SAVE (and the save at exit): runs an RDB save on the snapshot thread
/// and waits for it (after a running rewrite); returns whether it
/// succeeded. Blocks the calling thread only.
pub fn save_blocking(aof: &Aof) -> bool {
    let mut st = aof.rewrite.lock();
    if st.stop {
        return false;
    }
    let target = if st.rdb_requested || st.rdb_started.is_some() {
        st.rdb_finished + 2
    } else {
        st.rdb_finished + 1
    };
    if snapshot_busy(&st) {
        // After the running save or rewrite.
        st.rdb_scheduled = true;
    } else {
        st.rdb_requested = true;
        aof.wake_rewriter.notify_one();
    }
    while st.rdb_finished < target && !st.stop {
        aof.rewrite_done.wait(&mut st);
    }
    st.rdb_last_ok && st.rdb_finished >= target
}

/// A diskless full sync's snapshot: the RDB bytes, and the replication
/// id and offset they are at (or why it failed); shared by the replicas
/// that asked together.
pub type ReplSnapshot = std::sync::Arc<Result<(Vec<u8>, String, u64), String>>;

/// Asks the snapshot thread for an RDB snapshot in memory (a diskless full
/// sync; nothing is written to `dir`). Requests queued when the thread
/// takes them share one snapshot.
pub fn request_repl_snapshot(aof: &Aof) -> tokio::sync::oneshot::Receiver<ReplSnapshot> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let mut st = aof.rewrite.lock();
    st.repl_waiters.push(tx);
    aof.wake_rewriter.notify_one();
    rx
}

/// Once a second: starts an RDB save when a `save` point is reached
/// (`points` as (seconds, changes)): at least that many changes and that
/// many seconds since the last save; after a failure, not within 5 seconds
/// of the last try.
pub fn save_points_cron(aof: &Aof, points: &[(u64, u64)]) {
    if points.is_empty() {
        return;
    }
    let dirty = aof.dirty_since_save.load(Ordering::Relaxed);
    let now = unix_ms() / 1000;
    let since = now.saturating_sub(aof.lastsave.load(Ordering::Relaxed));
    let mut st = aof.rewrite.lock();
    if snapshot_busy(&st) || st.stop {
        return;
    }
    let retry_ok = st.rdb_last_ok || st.rdb_last_try.is_none_or(|t| t.elapsed().as_secs() >= 5);
    let due = points
        .iter()
        .any(|&(secs, changes)| dirty >= changes && since >= secs);
    if due && retry_ok {
        tracing::info!("{dirty} changes in {since} seconds. Saving...");
        st.rdb_requested = true;
        aof.wake_rewriter.notify_one();
    }
}

/// Changes since the last successful save (INFO rdb_changes_since_last_save).
pub fn dirty(aof: &Aof) -> u64 {
    aof.dirty_since_save.load(Ordering::Relaxed)
}

/// Marks a successful RDB save of the data as it was when `dirty_at_start`
/// changes were counted: LASTSAVE, and the changes made since stay counted.
pub fn rdb_saved(aof: &Aof, dirty_at_start: u64) {
    aof.lastsave.store(unix_ms() / 1000, Ordering::Relaxed);
    let _ = aof
        .dirty_since_save
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| {
            Some(d.saturating_sub(dirty_at_start))
        });
}

/// What the dispatcher saves before running a command, to collect the
/// commands a transaction or script runs (see [`nested_end`]).
pub struct Nested {
    outer: Option<Propagation>,
    dirty: u64,
    db: usize,
}

/// Before a command run by EXEC or a script (`commands::call`).
pub fn nested_begin(keys: &mut Keys<'_>) -> Nested {
    Nested {
        outer: keys.propagate.take(),
        dirty: keys.dirty,
        db: keys.db,
    }
}

/// After a command run by EXEC or a script: when it changed data, what it
/// logs (itself, or what it asked to propagate) is added to the enclosing
/// command's list, after a SELECT when its database differs; what it sends
/// to replicas only (PUBLISH) is added whether or not it changed data. The
/// list then replaces EXEC in the AOF, wrapped in MULTI/EXEC when it holds
/// several. Each call costs the same however long the list already is.
pub fn nested_end(aof: &Aof, keys: &mut Keys<'_>, saved: Nested, args: &[&[u8]]) {
    let own = std::mem::replace(&mut keys.propagate, saved.outer);
    let wrote = keys.dirty != saved.dirty;
    let to_replicas = own.as_ref().is_some_and(Propagation::has_repl_only);
    if !(wrote || to_replicas) || !aof.feeding() {
        return;
    }
    let now = keys.now_ms;
    let list = keys.propagate.get_or_insert_with(Propagation::default);
    list.select(saved.db);
    match own {
        Some(cmds) => list.append(cmds, !wrote),
        None => {
            let c = encode::translate(args, now)
                .unwrap_or_else(|| args.iter().map(|a| a.to_vec()).collect());
            list.push(c);
        }
    }
}

/// Removes and returns the keys that expired in the shards a command holds
/// for writing (to log a DEL for each).
fn take_expired(locked: &mut Locked<'_>) -> Vec<(usize, Bytes)> {
    let mut out = Vec::new();
    if !crate::engine::keyspace::expired_log_pending() {
        return out;
    }
    for g in locked.guards_mut() {
        let Some(shard) = g.shard_mut() else {
            continue;
        };
        for (i, db) in shard.dbs.iter_mut().enumerate() {
            if db.has_expired() {
                out.extend(db.take_expired().into_iter().map(|k| (i, k)));
            }
        }
    }
    out
}

/// Logs what a command changed, called by the dispatcher with the command's
/// shards still locked. `db` is the database the command started in.
/// Returns the offset the client's reply must wait for (written under
/// `everysec` and `no`, fsynced under `always`), 0 when it need not wait.
pub fn feed(aof: &Aof, keys: &mut Keys<'_>, db: usize, args: &[&[u8]]) -> u64 {
    let expired = take_expired(&mut keys.locked);
    if let Some(t) = &mut keys.tracked {
        t.extend(expired.iter().map(|(_, k)| k.clone()));
    }
    let to_replicas = keys
        .propagate
        .as_ref()
        .is_some_and(Propagation::has_repl_only);
    if keys.dirty == 0 && expired.is_empty() && !to_replicas {
        return 0;
    }
    if keys.dirty > 0 {
        aof.dirty_since_save
            .fetch_add(keys.dirty, Ordering::Relaxed);
    }
    if !aof.feeding() {
        keys.propagate = None;
        return 0;
    }
    let now = keys.now_ms;
    let mut own = keys.propagate.take();
    if keys.dirty > 0 {
        if let Some(list) = &mut own {
            for c in &mut list.cmds {
                encode::translate_in_place(c, now);
            }
        }
    }
    let translated;
    let (group, repl_group) = match &own {
        // Nothing changed: only what goes to replicas (PUBLISH), if any.
        _ if keys.dirty == 0 => match &own {
            Some(list) if to_replicas => (encode::Group::Nothing, encode::Group::Many(list)),
            _ => (encode::Group::Nothing, encode::Group::Nothing),
        },
        Some(list) => (encode::Group::Many(list), encode::Group::Many(list)),
        None => match encode::translate(args, now) {
            Some(t) => {
                translated = Propagation::from_cmds(vec![t]);
                (
                    encode::Group::Many(&translated),
                    encode::Group::Many(&translated),
                )
            }
            None => (encode::Group::One(args), encode::Group::One(args)),
        },
    };
    let to_aof = keys.dirty > 0 || !expired.is_empty();
    let mut f = aof.feed.lock();
    let mut wait = 0;
    if to_aof && aof.state() == ON {
        let before = f.main.buf.len();
        if aof.timestamps() {
            encode::annotate_time(&mut f.main, now / 1000);
        }
        encode::emit(&mut f.main, db, &expired, &group, Target::Aof);
        let n = (f.main.buf.len() - before) as u64;
        f.fed += n;
        wait = f.fed;
    }
    if to_aof {
        if let Some(rw) = f.rewrite.as_mut() {
            encode::emit(rw, db, &expired, &group, Target::Aof);
        }
    }
    if aof.backlog.emitting() {
        aof.backlog.emit(db, &expired, &repl_group);
    }
    drop(f);
    if wait > 0 && aof.fsync() == Fsync::Always {
        // Handed to the writer when the worker goes idle. (Under
        // `everysec` and `no` the worker writes it before the replies go
        // out: `writer::write_through`.)
        aof.unkicked.store(true, Ordering::Release);
    }
    wait
}

/// Whether changes are fed to the AOF (on, or a rewrite collecting them):
/// while not, a command's changes need no log entry of their own.
pub fn feeding(aof: &Aof) -> bool {
    aof.feeding()
}

/// Logs keys removed by the active expiry cycle (called with their shard
/// locked).
pub fn feed_expired(aof: &Aof, db: usize, keys: Vec<Bytes>) {
    if keys.is_empty() || !aof.feeding() {
        return;
    }
    let expired: Vec<(usize, Bytes)> = keys.into_iter().map(|k| (db, k)).collect();
    let mut f = aof.feed.lock();
    if aof.state() == ON {
        let before = f.main.buf.len();
        if aof.timestamps() {
            encode::annotate_time(&mut f.main, crate::state::clock::unix_ms() / 1000);
        }
        encode::emit(
            &mut f.main,
            db,
            &expired,
            &encode::Group::Nothing,
            Target::Aof,
        );
        f.fed += (f.main.buf.len() - before) as u64;
    }
    if let Some(rw) = f.rewrite.as_mut() {
        encode::emit(rw, db, &expired, &encode::Group::Nothing, Target::Aof);
    }
    if aof.backlog.emitting() {
        aof.backlog.emit(db, &expired, &encode::Group::Nothing);
    }
    drop(f);
    aof.wake_writer.notify_one();
}

/// Appends bytes to the replication stream as they are (a replica's
/// primary's stream; a primary's PING or REPLCONF GETACK), in order with
/// the fed writes.
pub fn feed_repl_raw(aof: &Aof, bytes: &[u8]) {
    let _f = aof.feed.lock();
    aof.backlog.append_raw(bytes);
}

/// A primary: writes go into the backlog (created if needed) from now on.
pub fn start_repl_emitting(aof: &Aof, size: u64) {
    let _f = aof.feed.lock();
    aof.backlog.start_emitting(size);
}

/// Whether the active expiry cycle must wait: a rewrite is reading shards
/// that commands have not changed yet, and expiry must not change them
/// either.
pub fn expiry_paused(aof: &Aof) -> bool {
    aof.rewriting()
}

/// Why writes are refused now (Redis's MISCONF): the error of the last
/// failed write or fsync while the AOF is on; `None` when writes may run.
pub fn misconf(aof: &Aof) -> Option<String> {
    if !aof.write_failed.load(Ordering::Acquire) || !aof.enabled() {
        return None;
    }
    aof.write_error()
}

/// Before a command that may write runs during a rewrite: the shards it
/// may change (`shards()`, asked only while a rewrite runs; `None` for
/// every shard) are first written to the rewrite as they are now (so the
/// rewrite sees each shard as it was when the rewrite started).
pub fn before_write(
    aof: &Aof,
    shards: impl FnOnce() -> Option<SmallVec<[usize; 4]>>,
    locked: &mut Locked<'_>,
) {
    if !aof.rewriting() {
        return;
    }
    let Some(job) = aof.job.read().clone() else {
        return;
    };
    snapshot::presave(&job, shards(), locked);
}

/// SHUTDOWN / exit: writes and fsyncs everything fed, then stops the writer
/// and abandons a running rewrite.
pub fn shutdown_flush(aof: &Aof) {
    {
        let mut st = aof.rewrite.lock();
        st.stop = true;
        aof.wake_rewriter.notify_all();
        aof.rewrite_done.notify_all();
    }
    if let Some(job) = aof.job.read().clone() {
        job.abort.store(true, Ordering::Release);
    }
    {
        let mut f = aof.feed.lock();
        f.stop = true;
    }
    aof.wake_writer.notify_all();
    let handle = aof.writer_thread.lock().take();
    if let Some(h) = handle {
        let _ = h.join();
    }
}

/// Fields of INFO's `# Persistence` section, in Redis's order.
pub fn info_fields(aof: &Aof) -> Vec<(&'static str, String)> {
    let st = aof.rewrite.lock();
    let in_progress = st.started.is_some() || st.requested;
    let current_secs = st
        .started
        .map(|t| t.elapsed().as_secs() as i64)
        .unwrap_or(-1);
    // A running snapshot's figures, live (no child to report them late:
    // the age is always 0).
    let (peak, size, perc, done, total) = match aof.job.read().as_ref() {
        Some(job) => {
            let total = job.keys_total.load(Ordering::Relaxed);
            let done = job.keys_done.load(Ordering::Relaxed).min(total);
            let perc = if total == 0 {
                0.0
            } else {
                done as f64 * 100.0 / total as f64
            };
            (job.cow.peak(), job.cow.now(), perc, done, total)
        }
        None => (0, 0, 0.0, 0, 0),
    };
    let mut v: Vec<(&'static str, String)> = vec![
        ("loading", (aof.loading() as u8).to_string()),
        ("async_loading", "0".into()),
        ("current_cow_peak", peak.to_string()),
        ("current_cow_size", size.to_string()),
        ("current_cow_size_age", "0".into()),
        ("current_fork_perc", format!("{perc:.2}")),
        ("current_save_keys_processed", done.to_string()),
        ("current_save_keys_total", total.to_string()),
        (
            "rdb_changes_since_last_save",
            aof.dirty_since_save.load(Ordering::Relaxed).to_string(),
        ),
        (
            "rdb_bgsave_in_progress",
            ((st.rdb_started.is_some() || st.rdb_requested) as u8).to_string(),
        ),
        (
            "rdb_last_save_time",
            aof.lastsave.load(Ordering::Relaxed).to_string(),
        ),
        (
            "rdb_last_bgsave_status",
            if st.rdb_last_ok { "ok" } else { "err" }.into(),
        ),
        ("rdb_last_bgsave_time_sec", st.rdb_last_secs.to_string()),
        (
            "rdb_current_bgsave_time_sec",
            st.rdb_started
                .map(|t| t.elapsed().as_secs() as i64)
                .unwrap_or(-1)
                .to_string(),
        ),
        ("rdb_saves", st.rdb_saves.to_string()),
        (
            "rdb_last_cow_size",
            aof.rdb_last_cow.load(Ordering::Relaxed).to_string(),
        ),
        (
            "rdb_last_load_keys_expired",
            aof.rdb_expired_keys.load(Ordering::Relaxed).to_string(),
        ),
        (
            "rdb_last_load_keys_loaded",
            aof.rdb_loaded_keys.load(Ordering::Relaxed).to_string(),
        ),
        ("aof_enabled", (aof.enabled() as u8).to_string()),
        ("aof_rewrite_in_progress", (in_progress as u8).to_string()),
        ("aof_rewrite_scheduled", (st.scheduled as u8).to_string()),
        ("aof_last_rewrite_time_sec", st.last_secs.to_string()),
        ("aof_current_rewrite_time_sec", current_secs.to_string()),
        (
            "aof_last_bgrewrite_status",
            if st.last_ok { "ok" } else { "err" }.into(),
        ),
        ("aof_rewrites", st.count.to_string()),
        ("aof_rewrites_consecutive_failures", st.failures.to_string()),
        (
            "aof_last_write_status",
            if aof.write_failed.load(Ordering::Acquire) {
                "err"
            } else {
                "ok"
            }
            .into(),
        ),
        (
            "aof_last_cow_size",
            aof.aof_last_cow.load(Ordering::Relaxed).to_string(),
        ),
        ("module_fork_in_progress", "0".into()),
        ("module_fork_last_cow_size", "0".into()),
    ];
    drop(st);
    if aof.enabled() {
        let pending = aof.feed.lock().main.buf.len();
        v.extend([
            (
                "aof_current_size",
                (aof.base_size.load(Ordering::Relaxed) + aof.current_size.load(Ordering::Relaxed))
                    .to_string(),
            ),
            (
                "aof_base_size",
                aof.base_size.load(Ordering::Relaxed).to_string(),
            ),
            ("aof_pending_rewrite", "0".into()),
            ("aof_buffer_length", pending.to_string()),
            ("aof_pending_bio_fsync", "0".into()),
            ("aof_delayed_fsync", "0".into()),
        ]);
    }
    v
}

/// Once a second (from the rewrite thread): the automatic rewrite when the
/// file grew by `auto-aof-rewrite-percentage` over its size after the last
/// rewrite and is over `auto-aof-rewrite-min-size`, and a retry of the
/// first rewrite after the AOF was turned on.
pub fn auto_rewrite(aof: &Aof, percentage: u64, min_size: u64) {
    {
        let st = aof.rewrite.lock();
        if snapshot_busy(&st) || st.stop {
            return;
        }
    }
    if aof.waiting_rewrite() {
        request_rewrite(aof);
        return;
    }
    if !aof.enabled() {
        return;
    }
    // `current_size` is the incr file's, `base_size` the files' before it.
    let base = aof.base_size.load(Ordering::Relaxed).max(1);
    let cur = base + aof.current_size.load(Ordering::Relaxed);
    if percentage == 0 || cur <= min_size {
        return;
    }
    let growth = cur.saturating_sub(base).saturating_mul(100) / base;
    if growth >= percentage {
        tracing::info!("Starting automatic rewriting of AOF on {growth}% growth");
        request_rewrite(aof);
    }
}
