//! Replication state that commands read and the network side drives: the
//! role (primary, or replica of a host and port), the replicas attached
//! to this server with their acknowledged offsets, the link to this
//! server's own primary, and what a connection asked for (SYNC / PSYNC,
//! WAIT). The stream itself is `journal::backlog`; the sockets are
//! `server::replication`'s.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use super::config::Config;
use super::journal::ReplSnapshot;
use tokio::sync::watch;

/// A replica's state, as INFO's slaveN lines name it.
pub const WAIT_BGSAVE: u8 = 0;
/// The RDB is being sent.
pub const SEND_BULK: u8 = 1;
/// Receiving the stream.
pub const ONLINE: u8 = 2;

/// One replica attached to this server.
#[derive(Debug)]
pub struct ReplicaInfo {
    /// Its client id.
    pub id: u64,
    /// Its address (REPLCONF ip-address, or the connection's).
    pub ip: String,
    /// REPLCONF listening-port.
    pub port: u64,
    /// [`WAIT_BGSAVE`], [`SEND_BULK`] or [`ONLINE`].
    pub state: AtomicU8,
    /// The offset it acknowledged (REPLCONF ACK).
    pub ack_offset: AtomicU64,
    /// Unix ms of its last ACK.
    pub last_ack_ms: AtomicU64,
}

impl ReplicaInfo {
    /// INFO's name for its state.
    pub fn state_name(&self) -> &'static str {
        match self.state.load(Ordering::Relaxed) {
            WAIT_BGSAVE => "wait_bgsave",
            SEND_BULK => "send_bulk",
            _ => "online",
        }
    }
}

/// This server's own primary (REPLICAOF host port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterAddr {
    pub host: String,
    pub port: u16,
}

/// The link to the primary, as INFO and ROLE report it.
#[derive(Debug, Default, Clone)]
pub struct LinkStatus {
    /// `master_link_status:up`.
    pub up: bool,
    /// A full sync is being received.
    pub sync_in_progress: bool,
    /// When the last byte came from the primary.
    pub last_io: Option<Instant>,
    /// When the link went down (for `master_link_down_since_seconds`).
    pub down_since: Option<Instant>,
    /// ROLE's state: connect, connecting, sync, connected.
    pub state: &'static str,
    /// Bytes of the RDB expected (-1 with the EOF mark) and read so far.
    pub sync_size: i64,
    pub sync_read: u64,
}

/// FAILOVER's progress (INFO `master_failover_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailoverState {
    /// No failover.
    #[default]
    None,
    /// Writes paused; waiting for a replica to acknowledge the offset.
    WaitForSync,
    /// This server became a replica of the target and sends it
    /// `PSYNC <id> <offset> FAILOVER`.
    InProgress,
}

impl FailoverState {
    /// INFO's name for it.
    pub fn name(self) -> &'static str {
        match self {
            FailoverState::None => "no-failover",
            FailoverState::WaitForSync => "waiting-for-sync",
            FailoverState::InProgress => "failover-in-progress",
        }
    }
}

/// A FAILOVER under way.
#[derive(Debug, Clone, Default)]
pub struct Failover {
    pub state: FailoverState,
    /// TO host port, or the replica found caught up.
    pub target: Option<MasterAddr>,
    /// TIMEOUT's end.
    pub end: Option<Instant>,
    /// FORCE: at the timeout, fail over to the target anyway.
    pub force: bool,
}

/// What SYNC or PSYNC asked for: the connection becomes a replica.
#[derive(Debug, Clone)]
pub struct SyncRequest {
    /// PSYNC's replication id (`?` for none); SYNC: `None`.
    pub replid: Option<String>,
    /// PSYNC's offset (the replica's offset plus one).
    pub offset: i64,
}

/// What a connection said about itself in REPLCONF, and what it waits for.
#[derive(Debug, Default)]
pub struct ReplClient {
    /// REPLCONF listening-port.
    pub listening_port: u64,
    /// REPLCONF ip-address.
    pub ip_address: Option<String>,
    /// REPLCONF capa eof.
    pub capa_eof: bool,
    /// REPLCONF capa psync2.
    pub capa_psync2: bool,
    /// SYNC / PSYNC was received: the connection hands itself over.
    pub sync: Option<SyncRequest>,
    /// The replication offset after this client's last write (WAIT
    /// waits for it, as Redis's `woff`).
    pub woff: u64,
    /// WAIT: (offset, replicas wanted, deadline).
    pub wait: Option<(u64, u64, Option<Instant>)>,
    /// This is the link from this server's primary: its commands apply
    /// whatever `replica-read-only` says, with expiry off, and no reply.
    pub is_master: bool,
}

/// One full sync's snapshot, shared by the replicas that asked for it.
#[derive(Debug)]
pub struct FullSyncJob {
    /// Sent to the replicas' sockets (`$EOF:`) rather than from the
    /// saved file (`$<len>`).
    pub diskless: bool,
    /// The offset when the first replica asked: the snapshot is at or
    /// after it, so a replica joining pins the backlog there.
    pub pin_at: u64,
    /// Replicas that joined after the first.
    pub joined: AtomicU64,
    /// The snapshot, once taken.
    pub result: watch::Sender<Option<ReplSnapshot>>,
}

impl FullSyncJob {
    /// A job the first replica starts at offset `pin_at`.
    pub fn new(diskless: bool, pin_at: u64) -> Self {
        FullSyncJob {
            diskless,
            pin_at,
            joined: AtomicU64::new(0),
            result: watch::channel(None).0,
        }
    }
}

/// The server's replication state (`Server::replication`).
pub struct Replication {
    /// `Some`: this server is a replica of that primary.
    pub master: Mutex<Option<MasterAddr>>,
    /// Hot copy of `master.is_some()`.
    is_replica: AtomicBool,
    /// Bumped by every REPLICAOF: a link task of an older one stops.
    pub generation: watch::Sender<u64>,
    /// The link to the primary.
    pub link: Mutex<LinkStatus>,
    /// Offset of the stream applied (a replica's `slave_repl_offset`).
    pub applied: AtomicU64,
    /// The replicas attached.
    pub replicas: Mutex<Vec<Arc<ReplicaInfo>>>,
    /// Bumped at every ACK (WAIT waits on it).
    pub acks: watch::Sender<u64>,
    /// INFO sync_full, sync_partial_ok, sync_partial_err.
    pub sync_full: AtomicU64,
    pub sync_partial_ok: AtomicU64,
    pub sync_partial_err: AtomicU64,
    /// The full sync being prepared: replicas asking for one meanwhile
    /// join it and share its snapshot (`repl-diskless-sync-delay` and
    /// `-max-replicas` let them gather before a diskless one starts).
    pub full_job: Mutex<Option<Arc<FullSyncJob>>>,
    /// A replica is loading its primary's RDB (-LOADING).
    pub loading: AtomicBool,
    /// Hot copies: `min-replicas-to-write`, `min-replicas-max-lag`,
    /// `replica-read-only`, `replica-serve-stale-data`.
    pub min_to_write: AtomicU64,
    pub max_lag: AtomicU64,
    pub read_only: AtomicBool,
    pub serve_stale: AtomicBool,
    /// FAILOVER's state.
    pub failover: Mutex<Failover>,
}

impl Default for Replication {
    fn default() -> Self {
        Self::new()
    }
}

impl Replication {
    /// A primary without replicas.
    pub fn new() -> Self {
        Replication {
            master: Mutex::new(None),
            is_replica: AtomicBool::new(false),
            generation: watch::channel(0).0,
            link: Mutex::new(LinkStatus::default()),
            applied: AtomicU64::new(0),
            replicas: Mutex::new(Vec::new()),
            acks: watch::channel(0).0,
            sync_full: AtomicU64::new(0),
            sync_partial_ok: AtomicU64::new(0),
            sync_partial_err: AtomicU64::new(0),
            full_job: Mutex::new(None),
            loading: AtomicBool::new(false),
            min_to_write: AtomicU64::new(0),
            max_lag: AtomicU64::new(10),
            read_only: AtomicBool::new(true),
            serve_stale: AtomicBool::new(true),
            failover: Mutex::new(Failover::default()),
        }
    }

    /// Takes the hot copies from the configuration.
    pub fn configure(&self, c: &Config) {
        let num = |n: &str| c.param(n).parse::<u64>().unwrap_or(0);
        self.min_to_write
            .store(num("min-replicas-to-write"), Ordering::Relaxed);
        self.max_lag
            .store(num("min-replicas-max-lag"), Ordering::Relaxed);
        self.read_only
            .store(c.param("replica-read-only") == "yes", Ordering::Relaxed);
        self.serve_stale.store(
            c.param("replica-serve-stale-data") == "yes",
            Ordering::Relaxed,
        );
    }

    /// Why a write is refused now: NOREPLICAS on a primary short of good
    /// replicas. (READONLY is the dispatcher's, which knows the client.)
    /// `now_ms` is asked for only under `min-replicas-to-write`.
    pub fn refuse_write(&self, now_ms: impl FnOnce() -> u64) -> Option<&'static str> {
        let min = self.min_to_write.load(Ordering::Relaxed);
        if min == 0 || self.is_replica() {
            return None;
        }
        let lag = self.max_lag.load(Ordering::Relaxed);
        if (self.good_replicas(now_ms(), lag) as u64) < min {
            return Some("NOREPLICAS Not enough good replicas to write.");
        }
        None
    }

    /// Whether this server is a replica.
    pub fn is_replica(&self) -> bool {
        self.is_replica.load(Ordering::Acquire)
    }

    /// REPLICAOF: sets (or with `None`, clears) the primary and tells the
    /// link task. Returns whether anything changed.
    pub fn set_master(&self, addr: Option<MasterAddr>) -> bool {
        let mut m = self.master.lock();
        if *m == addr {
            return false;
        }
        self.is_replica.store(addr.is_some(), Ordering::Release);
        *m = addr;
        let mut l = self.link.lock();
        *l = LinkStatus {
            state: "connect",
            down_since: Some(Instant::now()),
            sync_size: -1,
            ..LinkStatus::default()
        };
        drop(l);
        drop(m);
        self.generation.send_modify(|g| *g += 1);
        true
    }

    /// Replicas whose last ACK is at most `max_lag` seconds old
    /// (`min-replicas-max-lag`), among those online.
    pub fn good_replicas(&self, now_ms: u64, max_lag: u64) -> usize {
        self.replicas
            .lock()
            .iter()
            .filter(|r| {
                r.state.load(Ordering::Relaxed) == ONLINE
                    && now_ms.saturating_sub(r.last_ack_ms.load(Ordering::Relaxed))
                        <= max_lag * 1000
            })
            .count()
    }

    /// Online replicas that acknowledged at least `offset`.
    pub fn acked(&self, offset: u64) -> u64 {
        self.replicas
            .lock()
            .iter()
            .filter(|r| {
                r.state.load(Ordering::Relaxed) == ONLINE
                    && r.ack_offset.load(Ordering::Relaxed) >= offset
            })
            .count() as u64
    }

    /// Records an ACK from replica `id`.
    pub fn ack(&self, id: u64, offset: u64, now_ms: u64) {
        if let Some(r) = self.replicas.lock().iter().find(|r| r.id == id) {
            r.ack_offset.fetch_max(offset, Ordering::Relaxed);
            r.last_ack_ms.store(now_ms, Ordering::Relaxed);
        }
        self.acks.send_modify(|n| *n += 1);
    }
}
