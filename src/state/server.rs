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
use super::pubsub::PubSub;
use super::tracking::Tracking;
use super::watch::LiveBoards;
use crate::engine::Keyspace;
use crate::scripting::Scripting;

/// Calls, time and errors of one command (INFO commandstats).
#[derive(Debug, Default)]
pub struct CommandStat {
    pub calls: AtomicU64,
    pub usec: AtomicU64,
    pub failed: AtomicU64,
    pub rejected: AtomicU64,
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

/// Server-wide counters (INFO stats).
#[derive(Debug, Default)]
pub struct Stats {
    pub connections_received: AtomicU64,
    pub commands_processed: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub total_error_replies: AtomicU64,
    pub unexpected_error_replies: AtomicU64,
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

/// Everything connections share.
pub struct Server {
    /// All the data.
    pub keyspace: Keyspace,
    /// Current configuration.
    pub config: RwLock<Config>,
    /// Hot copies of configuration read on every command.
    pub slowlog_threshold_us: AtomicI64,
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
    /// Who waits on which (db, key), in the order they blocked.
    pub blocked_on: Mutex<HashMap<(usize, bytes::Bytes), Vec<u64>>>,
    /// Counters.
    pub stats: Stats,
    /// Per-command statistics, indexed by command slot (the command
    /// table's; sized by the first [`Server::command_stats`] call).
    command_stats: OnceLock<Box<[CommandStat]>>,
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
    /// Set to true to stop the server.
    pub shutdown: watch::Sender<bool>,
    /// Whether a shutdown was requested.
    pub shutting_down: AtomicBool,
    /// Unique id of this run (INFO run_id).
    pub run_id: String,
    /// See [`InfoMarks`].
    pub info_marks: InfoMarks,
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
    /// Hot copy of `client-output-buffer-limit`'s normal class (clients
    /// that subscribe to nothing, monitors included).
    pub normal_limit: LimitCell,
}

impl Server {
    /// A server with this configuration and an empty keyspace.
    pub fn new(config: Config, config_file: Option<String>) -> Arc<Self> {
        let (tx, _rx) = watch::channel(false);
        let now = unix_ms();
        let pubsub = PubSub::new();
        let tracking = Tracking::new(config.tracking_table_max_keys);
        pubsub.set_limit(output_limit(&config, "pubsub"));
        let normal_limit = LimitCell::default();
        normal_limit.set(output_limit(&config, "normal"));
        let run_id: String = (0..40)
            .map(|_| format!("{:x}", rand::random::<u8>() % 16))
            .collect();
        Arc::new(Server {
            aof: Aof::new(&config),
            keyspace: Keyspace::new(config.databases),
            slowlog_threshold_us: AtomicI64::new(config.slowlog_log_slower_than),
            proto_max_bulk_len: AtomicU64::new(config.proto_max_bulk_len),
            query_buffer_limit: AtomicU64::new(config.client_query_buffer_limit),
            park_spin_us: AtomicU64::new(config.park_spin_us),
            notify_flags: AtomicU32::new(notify_flags(&config)),
            config: RwLock::new(config),
            clients: DashMap::new(),
            next_client_id: AtomicU64::new(1),
            blocked_clients: AtomicUsize::new(0),
            blocked_on: Mutex::new(HashMap::new()),
            stats: Stats::default(),
            command_stats: OnceLock::new(),
            error_stats: Mutex::new(HashMap::new()),
            slowlog: Mutex::new(VecDeque::new()),
            slowlog_next_id: AtomicU64::new(0),
            started: Instant::now(),
            started_unix_ms: now,
            port: AtomicU64::new(0),
            config_file,
            shutdown: tx,
            shutting_down: AtomicBool::new(false),
            run_id,
            info_marks: InfoMarks::default(),
            scripting: Scripting::new(),
            pubsub,
            tracking,
            live: LiveBoards::new(),
            monitors: Monitors::new(),
            normal_limit,
        })
    }

    /// The per-command statistics of a table of `slots` commands.
    pub fn command_stats(&self, slots: usize) -> &[CommandStat] {
        self.command_stats
            .get_or_init(|| (0..slots).map(|_| CommandStat::default()).collect())
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
        self.proto_max_bulk_len
            .store(c.proto_max_bulk_len, Ordering::Relaxed);
        self.query_buffer_limit
            .store(c.client_query_buffer_limit, Ordering::Relaxed);
        self.park_spin_us.store(c.park_spin_us, Ordering::Relaxed);
        self.notify_flags.store(notify_flags(&c), Ordering::Relaxed);
        self.pubsub.set_limit(output_limit(&c, "pubsub"));
        self.normal_limit.set(output_limit(&c, "normal"));
        self.tracking.set_max_keys(c.tracking_table_max_keys);
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

    /// Asks every connection and the listener to stop.
    pub fn request_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
        self.scripting.abort();
        let _ = self.shutdown.send(true);
    }

    /// Registers client `id` as waiting on `keys`. Called by the blocking
    /// handler while it still holds the keys' shard locks, so no write to
    /// them can slip between its check and this registration.
    pub fn block_client(&self, id: u64, keys: &[(usize, bytes::Bytes)]) {
        let mut m = self.blocked_on.lock();
        for k in keys {
            m.entry(k.clone()).or_default().push(id);
        }
        self.blocked_clients.fetch_add(1, Ordering::SeqCst);
    }

    /// Removes client `id` from the waiters of `keys`.
    pub fn unblock_client(&self, id: u64, keys: &[(usize, bytes::Bytes)]) {
        let mut m = self.blocked_on.lock();
        for k in keys {
            if let Some(v) = m.get_mut(k) {
                v.retain(|&c| c != id);
                if v.is_empty() {
                    m.remove(k);
                }
            }
        }
        self.blocked_clients.fetch_sub(1, Ordering::SeqCst);
    }

    /// The client that has waited longest on `key` of database `db`, if any
    /// waits on it (blocked clients are served in the order they blocked).
    pub fn first_waiter(&self, db: usize, key: &[u8]) -> Option<u64> {
        if self.blocked_clients.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let m = self.blocked_on.lock();
        m.get(&(db, bytes::Bytes::copy_from_slice(key)))
            .and_then(|ids| ids.first().copied())
    }

    /// Wakes the clients waiting on keys that just changed.
    pub fn signal_ready(&self, ready: &[(usize, bytes::Bytes)]) {
        let m = self.blocked_on.lock();
        for k in ready {
            if let Some(ids) = m.get(k) {
                for id in ids {
                    if let Some(c) = self.clients.get(id) {
                        c.wake.notify_one();
                    }
                }
            }
        }
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
