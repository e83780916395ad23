//! Shared server state: the keyspace, configuration, connected clients and
//! statistics, reachable from every connection.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;

use super::client::ClientInfo;
use super::clock::unix_ms;
use super::config::Config;
use super::journal::Aof;
use super::monitor::Monitors;
use super::notify;
use super::outbox::{LimitCell, OutputLimit};
use super::per_thread::PerThread;
use super::pubsub::PubSub;
use super::seasons::SeasonTimers;
use super::tracking::Tracking;
use super::watch::LiveBoards;
use crate::engine::Keyspace;
use crate::scripting::Scripting;

/// Calls, time and errors of one command (INFO commandstats), as one
/// thread counted them (see [`Server::command_stats`]).
#[derive(Debug, Default)]
pub struct CommandStat {
    pub calls: AtomicU64,
    pub usec: AtomicU64,
    pub failed: AtomicU64,
    pub rejected: AtomicU64,
    /// How long the calls took (INFO latencystats), made on the first.
    latency: OnceLock<Box<super::latency::Histogram>>,
}

impl CommandStat {
    /// Counts a call that fell in latency bucket `b`.
    pub fn record_latency(&self, b: usize) {
        self.latency.get_or_init(Box::default).record(b);
    }

    /// Zeroes the counts (CONFIG RESETSTAT).
    pub fn reset(&self) {
        for c in [&self.calls, &self.usec, &self.failed, &self.rejected] {
            c.store(0, Ordering::Relaxed);
        }
        if let Some(h) = self.latency.get() {
            h.reset();
        }
    }
}

/// One command's counts summed over the threads that counted them (its
/// latency: [`Server::command_latency`]).
#[derive(Debug, Default)]
pub struct CommandTotals {
    pub calls: u64,
    pub usec: u64,
    pub failed: u64,
    pub rejected: u64,
}

/// CLIENT PAUSE's state: while it lasts, commands of normal clients (every
/// command under `ALL`; under `WRITE`, those that may write or be
/// propagated: writes, EVAL, FCALL, PUBLISH, and EXEC of a transaction
/// holding one) wait, postponed, and run once it ends (its time runs out,
/// or CLIENT UNPAUSE).
#[derive(Debug, Default)]
pub struct ClientPause {
    /// Whether a pause may be on (the one load a command pays otherwise).
    on: AtomicBool,
    /// (every command, until when).
    state: Mutex<Option<(bool, Instant)>>,
    /// Clients with postponed commands, in the order they were held: when
    /// the pause ends they run their commands one client after the other
    /// in this order, as Redis serves them.
    waiting: Mutex<std::collections::VecDeque<u64>>,
    /// FAILOVER holds writes until the roles have swapped or it is
    /// aborted, whatever CLIENT PAUSE / UNPAUSE do meanwhile (Redis's
    /// separate pause purpose).
    failover: AtomicBool,
}

impl ClientPause {
    /// Pauses until `until` (`all`: every command, else writes only). A
    /// pause already on keeps the later end and the stricter kind.
    pub fn pause(&self, all: bool, until: Instant) {
        let mut s = self.state.lock();
        let next = match *s {
            Some((a, u)) => (a || all, u.max(until)),
            None => (all, until),
        };
        *s = Some(next);
        self.on.store(true, Ordering::Release);
    }

    /// Ends the pause; returns the client to wake first (the others are
    /// woken in turn, see [`ClientPause::take_turn`]).
    pub fn unpause(&self) -> Option<u64> {
        *self.state.lock() = None;
        if !self.failover.load(Ordering::Acquire) {
            self.on.store(false, Ordering::Release);
        }
        self.waiting.lock().front().copied()
    }

    /// FAILOVER's write pause on or off; off returns the client to wake
    /// first, as [`ClientPause::unpause`].
    pub fn failover_pause(&self, on: bool) -> Option<u64> {
        let _s = self.state.lock();
        self.failover.store(on, Ordering::Release);
        if on {
            self.on.store(true, Ordering::Release);
            None
        } else {
            self.waiting.lock().front().copied()
        }
    }

    /// Whether client `id` may run its postponed commands now (it is the
    /// first waiting, or not waiting); it then leaves the line and, once
    /// done, calls [`ClientPause::next`] and wakes the client it returns.
    pub fn take_turn(&self, id: u64) -> bool {
        let mut w = self.waiting.lock();
        match w.front() {
            Some(&first) if first == id => {
                w.pop_front();
                true
            }
            Some(_) => !w.contains(&id),
            None => true,
        }
    }

    /// The client whose turn it is now, to wake.
    pub fn next(&self) -> Option<u64> {
        self.waiting.lock().front().copied()
    }

    /// A client that leaves (disconnects) leaves the line; returns the
    /// client to wake if it was first.
    pub fn forget(&self, id: u64) -> Option<u64> {
        let mut w = self.waiting.lock();
        let first = w.front() == Some(&id);
        w.retain(|&c| c != id);
        if first {
            w.front().copied()
        } else {
            None
        }
    }

    /// When the pause on now ends (`None`: none is on).
    pub fn until(&self) -> Option<Instant> {
        self.holds(|| true)
    }

    /// When a command must wait until (`None`: it may run now).
    /// `may_write`: whether it may write or be propagated (asked only
    /// while a pause is on).
    pub fn holds(&self, may_write: impl FnOnce() -> bool) -> Option<Instant> {
        if !self.on.load(Ordering::Acquire) {
            return None;
        }
        let mut s = self.state.lock();
        let now = Instant::now();
        if s.is_some_and(|(_, until)| until <= now) {
            *s = None;
        }
        let failover = self.failover.load(Ordering::Acquire);
        let Some((all, until)) = *s else {
            if !failover {
                self.on.store(false, Ordering::Release);
                return None;
            }
            // Writes wait until FAILOVER ends (woken then); a far end.
            return may_write().then(|| now + std::time::Duration::from_secs(86400));
        };
        if all {
            return Some(until);
        }
        may_write().then(|| {
            if failover {
                until.max(now + std::time::Duration::from_secs(86400))
            } else {
                until
            }
        })
    }

    /// Notes that client `id` waits for the pause to end.
    pub fn wait(&self, id: u64) {
        let mut w = self.waiting.lock();
        if !w.contains(&id) {
            w.push_back(id);
        }
    }
}

/// One slow log entry.
#[derive(Debug, Clone)]
pub struct SlowlogEntry {
    pub id: u64,
    pub time_s: u64,
    pub duration_us: u64,
    pub args: Vec<Vec<u8>>,
    pub addr: String,
    pub name: Vec<u8>,
}

/// Server-wide counters (INFO stats). Those every request adds to are
/// kept per thread ([`Stats::hot`]).
#[derive(Debug, Default)]
pub struct Stats {
    pub hot: PerThread<HotStats>,
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub total_error_replies: AtomicU64,
    pub unexpected_error_replies: AtomicU64,
    /// Connections whose batches of commands went to run on another
    /// worker, the home of a shard they kept taking over from it
    /// (`server::workers`; INFO `rostrum_hot_shard_guests`).
    pub hot_shard_guests: AtomicU64,
    /// Connections moved off the home of a shard they kept taking over
    /// (`server::workers`; INFO `rostrum_hot_shard_moves`).
    pub hot_shard_moves: AtomicU64,
}

/// The counters of [`Stats`] that every request adds to, as one thread
/// counted them (on a cache line of its own).
#[derive(Debug, Default)]
pub struct HotStats {
    pub commands_processed: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    /// Reads from clients' sockets that brought bytes (INFO
    /// `total_reads_processed`).
    pub reads_processed: AtomicU64,
    /// Flushes of a client's replies to its socket (INFO
    /// `total_writes_processed`).
    pub writes_processed: AtomicU64,
}

impl HotStats {
    fn all(&self) -> [&AtomicU64; 7] {
        [
            &self.commands_processed,
            &self.keyspace_hits,
            &self.keyspace_misses,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.reads_processed,
            &self.writes_processed,
        ]
    }
}

impl Stats {
    /// The sum over the threads of the counter `which` picks.
    pub fn total(&self, which: impl Fn(&HotStats) -> &AtomicU64) -> u64 {
        self.hot
            .iter()
            .map(|h| which(h).load(Ordering::Relaxed))
            .sum()
    }

    /// Zeroes the counter `which` picks in every thread's copy.
    pub fn zero(&self, which: impl Fn(&HotStats) -> &AtomicU64) {
        for h in self.hot.iter() {
            which(h).store(0, Ordering::Relaxed);
        }
    }

    /// Zeroes every counter (CONFIG RESETSTAT).
    pub fn reset(&self) {
        for h in self.hot.iter() {
            for c in h.all() {
                c.store(0, Ordering::Relaxed);
            }
        }
        for c in [
            &self.connections_received,
            &self.rejected_connections,
            &self.total_error_replies,
            &self.unexpected_error_replies,
            &self.hot_shard_guests,
            &self.hot_shard_moves,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// What INFO remembers between calls to derive some of its figures.
#[derive(Debug, Default)]
pub struct InfoMarks {
    /// Highest `used_memory` seen (INFO used_memory_peak).
    pub peak_memory: AtomicU64,
    /// `expired_keys` at the last CONFIG RESETSTAT.
    pub expired_at_reset: AtomicU64,
    /// When and at what `total_commands_processed` ops/sec was last sampled.
    pub ops_sample: Mutex<Option<(Instant, u64, f64)>>,
}

/// `notify-keyspace-events` as flags.
fn notify_flags(c: &Config) -> u32 {
    notify::parse_flags(&c.notify_keyspace_events).unwrap_or(0)
}

/// One class of `client-output-buffer-limit` (`normal`, `pubsub`).
fn output_limit(c: &Config, class: &str) -> OutputLimit {
    let value = c
        .get_matching(&[b"client-output-buffer-limit"])
        .into_iter()
        .next()
        .map(|(_, v)| v)
        .unwrap_or_default();
    OutputLimit::of_class(&value, class)
}

/// A blocked client in a key's line: its id and the type of value it
/// waits for (`Value::type_name`, "" for any).
/// The consumer group an XREADGROUP waits in (`None` for every other
/// blocking command): only waiters of one group stand in line together.
pub type Waiter = (u64, &'static str, Option<bytes::Bytes>);

/// Everything connections share.
pub struct Server {
    /// All the data.
    pub keyspace: Keyspace,
    /// ACL users and log, made on first use by the commands layer (it
    /// needs the command table's catalog).
    pub acl: OnceLock<super::acl::Acl>,
    /// Current configuration.
    pub config: RwLock<Config>,
    /// Hot copies of configuration read on every command.
    pub slowlog_threshold_us: AtomicI64,
    /// `latency-tracking` (hot copy).
    pub latency_tracking: AtomicBool,
    /// Hot copy of `proto-max-bulk-len`.
    pub proto_max_bulk_len: AtomicU64,
    /// Hot copy of `client-query-buffer-limit`.
    pub query_buffer_limit: AtomicU64,
    /// Hot copy of `park-spin-us`.
    pub park_spin_us: AtomicU64,
    /// Hot copy of `notify-keyspace-events`, as flags (see `notify`).
    pub notify_flags: AtomicU32,
    /// Connected clients by id.
    pub clients: DashMap<u64, Arc<ClientInfo>>,
    next_client_id: AtomicU64,
    /// Clients blocked on keys (BZPOPMIN, ...).
    pub blocked_clients: AtomicUsize,
    /// Signalled when a blocked client has taken its turn after a wake
    /// (see `ClientInfo::turns`).
    pub turn_taken: tokio::sync::Notify,
    /// Who waits on which (db, key), in the order they blocked, with the
    /// type of value each waits for (see [`Server::block_client`]).
    pub blocked_on: Mutex<HashMap<(usize, bytes::Bytes), Vec<Waiter>>>,
    /// Counters.
    pub stats: Stats,
    /// CLIENT PAUSE: what is paused and until when.
    pub pause: ClientPause,
    /// Per-command statistics, indexed by command slot (the command
    /// table's; sized by the first [`Server::command_stats`] call), one
    /// table per thread slot, made when that thread first counts.
    command_stats: PerThread<OnceLock<Box<[CommandStat]>>>,
    /// Error replies by error code (INFO errorstats).
    pub error_stats: Mutex<HashMap<String, u64>>,
    /// The slow log, newest first.
    pub slowlog: Mutex<VecDeque<SlowlogEntry>>,
    /// Next slow log id.
    pub slowlog_next_id: AtomicU64,
    /// Start instant and unix ms.
    pub started: Instant,
    /// See [`Server::started`].
    pub started_unix_ms: u64,
    /// TCP port actually listened on.
    pub port: AtomicU64,
    /// Path of the config file, if started with one.
    pub config_file: Option<String>,
    /// Set to true to stop the server; watched through
    /// [`Server::shutdown_watch`].
    shutdown: watch::Sender<bool>,
    /// Whether a shutdown was requested.
    pub shutting_down: AtomicBool,
    /// Unique id of this run (INFO run_id).
    pub run_id: String,
    /// See [`InfoMarks`].
    pub info_marks: InfoMarks,
    /// `maxmemory`: used memory and eviction.
    pub memory: super::memory::Memory,
    /// The append-only file.
    pub aof: Aof,
    /// The Lua VM, its scripts and function libraries.
    pub scripting: Scripting,
    /// Pub/Sub: who listens where, and delivery.
    pub pubsub: PubSub,
    /// Client-side caching: who read which keys, and invalidations.
    pub tracking: Tracking,
    /// Live boards: LB.WATCH's groups of watchers (issue 18).
    pub live: LiveBoards,
    /// The clients in monitor mode.
    pub monitors: Monitors,
    /// When seasonal boards are due to roll over (issue 17).
    pub season_timers: SeasonTimers,
    /// Whether the cron removes expired keys (DEBUG SET-ACTIVE-EXPIRE).
    pub active_expire: std::sync::atomic::AtomicBool,
    /// Hot copy of `client-output-buffer-limit`'s normal class (clients
    /// that subscribe to nothing, monitors included).
    pub normal_limit: LimitCell,
    /// The TLS configurations in force (see `state::tls`).
    pub tls: super::tls::Tls,
    /// CONFIG SET `port` / `tls-port`'s hand-over to the listener task.
    pub listeners: super::listeners::Listeners,
    /// Replication: role, replicas, the link to the primary.
    pub replication: super::replication::Replication,
}

impl Server {
    /// A server with this configuration and an empty keyspace.
    pub fn new(config: Config, config_file: Option<String>) -> Arc<Self> {
        let (tx, _rx) = watch::channel(false);
        super::clock::set_offset_ms(config.debug_clock_offset_ms);
        let now = unix_ms();
        let pubsub = PubSub::new();
        let tracking = Tracking::new(config.tracking_table_max_keys);
        let memory = super::memory::Memory::new(&config);
        pubsub.set_limit(output_limit(&config, "pubsub"));
        let normal_limit = LimitCell::default();
        normal_limit.set(output_limit(&config, "normal"));
        let replication = super::replication::Replication::new();
        replication.configure(&config);
        let run_id: String = (0..40)
            .map(|_| format!("{:x}", rand::random::<u8>() % 16))
            .collect();
        Arc::new(Server {
            acl: OnceLock::new(),
            aof: Aof::new(&config),
            keyspace: Keyspace::new(config.databases),
            slowlog_threshold_us: AtomicI64::new(config.slowlog_log_slower_than),
            latency_tracking: AtomicBool::new(config.latency_tracking),
            proto_max_bulk_len: AtomicU64::new(config.proto_max_bulk_len),
            query_buffer_limit: AtomicU64::new(config.client_query_buffer_limit),
            park_spin_us: AtomicU64::new(config.park_spin_us),
            notify_flags: AtomicU32::new(notify_flags(&config)),
            config: RwLock::new(config),
            clients: DashMap::new(),
            next_client_id: AtomicU64::new(1),
            blocked_clients: AtomicUsize::new(0),
            blocked_on: Mutex::new(HashMap::new()),
            turn_taken: tokio::sync::Notify::new(),
            stats: Stats::default(),
            command_stats: PerThread::default(),
            error_stats: Mutex::new(HashMap::new()),
            slowlog: Mutex::new(VecDeque::new()),
            slowlog_next_id: AtomicU64::new(0),
            started: Instant::now(),
            pause: ClientPause::default(),
            started_unix_ms: now,
            port: AtomicU64::new(0),
            config_file,
            shutdown: tx,
            shutting_down: AtomicBool::new(false),
            run_id,
            info_marks: InfoMarks::default(),
            memory,
            scripting: Scripting::new(),
            pubsub,
            tracking,
            live: LiveBoards::new(),
            monitors: Monitors::new(),
            season_timers: SeasonTimers::default(),
            active_expire: std::sync::atomic::AtomicBool::new(true),
            normal_limit,
            tls: super::tls::Tls::default(),
            listeners: super::listeners::Listeners::default(),
            replication,
        })
    }

    /// This thread's per-command statistics, for a table of `slots`
    /// commands (where it counts).
    pub fn command_stats(&self, slots: usize) -> &[CommandStat] {
        self.command_stats
            .local()
            .get_or_init(|| (0..slots).map(|_| CommandStat::default()).collect())
    }

    /// Command slot `id`'s counts summed over the threads.
    pub fn command_totals(&self, id: usize) -> CommandTotals {
        let mut t = CommandTotals::default();
        for s in self.command_stat_tables().filter_map(|table| table.get(id)) {
            t.calls += s.calls.load(Ordering::Relaxed);
            t.usec += s.usec.load(Ordering::Relaxed);
            t.failed += s.failed.load(Ordering::Relaxed);
            t.rejected += s.rejected.load(Ordering::Relaxed);
        }
        t
    }

    /// Command slot `id`'s latency histograms summed over the threads.
    pub fn command_latency(&self, id: usize) -> super::latency::Counts {
        let mut counts = super::latency::Counts::default();
        for s in self.command_stat_tables().filter_map(|table| table.get(id)) {
            if let Some(h) = s.latency.get() {
                counts.add(h);
            }
        }
        counts
    }

    /// Every thread's per-command statistics made so far.
    pub fn command_stat_tables(&self) -> impl Iterator<Item = &[CommandStat]> {
        self.command_stats
            .iter()
            .filter_map(|t| t.get().map(|b| &b[..]))
    }

    /// A new, never reused client id.
    pub fn next_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }

    /// After keys of database `db` were removed because they expired (their
    /// shard still locked, so the AOF logs the DELs in the order of the
    /// changes): tracking invalidations and the AOF. Whoever found them
    /// raised `expired`.
    pub fn removed_expired(&self, db: usize, keys: Vec<bytes::Bytes>) {
        if self.tracking.active() {
            self.tracking.invalidate(self, &keys, None);
        }
        super::journal::feed_expired(&self.aof, db, keys);
    }

    /// Copies hot configuration values after a CONFIG SET.
    pub fn refresh_hot_config(&self) {
        let c = self.config.read();
        self.slowlog_threshold_us
            .store(c.slowlog_log_slower_than, Ordering::Relaxed);
        self.latency_tracking
            .store(c.latency_tracking, Ordering::Relaxed);
        self.proto_max_bulk_len
            .store(c.proto_max_bulk_len, Ordering::Relaxed);
        self.query_buffer_limit
            .store(c.client_query_buffer_limit, Ordering::Relaxed);
        self.park_spin_us.store(c.park_spin_us, Ordering::Relaxed);
        self.notify_flags.store(notify_flags(&c), Ordering::Relaxed);
        self.pubsub.set_limit(output_limit(&c, "pubsub"));
        self.normal_limit.set(output_limit(&c, "normal"));
        self.tracking.set_max_keys(c.tracking_table_max_keys);
        super::clock::set_offset_ms(c.debug_clock_offset_ms);
        self.memory.configure(&c);
        self.replication.configure(&c);
        self.aof
            .set_timestamps(c.param("aof-timestamp-enabled") == "yes");
    }

    /// The output limit of client `c`: the `pubsub` class while it
    /// subscribes to something, else `normal` (as Redis classes monitors).
    pub fn output_limit_of(&self, c: &ClientInfo) -> OutputLimit {
        if c.is_subscriber() {
            self.pubsub.limit()
        } else {
            self.normal_limit.get()
        }
    }

    /// Called by a worker with nothing left to run, before it sleeps:
    /// spins for `park-spin-us`. Requests that arrive meanwhile then find
    /// it awake, so the sender does not pay for waking it (on one machine,
    /// the client's own CPU time); they wait for the spin's end instead.
    pub fn spin_before_park(&self) {
        let us = self.park_spin_us.load(Ordering::Relaxed);
        if us == 0 {
            return;
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_micros(us) {
            std::hint::spin_loop();
        }
    }

    /// Wakes client `id` (a postponed client whose turn came).
    pub fn wake_client(&self, id: Option<u64>) {
        if let Some(c) = id.and_then(|id| self.clients.get(&id)) {
            c.wake.notify_one();
        }
    }

    /// Asks every connection and the listener to stop.
    pub fn request_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.scripting.abort();
        let _ = self.shutdown.send(true);
        // A connection waiting for its next request listens to its own
        // wake, not to `shutdown` (see `server::connection`); one added
        // after this walk sees `shutting_down` before it waits.
        for c in self.clients.iter() {
            c.wake.notify_one();
        }
    }

    /// A receiver whose `changed()` completes once shutdown is requested,
    /// including when it already was: a plain `subscribe` marks the
    /// current value seen, so a loop that subscribed just after a SIGTERM
    /// would wait forever.
    pub fn shutdown_watch(&self) -> watch::Receiver<bool> {
        let mut rx = self.shutdown.subscribe();
        if *rx.borrow() {
            rx.mark_changed();
        }
        rx
    }

    /// Registers client `id` as waiting on `keys` for a value of type
    /// `kind` (`Value::type_name`: "list", "zset", ...; "" for any).
    /// Called by the blocking handler while it still holds the keys' shard
    /// locks, so no write to them can slip between its check and this
    /// registration.
    pub fn block_client(
        &self,
        id: u64,
        keys: &[(usize, bytes::Bytes)],
        kind: &'static str,
        group: Option<&[u8]>,
    ) {
        let group = group.map(bytes::Bytes::copy_from_slice);
        let mut m = self.blocked_on.lock();
        for k in keys {
            m.entry(k.clone())
                .or_default()
                .push((id, kind, group.clone()));
        }
        self.blocked_clients.fetch_add(1, Ordering::SeqCst);
    }

    /// Removes client `id` from the waiters of `keys`.
    pub fn unblock_client(&self, id: u64, keys: &[(usize, bytes::Bytes)]) {
        let mut m = self.blocked_on.lock();
        for k in keys {
            if let Some(v) = m.get_mut(k) {
                v.retain(|&(c, _, _)| c != id);
                if v.is_empty() {
                    m.remove(k);
                }
            }
        }
        self.blocked_clients.fetch_sub(1, Ordering::SeqCst);
    }

    /// The client that has waited longest on `key` of database `db` for a
    /// value of type `kind` (`None`: of any type), if any waits on it
    /// (blocked clients are served in the order they blocked; a BLPOP
    /// behind a BZPOPMIN on a key that holds a list is first for it, as in
    /// Redis).
    /// `group`: the XREADGROUP consumer group in whose line to look (the
    /// waiters of other groups and plain XREADs take nothing from it).
    pub fn first_waiter(
        &self,
        db: usize,
        key: &[u8],
        kind: Option<&str>,
        group: Option<&[u8]>,
    ) -> Option<u64> {
        if self.blocked_clients.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let m = self.blocked_on.lock();
        m.get(&(db, bytes::Bytes::copy_from_slice(key)))
            .and_then(|ids| {
                ids.iter().find(|(_, k, g)| {
                    kind.is_none_or(|want| k.is_empty() || *k == want) && g.as_deref() == group
                })
            })
            .map(|&(id, _, _)| id)
    }

    /// Wakes the clients waiting on keys that just changed.
    pub fn signal_ready(&self, ready: &[(usize, bytes::Bytes)]) {
        self.wake_waiters(ready, |_| {});
    }

    /// [`Server::signal_ready`], handing each client woken to `woken`.
    pub fn wake_waiters(
        &self,
        ready: &[(usize, bytes::Bytes)],
        mut woken: impl FnMut(&Arc<ClientInfo>),
    ) {
        let m = self.blocked_on.lock();
        for k in ready {
            if let Some(ids) = m.get(k) {
                for (id, _, _) in ids {
                    if let Some(c) = self.clients.get(id) {
                        // (Before the wake: the caller reads its turns.)
                        woken(c.value());
                        c.wake.notify_one();
                    }
                }
            }
        }
    }

    /// Records that blocked client `c` took its turn after a wake.
    pub fn took_turn(&self, c: &ClientInfo) {
        c.turns.fetch_add(1, Ordering::Release);
        self.turn_taken.notify_waiters();
    }

    /// Counts an error reply under its code.
    pub fn count_error(&self, code: &str) {
        self.stats
            .total_error_replies
            .fetch_add(1, Ordering::Relaxed);
        let mut m = self.error_stats.lock();
        *m.entry(code.to_string()).or_insert(0) += 1;
    }

    /// Adds an entry to the slow log, trimming it to `slowlog-max-len`.
    pub fn slowlog_push(&self, duration_us: u64, args: &[&[u8]], addr: &str, name: &[u8]) {
        let max = self.config.read().slowlog_max_len as usize;
        // Like Redis: at most 32 arguments, each at most 128 bytes.
        let mut kept: Vec<Vec<u8>> = Vec::new();
        for (i, a) in args.iter().enumerate() {
            if i == 31 && args.len() > 32 {
                kept.push(format!("... ({} more arguments)", args.len() - 31).into_bytes());
                break;
            }
            if a.len() > 128 {
                let mut v = a[..128].to_vec();
                v.extend_from_slice(format!("... ({} more bytes)", a.len() - 128).as_bytes());
                kept.push(v);
            } else {
                kept.push(a.to_vec());
            }
        }
        let entry = SlowlogEntry {
            id: self.slowlog_next_id.fetch_add(1, Ordering::Relaxed),
            time_s: unix_ms() / 1000,
            duration_us,
            args: kept,
            addr: addr.to_string(),
            name: name.to_vec(),
        };
        let mut log = self.slowlog.lock();
        log.push_front(entry);
        while log.len() > max {
            log.pop_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loop that subscribes after the shutdown request (a SIGTERM just
    /// after "Ready to accept connections") still sees it.
    #[test]
    fn a_watch_taken_after_the_request_still_sees_it() {
        let server = Server::new(Config::default(), None);
        let early = server.shutdown_watch();
        assert!(!early.has_changed().unwrap_or(true));
        server.request_shutdown();
        let late = server.shutdown_watch();
        assert!(early.has_changed().unwrap_or(false));
        assert!(late.has_changed().unwrap_or(false));
        assert!(*late.borrow());
    }
}
