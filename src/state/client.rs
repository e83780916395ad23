//! Client state: what one connection carries between commands (selected
//! database, protocol, auth, name, transaction), and the part of it other
//! connections may see (CLIENT LIST, CLIENT KILL).

use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::Arc;
use std::task::Context;

use futures_util::task::AtomicWaker;
use parking_lot::Mutex;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

pub use super::clock::CommandClock;
use super::outbox::Outbox;
use super::pubsub::{Kind, Subscriptions};
use super::tracking::{ClientTracking, TrackingFlags};

/// `ClientInfo::repl_kind`: an ordinary client.
pub const REPL_NONE: u8 = 0;
/// `ClientInfo::repl_kind`: a replica of this server (flag `S`).
pub const REPL_REPLICA: u8 = 1;
/// `ClientInfo::repl_kind`: this server's primary (flag `M`).
pub const REPL_MASTER: u8 = 2;

/// How other tasks wake a connection ([`ClientInfo::wake`]): a `Notify`
/// for the connection's waits that need one, and for the wait it spends
/// most of its life in, between a reply and the next request, a flag and
/// an `AtomicWaker` ([`Wake::poll_kicked`]). Registering with the `Notify`
/// takes and releases its lock twice (on the wait and when the read wins);
/// at `-P 1` that wait is once a request, about 400 instructions of
/// the server's ~6,000 for a GET.
#[derive(Debug, Default)]
pub struct Wake {
    notify: Notify,
    kicked: AtomicBool,
    idle: AtomicWaker,
}

impl Wake {
    /// Wakes the connection: its current wait, or else its next one.
    pub fn notify_one(&self) {
        self.kicked.store(true, Ordering::SeqCst);
        self.notify.notify_one();
        self.idle.wake();
    }

    /// A wait for [`Wake::notify_one`] (one stored call ends it at once).
    pub fn notified(&self) -> Notified<'_> {
        self.notify.notified()
    }

    /// For a wait polled by hand: registers `cx`'s waker and says whether
    /// [`Wake::notify_one`] was called since the last kick taken here (the
    /// `Notify`'s stored call, if any, is taken with it). A kick another
    /// wait already answered may show once more here: the caller re-checks
    /// why it would wake, as for a `Notify`.
    pub fn poll_kicked(&self, cx: &Context<'_>) -> bool {
        self.idle.register(cx.waker());
        if !self.kicked.load(Ordering::SeqCst) || !self.kicked.swap(false, Ordering::SeqCst) {
            return false;
        }
        let taken = std::pin::pin!(self.notify.notified());
        taken.enable();
        true
    }
}

/// What CLIENT LIST / INFO / KILL can see of a connection.
#[derive(Debug)]
pub struct ClientInfo {
    /// Unique, increasing id.
    pub id: u64,
    /// Peer address `ip:port`.
    pub addr: String,
    /// Local address `ip:port`.
    pub laddr: String,
    /// The socket's file descriptor, -1 when none (CLIENT LIST `fd`).
    pub fd: AtomicI64,
    /// Unix ms of connection.
    pub created_ms: u64,
    /// Unix ms of the last command.
    pub last_cmd_ms: AtomicU64,
    /// Selected database.
    pub db: AtomicUsize,
    /// Name set with CLIENT SETNAME / HELLO SETNAME.
    pub name: Mutex<Vec<u8>>,
    /// The ACL user the connection is authenticated as (CLIENT LIST's
    /// `user=`, CLIENT KILL USER, clients of a deleted user).
    pub user: Mutex<String>,
    /// Library name and version from CLIENT SETINFO.
    pub lib: Mutex<(Vec<u8>, Vec<u8>)>,
    /// Slot of the last command run (see `commands::table`), `usize::MAX`
    /// before the first.
    pub last_cmd: AtomicUsize,
    /// Protocol version, 2 or 3.
    pub resp: AtomicUsize,
    /// Set when the connection must close (CLIENT KILL).
    pub killed: AtomicBool,
    /// Wakes the connection task when it must act (killed, unblocked).
    pub wake: Wake,
    /// Whether CLIENT NO-EVICT is on.
    pub no_evict: AtomicBool,
    /// Bytes read and not yet run (CLIENT LIST `qbuf`).
    pub qbuf: AtomicUsize,
    /// Room left in the read buffer (CLIENT LIST `qbuf-free`).
    pub qbuf_free: AtomicUsize,
    /// Bytes allocated for the client's replies (INFO
    /// `mem_clients_normal`).
    pub obuf: AtomicUsize,
    /// The client's buffers as last counted in the server's total
    /// (`maxmemory-clients`; see [`ClientInfo::buffer_memory`]).
    pub counted_mem: AtomicUsize,
    /// Times the client, blocked, took its turn after a wake (ran its
    /// command again, timed out or went): a client that woke it may go on.
    pub turns: AtomicU64,
    /// Commands in the current MULTI, -1 when none (CLIENT LIST `multi`).
    pub multi: AtomicU64,
    /// Messages other clients send it (Pub/Sub), waiting to be written.
    pub outbox: Outbox,
    /// Channels, patterns and shard channels subscribed to (CLIENT LIST
    /// `sub`, `psub`, `ssub`; the owner's `ClientState` has the names).
    pub subscriptions: [AtomicU32; 3],
    /// Boards watched with LB.WATCH (they make it a subscriber too).
    pub lb_watching: AtomicU32,
    /// CLIENT TRACKING settings others read to invalidate its keys.
    pub tracking: TrackingFlags,
    /// Replication: [`REPL_NONE`], [`REPL_REPLICA`] (a replica of this
    /// server) or [`REPL_MASTER`] (the link from this server's primary).
    pub repl_kind: std::sync::atomic::AtomicU8,
    /// In monitor mode (see `state::monitor`).
    monitor: AtomicBool,
    /// Blocked by a blocking command (CLIENT UNBLOCK may end its wait).
    blocked: AtomicBool,
    /// How CLIENT UNBLOCK asked the wait to end (see [`Unblock`]), 0
    /// when it did not.
    unblock: AtomicU8,
}

/// How CLIENT UNBLOCK ends a blocked client's wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unblock {
    /// As if its timeout had passed.
    Timeout = 1,
    /// With `-UNBLOCKED client unblocked via CLIENT UNBLOCK`.
    Error = 2,
}

impl ClientInfo {
    /// Info for a new connection.
    pub fn new(id: u64, addr: String, laddr: String, now_ms: u64) -> Self {
        ClientInfo {
            id,
            addr,
            laddr,
            fd: AtomicI64::new(-1),
            created_ms: now_ms,
            last_cmd_ms: AtomicU64::new(now_ms),
            db: AtomicUsize::new(0),
            name: Mutex::new(Vec::new()),
            user: Mutex::new(String::from("default")),
            lib: Mutex::new((Vec::new(), Vec::new())),
            last_cmd: AtomicUsize::new(usize::MAX),
            resp: AtomicUsize::new(2),
            killed: AtomicBool::new(false),
            wake: Wake::default(),
            no_evict: AtomicBool::new(false),
            qbuf: AtomicUsize::new(0),
            qbuf_free: AtomicUsize::new(0),
            obuf: AtomicUsize::new(0),
            counted_mem: AtomicUsize::new(0),
            turns: AtomicU64::new(0),
            monitor: AtomicBool::new(false),
            blocked: AtomicBool::new(false),
            unblock: AtomicU8::new(0),
            multi: AtomicU64::new(u64::MAX),
            outbox: Outbox::new(),
            subscriptions: Default::default(),
            lb_watching: AtomicU32::new(0),
            tracking: TrackingFlags::default(),
            repl_kind: std::sync::atomic::AtomicU8::new(REPL_NONE),
        }
    }

    /// Records how many subscriptions of `kind` the client has.
    pub fn set_subscriptions(&self, kind: Kind, n: usize) {
        self.subscriptions[kind as usize].store(n as u32, Ordering::Relaxed);
    }

    /// Subscriptions of `kind` (CLIENT LIST).
    pub fn subscriptions(&self, kind: Kind) -> u32 {
        self.subscriptions[kind as usize].load(Ordering::Relaxed)
    }

    /// Whether the client subscribes to anything (Redis's pubsub class).
    pub fn is_subscriber(&self) -> bool {
        self.subscriptions
            .iter()
            .any(|n| n.load(Ordering::Relaxed) > 0)
            || self.lb_watching.load(Ordering::Relaxed) > 0
    }

    /// Records whether the client is blocked. A `fresh` wait (not a woken
    /// command blocking again) forgets a CLIENT UNBLOCK request that came
    /// too late for the previous one.
    pub fn set_blocked(&self, on: bool, fresh: bool) {
        if fresh {
            self.unblock.store(0, Ordering::Release);
        }
        self.blocked.store(on, Ordering::Release);
    }

    /// Whether the client is blocked (CLIENT LIST flag `b`).
    pub fn is_blocked(&self) -> bool {
        self.blocked.load(Ordering::Acquire)
    }

    /// CLIENT UNBLOCK: asks a blocked client to stop waiting, `how`.
    /// Returns false when it is not blocked (or already asked).
    pub fn request_unblock(&self, how: Unblock) -> bool {
        if !self.is_blocked() {
            return false;
        }
        let asked = self
            .unblock
            .compare_exchange(0, how as u8, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if asked {
            self.wake.notify_one();
        }
        asked
    }

    /// Takes the CLIENT UNBLOCK request made while the client waited.
    pub fn take_unblock(&self) -> Option<Unblock> {
        match self.unblock.swap(0, Ordering::AcqRel) {
            1 => Some(Unblock::Timeout),
            2 => Some(Unblock::Error),
            _ => None,
        }
    }

    /// Bytes the client's buffers hold: its read buffer, its reply buffer
    /// and the messages queued for it (CLIENT LIST `tot-mem` less the
    /// fixed part; INFO `mem_clients_normal` sums them).
    pub fn buffer_memory(&self) -> usize {
        self.qbuf.load(Ordering::Relaxed)
            + self.qbuf_free.load(Ordering::Relaxed)
            + self.obuf.load(Ordering::Relaxed)
            + self.outbox.pending()
    }

    /// Whether `maxmemory-clients` may close the client: not one under
    /// CLIENT NO-EVICT, a replica or the link from this server's primary.
    pub fn evictable(&self) -> bool {
        !self.no_evict.load(Ordering::Relaxed)
            && self.repl_kind.load(Ordering::Relaxed) == REPL_NONE
            && !self.killed.load(Ordering::Relaxed)
    }

    /// Asks the connection to close.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Whether the client is in monitor mode (CLIENT LIST flag `O`).
    pub fn is_monitor(&self) -> bool {
        self.monitor.load(Ordering::Relaxed)
    }

    /// Records whether the client is in monitor mode (`state::monitor`).
    pub fn set_monitor(&self, on: bool) {
        self.monitor.store(on, Ordering::Relaxed);
    }

    /// Closes a client whose pending output went past its
    /// `client-output-buffer-limit`, with Redis's log line.
    pub fn close_for_output_limit(&self) {
        tracing::warn!(
            "Client id={} addr={} laddr={} name={} scheduled to be closed ASAP for overcoming of output buffer limits.",
            self.id,
            self.addr,
            self.laddr,
            String::from_utf8_lossy(&self.name.lock()),
        );
        self.kill();
    }
}

/// CLIENT REPLY mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    /// Normal.
    On,
    /// No replies until CLIENT REPLY ON.
    Off,
    /// No reply for the next command.
    Skip,
    /// The command after CLIENT REPLY SKIP: its reply is dropped.
    SkipNext,
}

/// A queued command of a MULTI block.
#[derive(Debug, Clone)]
pub struct Queued {
    /// The arguments, name first.
    pub args: Vec<Vec<u8>>,
}

/// A client waiting for data on keys (BZPOPMIN and friends).
#[derive(Debug, Clone)]
pub struct BlockState {
    /// The command to run again when a key is ready.
    pub args: Vec<Vec<u8>>,
    /// (db, key) pairs waited on.
    pub keys: Vec<(usize, bytes::Bytes)>,
    /// When to give up and reply with a null; `None` waits forever.
    pub deadline: Option<std::time::Instant>,
}

/// One command's statistics not yet added to the server's (see
/// `ClientState::pending_stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PendingStat {
    /// The command's slot in the command table.
    pub slot: usize,
    pub calls: u64,
    pub usec: u64,
    pub failed: u64,
    pub rejected: u64,
}

/// Per-connection state, owned by the connection task.
#[derive(Debug)]
pub struct ClientState {
    /// Shared, observable part.
    pub info: Arc<ClientInfo>,
    /// Selected database.
    pub db: usize,
    /// Whether AUTH has succeeded (or no password is set).
    pub authenticated: bool,
    /// The ACL user's rules as last read, and the ACL version they were
    /// read at (re-read when a user changes); None before the first
    /// command.
    pub acl_user: Option<(Arc<super::acl::User>, u64)>,
    /// Close the connection once the pending replies are written.
    pub close_after_reply: bool,
    /// CLIENT REPLY mode.
    pub reply_mode: ReplyMode,
    /// Commands queued since MULTI, when in a transaction.
    pub multi: Option<Vec<Queued>>,
    /// A command failed to queue: EXEC must answer EXECABORT.
    pub multi_error: bool,
    /// Flag raised when a WATCHed key changes.
    pub watch_dirty: Arc<AtomicBool>,
    /// WATCHed keys: (db, key, whether it was live at WATCH time, so that
    /// its expiry before EXEC also aborts the transaction).
    pub watched: Vec<(usize, Vec<u8>, bool)>,
    /// Per-command statistics not yet added to the server's, one entry
    /// for each command slot used since the last flush (a batch holds
    /// few distinct commands: a short list, not a table of every slot,
    /// which cost each connection 12 KB zeroed on its first command).
    pub pending_stats: Vec<PendingStat>,
    /// Keyspace hits and misses not yet added to the server's counters.
    pub pending_hits: u64,
    /// See [`ClientState::pending_hits`].
    pub pending_misses: u64,
    /// Calls' latency buckets not yet added to the server's histograms:
    /// (command slot, bucket).
    pub pending_latency: Vec<(u32, u32)>,
    /// Set by a blocking command that found no data.
    pub blocked: Option<BlockState>,
    /// Blocking commands must answer at once (inside EXEC or a script).
    pub deny_blocking: bool,
    /// This client replays a file (the AOF at start-up): what was accepted
    /// once is applied again even where a limit meant for live writes
    /// (`lb-max-meta-bytes`) has since been lowered.
    pub replaying: bool,
    /// A script is running this client's commands (`redis.call`): SORT
    /// then sorts sets it would leave unsorted, and messages the client
    /// publishes to itself wait in [`ClientState::script_pushes`].
    pub in_script: bool,
    /// The running script started over `maxmemory` with nothing left to
    /// evict: its first write, if DENYOOM, fails with OOM (Redis's
    /// `script_oom`).
    pub script_oom: bool,
    /// Whether to note the blocked clients this client's writes wake
    /// ([`ClientState::woken`]): a connection does, to let them take
    /// their turn before its next command, as Redis serves blocked
    /// clients after each command.
    pub await_woken: bool,
    /// The clients the last commands woke, each with its
    /// [`ClientInfo::turns`] when woken.
    pub woken: Vec<(Arc<ClientInfo>, u64)>,
    /// A woken blocked command is running again, its client still
    /// registered as waiting on its keys (so it keeps its place in line if
    /// it blocks again).
    pub rerun: bool,
    /// AOF offset that must be on disk before the pending replies are sent
    /// (`appendfsync always`); 0 when nothing waits.
    pub aof_wait: u64,
    /// Times commands (see [`CommandClock`]).
    pub clock: CommandClock,
    /// What the client subscribes to (Pub/Sub).
    pub pubsub: Subscriptions,
    /// The boards it watches (LB.WATCH).
    pub lb_watches: super::watch::ClientWatches,
    /// Messages for the client published by its own script, written
    /// ahead of the script's reply.
    pub script_pushes: Vec<u8>,
    /// CLIENT TRACKING: the connection's own part.
    pub tracking: ClientTracking,
    /// SCRIPT DEBUG YES/SYNC was asked: Rostrum has no Lua debugger, so the
    /// next script this connection sends is refused rather than run
    /// undebugged (`redis-cli --ldb` ignores SCRIPT DEBUG's reply).
    pub script_debug: bool,
    /// Commands postponed by CLIENT PAUSE (the first one it held, and
    /// every later one of a pipeline already parsed), and when the pause
    /// ends: the connection runs them then (or at CLIENT UNPAUSE), and
    /// reads no further command meanwhile.
    pub postponed: Option<(Vec<Vec<Vec<u8>>>, std::time::Instant)>,
    /// CLIENT NO-TOUCH ON: this client's commands leave keys' access
    /// times (OBJECT IDLETIME) as they were; TOUCH still updates them.
    pub no_touch: bool,
    /// Replication: what REPLCONF said, SYNC / PSYNC, WAIT.
    pub repl: super::replication::ReplClient,
}

impl ClientState {
    /// State for a new connection.
    pub fn new(info: Arc<ClientInfo>, authenticated: bool) -> Self {
        ClientState {
            info,
            db: 0,
            authenticated,
            acl_user: None,
            close_after_reply: false,
            reply_mode: ReplyMode::On,
            multi: None,
            multi_error: false,
            watch_dirty: Arc::new(AtomicBool::new(false)),
            watched: Vec::new(),
            pending_stats: Vec::new(),
            pending_hits: 0,
            pending_misses: 0,
            pending_latency: Vec::new(),
            blocked: None,
            deny_blocking: false,
            replaying: false,
            in_script: false,
            script_oom: false,
            await_woken: false,
            woken: Vec::new(),
            rerun: false,
            clock: CommandClock::new(),
            aof_wait: 0,
            pubsub: Subscriptions::default(),
            lb_watches: Default::default(),
            script_pushes: Vec::new(),
            tracking: ClientTracking::default(),
            script_debug: false,
            postponed: None,
            no_touch: false,
            repl: Default::default(),
        }
    }

    /// The client id.
    pub fn id(&self) -> u64 {
        self.info.id
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Wake as TaskWake, Waker};

    use super::Wake;

    struct Count(AtomicUsize);

    impl TaskWake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_kick_is_seen_once_and_wakes_the_registered_waiter() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let cx = Context::from_waker(&waker);
        let wake = Wake::default();
        assert!(!wake.poll_kicked(&cx));
        wake.notify_one();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(wake.poll_kicked(&cx));
        assert!(!wake.poll_kicked(&cx));
        // The kick took the Notify's stored call with it: a later wait
        // does not end at once.
        let later = std::pin::pin!(wake.notified());
        assert!(!later.enable());
    }

    #[test]
    fn a_kick_before_the_wait_ends_it_at_once() {
        let waker = Waker::noop();
        let cx = Context::from_waker(waker);
        let wake = Wake::default();
        wake.notify_one();
        assert!(wake.poll_kicked(&cx));
        // A Notify wait still sees a call made while it was not waiting.
        wake.notify_one();
        let next = std::pin::pin!(wake.notified());
        assert!(next.enable());
    }
}
