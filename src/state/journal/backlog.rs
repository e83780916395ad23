//! The replication backlog: the second consumer of the journal's feed.
//!
//! A primary with a backlog (created when its first replica attaches, as
//! Redis does) writes every change into it in the form the AOF gets it
//! ([`super::encode::emit`]: SELECT when the database changes, relative
//! expiries made absolute, transactions and scripts' effects in
//! MULTI/EXEC), under the feed's mutex, so the replication stream's order
//! is the AOF's order, which is the apply order. `end` is
//! `master_repl_offset`; the buffer holds the last bytes up to it.
//!
//! A replica does not emit its own changes: the bytes its primary sent
//! are appended as they came ([`Backlog::append_raw`]), so a chained
//! replica receives the primary's stream as it is, at the same offsets.
//!
//! Who sends the bytes (the connection of each replica) lives in
//! `server::replication`; this module knows no socket.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::watch;

use super::encode::{self, Group};
use super::Stream;

/// The replication ids and the bytes of the stream.
#[derive(Debug)]
pub struct BacklogInner {
    /// The stream: its last bytes, and the database its last command ran in.
    pub(crate) stream: Stream,
    /// `master_repl_offset`: bytes ever written to the stream.
    pub end: u64,
    /// `repl_backlog_active`: a backlog exists.
    pub active: bool,
    /// `repl-backlog-size`.
    pub size: u64,
    /// `master_replid`.
    pub replid: String,
    /// `master_replid2`: the id this server had before its last promotion.
    pub replid2: String,
    /// `second_repl_offset`: up to which offset `replid2` is valid (-1: none).
    pub second_offset: i64,
    /// Offsets replicas still need (their next byte minus one), by client
    /// id: the buffer is not cut past the lowest.
    pub pins: HashMap<u64, u64>,
}

impl BacklogInner {
    /// Offset of the first byte held (`repl_backlog_first_byte_offset`).
    pub fn first_byte(&self) -> u64 {
        self.end - self.stream.buf.len() as u64 + 1
    }

    /// `repl_backlog_histlen`.
    pub fn histlen(&self) -> u64 {
        self.stream.buf.len() as u64
    }

    /// The bytes after offset `from` (exclusive), if still held.
    pub fn since(&self, from: u64) -> Option<&[u8]> {
        let start = self.end - self.stream.buf.len() as u64;
        if from < start || from > self.end {
            return None;
        }
        self.stream.buf.get((from - start) as usize..)
    }

    /// Whether a replica asking for the bytes from `psync_offset` (its
    /// offset plus one) with `replid` can continue (Redis's
    /// `primaryTryPartialResynchronization` rules).
    pub fn can_continue(&self, replid: &str, psync_offset: u64) -> bool {
        let id_ok = replid == self.replid
            || (replid == self.replid2 && (psync_offset as i64) <= self.second_offset);
        if !id_ok || !self.active {
            return false;
        }
        let start = self.end - self.stream.buf.len() as u64;
        psync_offset > start && psync_offset <= self.end + 1
    }

    /// Cuts the bytes no replica needs beyond the backlog's size, and
    /// gives back the room a lagging replica (or a burst of writes) made
    /// the buffer grow to once it is no longer needed, so that the memory
    /// a catching-up replica took returns to the allocator.
    fn trim(&mut self) {
        let len = self.stream.buf.len() as u64;
        let keep_min = self
            .pins
            .values()
            .min()
            .map(|&p| self.end.saturating_sub(p))
            .unwrap_or(0);
        let keep = self.size.max(keep_min).max(1);
        // Cut only when well past the size: one move per `size` bytes.
        let room = keep.saturating_mul(2).max(keep + (1 << 16));
        if len > room {
            let cut = (len - keep) as usize;
            self.stream.buf.drain(..cut);
        }
        if self.stream.buf.capacity() as u64 > room.saturating_mul(2) {
            self.stream.buf.shrink_to(room as usize);
        }
    }

    /// Bytes the stream's buffer holds beyond `repl-backlog-size`: what
    /// replicas that lag keep (Redis leaves the replication buffer past
    /// the backlog's size out of `maxmemory`).
    fn beyond_size(&self) -> u64 {
        (self.stream.buf.capacity() as u64).saturating_sub(self.size)
    }
}

/// The backlog, one per server (`Aof::backlog`).
pub struct Backlog {
    emitting: AtomicBool,
    pub inner: Mutex<BacklogInner>,
    /// `master_repl_offset`, published when a replica's sender waits for
    /// it ([`Backlog::sender_sleeps`]): the senders sleep on it.
    pub offset: watch::Sender<u64>,
    /// `BacklogInner::end`, readable without the lock: a sender about to
    /// sleep checks it after raising `sender_asleep`.
    end_seen: AtomicU64,
    /// A sender sleeps until the next append. While none does (they are
    /// writing what came before), an append publishes nothing: a
    /// sender wakes once per batch of writes, not once per write.
    sender_asleep: AtomicBool,
    /// [`BacklogInner::beyond_size`] after the last change, readable
    /// without the lock (the maxmemory check reads it).
    beyond: AtomicU64,
}

/// A new random replication id (40 hex characters).
pub fn random_id() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..40)
        .map(|_| char::from(b"0123456789abcdef"[rng.random_range(0..16)]))
        .collect()
}

impl Default for Backlog {
    fn default() -> Self {
        Self::new()
    }
}

impl Backlog {
    /// No backlog yet, a fresh replication id, offset 0.
    pub fn new() -> Self {
        let (offset, _) = watch::channel(0);
        Backlog {
            emitting: AtomicBool::new(false),
            inner: Mutex::new(BacklogInner {
                stream: Stream::default(),
                end: 0,
                active: false,
                size: 1 << 20,
                replid: random_id(),
                replid2: "0".repeat(40),
                second_offset: -1,
                pins: HashMap::new(),
            }),
            offset,
            end_seen: AtomicU64::new(0),
            sender_asleep: AtomicBool::new(false),
            beyond: AtomicU64::new(0),
        }
    }

    /// Trims the stream (see [`BacklogInner::trim`]) and records what it
    /// holds beyond the backlog's size: after every append, and when a
    /// replica's sender moves its pin on.
    pub fn trim(&self, b: &mut BacklogInner) {
        b.trim();
        self.beyond.store(b.beyond_size(), Ordering::Relaxed);
    }

    /// The bytes the stream's buffer holds (its allocation) and
    /// `repl-backlog-size`.
    pub fn held(&self) -> (u64, u64) {
        let b = self.inner.lock();
        (b.stream.buf.capacity() as u64, b.size)
    }

    /// Bytes the replication stream holds beyond `repl-backlog-size`
    /// (INFO `mem_not_counted_for_evict`): not counted against
    /// `maxmemory`, as in Redis.
    pub fn beyond_size(&self) -> u64 {
        self.beyond.load(Ordering::Relaxed)
    }

    /// After an append that moved the end to `end`: wakes the sleeping
    /// senders, if any. (SeqCst, paired with [`Backlog::sender_sleeps`]:
    /// either the sender sees the new end or this sees it asleep.)
    fn appended(&self, end: u64) {
        self.end_seen.store(end, Ordering::SeqCst);
        if self.sender_asleep.load(Ordering::SeqCst)
            && self.sender_asleep.swap(false, Ordering::SeqCst)
        {
            self.offset.send_replace(end);
        }
    }

    /// After `BacklogInner::end` was set (a new history's offset):
    /// publishes it to the senders, asleep or not.
    pub fn end_reset(&self, end: u64) {
        self.end_seen.store(end, Ordering::SeqCst);
        self.offset.send_replace(end);
    }

    /// A replica's sender that sent everything up to `sent` is about to
    /// wait on `offset`: returns false when more came meanwhile (it must
    /// not sleep), true when the next append will wake it.
    pub fn sender_sleeps(&self, sent: u64) -> bool {
        self.sender_asleep.store(true, Ordering::SeqCst);
        self.end_seen.load(Ordering::SeqCst) <= sent
    }

    /// Whether this server's own writes go into the backlog.
    pub fn emitting(&self) -> bool {
        self.emitting.load(Ordering::Acquire)
    }

    /// A primary: creates the backlog if there is none and emits writes
    /// into it from now on. (Called with the feed's mutex held, so that no
    /// write falls between.)
    pub fn start_emitting(&self, size: u64) {
        let mut b = self.inner.lock();
        b.size = size;
        if !b.active {
            b.active = true;
            b.stream.buf.clear();
            b.stream.db = None;
        }
        self.beyond.store(b.beyond_size(), Ordering::Relaxed);
        self.emitting.store(true, Ordering::Release);
    }

    /// `repl-backlog-ttl` passed without replicas: the backlog is freed
    /// and, as Redis does, a new id drawn (no replica can continue an
    /// history this server no longer holds). The offset stays.
    pub fn free(&self) {
        let mut b = self.inner.lock();
        b.active = false;
        b.stream.buf = Vec::new();
        b.stream.db = None;
        b.replid = random_id();
        b.replid2 = "0".repeat(40);
        b.second_offset = -1;
        self.beyond.store(0, Ordering::Relaxed);
        self.emitting.store(false, Ordering::Release);
    }

    /// A replica: this server's writes are not emitted.
    pub fn stop_emitting(&self) {
        self.emitting.store(false, Ordering::Release);
    }

    /// Emits one dispatched command's changes (see `encode::emit`).
    pub(crate) fn emit(&self, db: usize, expired: &[(usize, Bytes)], group: &Group<'_>) {
        let mut b = self.inner.lock();
        let before = b.stream.buf.len();
        encode::emit(&mut b.stream, db, expired, group, encode::Target::Replicas);
        let n = (b.stream.buf.len() - before) as u64;
        if n == 0 {
            return;
        }
        b.end += n;
        self.trim(&mut b);
        let end = b.end;
        drop(b);
        self.appended(end);
    }

    /// Appends bytes as they are: a replica's primary's stream, or a PING
    /// or REPLCONF GETACK of this primary's own (in no database).
    pub fn append_raw(&self, bytes: &[u8]) {
        let mut b = self.inner.lock();
        if !b.active {
            return;
        }
        b.stream.buf.extend_from_slice(bytes);
        b.end += bytes.len() as u64;
        self.trim(&mut b);
        let end = b.end;
        drop(b);
        self.appended(end);
    }

    /// The point a full sync starts from: the id and offset the snapshot
    /// taken now is at. The next command emitted starts with a SELECT (the
    /// replica loading it starts in no known database). Called while every
    /// shard is locked.
    pub fn sync_point(&self) -> (String, u64) {
        let mut b = self.inner.lock();
        b.stream.db = None;
        (b.replid.clone(), b.end)
    }

    /// The offset now (`master_repl_offset`).
    pub fn end(&self) -> u64 {
        self.inner.lock().end
    }
}
