//! The sharded keyspace: every database's keys, their values and expiry
//! times, split across [`SHARD_COUNT`] shards by a hash of the key.
//!
//! A key always lives in the same shard whatever its database, so commands
//! that move a key between databases (MOVE, COPY ... DB) need only that
//! shard, and SWAPDB / FLUSHALL are "lock every shard, then act in each".
//!
//! # Locking order
//! - A command locks every shard it needs **before** it starts, in
//!   ascending shard index, and releases them all when it ends
//!   ([`Keyspace::lock_shards`]); it never locks a shard while holding a
//!   shard of higher index. EXEC and scripts lock all shards in that order
//!   ([`Keyspace::lock_all`]), so they are atomic with respect to every
//!   other command. Hence no cycle and no deadlock.
//! - Shard locks are never held across an `.await`, so a slow client never
//!   holds data hostage.
//! - Keyspace-wide commands that may see keys one shard at a time (SCAN,
//!   DBSIZE, the active expiry cycle) lock one shard, finish with it, and
//!   then lock the next.
//! - Locks taken while a shard is held are leaves: the watch flags are
//!   atomics, and nothing below this module takes a lock.
//!
//! This module knows nothing of RESP, clients or tokio.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use smallvec::SmallVec;

use super::access;
use super::keycapture::{KeyCapture, KeySink};
use super::keytable::KeyTable;
use super::value::Value;

/// Number of shards (a power of two).
pub const SHARD_COUNT: usize = 64;
/// Most keys [`Keyspace::prefetch`] reads ahead at once.
pub const MAX_PREFETCH: usize = 16;
pub(super) const SHARD_SHIFT: u32 = 64 - SHARD_COUNT.trailing_zeros();
// `take_handoff` keeps a shard's index plus one in a byte.
const _: () = assert!(SHARD_COUNT < u8::MAX as usize);

thread_local! {
    /// The last shard this thread write-locked ([`Keyspace::lock_one`])
    /// after another thread had, plus one (0: none since
    /// [`take_handoff`] last looked).
    static HANDOFF: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
    /// This thread's mark, left beside a shard's lock ([`Padded`]) when it
    /// write-locks it (never 0); another while it writes as a guest
    /// ([`as_guest_writer`]).
    static WRITER_MARK: std::cell::Cell<u32> =
        std::cell::Cell::new(NEXT_WRITER_MARK.fetch_add(1, Ordering::Relaxed) & !GUEST_WRITER);
}

/// The next thread's [`WRITER_MARK`].
static NEXT_WRITER_MARK: AtomicU32 = AtomicU32::new(1);
/// Set in a thread's [`WRITER_MARK`] while it writes as a guest (never in
/// its own mark).
const GUEST_WRITER: u32 = 1 << 31;

/// Runs `f` with this thread's writes marked as another writer's than its
/// own (see [`take_handoff`]): for the batches a worker runs for
/// connections of other workers (`server::workers`), so that its own
/// connections writing a shard after them see it taken over, as they
/// would had those batches run on their own worker.
pub fn as_guest_writer<R>(f: impl FnOnce() -> R) -> R {
    struct Own(u32);
    impl Drop for Own {
        fn drop(&mut self) {
            WRITER_MARK.with(|m| m.set(self.0));
        }
    }
    // Its own mark comes back when `f` returns (or unwinds).
    let _own = Own(WRITER_MARK.with(|m| {
        let own = m.get();
        m.set(own | GUEST_WRITER);
        own
    }));
    f()
}

/// The last shard this thread write-locked after another thread had
/// written it (a hand-off: the shard's cache lines move to this core),
/// since the last call, if any. The server moves connections that keep
/// taking one shard over from another worker onto one worker
/// (`server::workers`).
pub fn take_handoff() -> Option<usize> {
    HANDOFF.with(|c| c.replace(0).checked_sub(1).map(usize::from))
}

/// The hasher used for keys, shared by shard selection and the maps.
pub type KeyHasher = ahash::RandomState;

/// A value stored under a key, with its expiry time and access clock.
#[derive(Debug)]
pub struct Entry {
    /// The value.
    pub value: Value,
    /// Absolute expiry time in unix ms, 0 for none.
    expire_at: u64,
    /// The access clock: last access (LRU) or access counter (LFU), see
    /// [`access`](super::access). It fits the padding after `expire_at`, so
    /// the entry stays 48 bytes.
    lru: AtomicU32,
}

impl Entry {
    /// An entry for `value`, without expiry, last accessed at `now_ms`.
    pub(super) fn new(value: Value, now_ms: u64) -> Entry {
        Entry {
            value,
            expire_at: 0,
            lru: AtomicU32::new(access::initial(now_ms)),
        }
    }

    /// The absolute expiry time in unix milliseconds, if any.
    pub fn expire_at(&self) -> Option<u64> {
        (self.expire_at != 0).then_some(self.expire_at)
    }

    /// Seconds since this entry was last read or written (LRU clock).
    pub fn idle_secs(&self, now_ms: u64) -> u64 {
        access::idle_secs(&self.lru, now_ms)
    }

    /// The access frequency (LFU clock): the decayed logarithmic counter.
    pub fn frequency(&self, now_ms: u64) -> u32 {
        access::frequency(&self.lru, now_ms)
    }

    /// Records an access at `now_ms` (what a read or write does unless the
    /// caller asked for no touch, as CLIENT NO-TOUCH or OBJECT do).
    #[inline]
    pub fn touch(&self, now_ms: u64) {
        access::touch(&self.lru, now_ms);
    }

    /// Makes the entry look idle for `secs` seconds (RESTORE ... IDLETIME).
    pub fn set_idle_secs(&self, secs: u64, now_ms: u64) {
        let now = (now_ms / 1000) as u32;
        self.lru.store(
            now.wrapping_sub(secs.min(u32::MAX as u64) as u32),
            Ordering::Relaxed,
        );
    }

    fn touch_lru(&self, now_ms: u64) {
        self.touch(now_ms);
    }

    /// How good a candidate for eviction this entry is under `policy`
    /// (higher: evict first), as Redis's eviction pool ranks keys.
    pub fn eviction_score(&self, policy: Eviction, now_ms: u64) -> u64 {
        match policy {
            Eviction::Lru => self.idle_secs(now_ms),
            Eviction::Lfu => 255 - self.frequency(now_ms).min(255) as u64,
            Eviction::Ttl => u64::MAX - self.expire_at,
            Eviction::Random => access::random_u64(),
        }
    }
}

/// How keys are ranked for eviction (the part of `maxmemory-policy` after
/// `allkeys-` / `volatile-`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// Least recently used first.
    Lru,
    /// Least frequently used first.
    Lfu,
    /// Nearest expiry first (volatile keys only).
    Ttl,
    /// Any.
    Random,
}

/// Expired keys logged in some [`Db`] and not yet taken, over every
/// keyspace of the process: when it is 0, no shard has any to take, and the
/// AOF feed need not look (it runs after every command). A push or take
/// happens under its shard's write lock, so a thread holding that lock sees
/// the shard's own pushes; entries of other keyspaces or shards can only
/// make it look for nothing.
static PENDING_EXPIRED_LOG: AtomicU64 = AtomicU64::new(0);

/// Whether some [`Db`] may hold expired keys not yet taken
/// ([`Db::take_expired`]).
pub fn expired_log_pending() -> bool {
    PENDING_EXPIRED_LOG.load(Ordering::Relaxed) != 0
}

/// The keys of one database that fall into one shard.
#[derive(Debug)]
pub struct Db {
    map: KeyTable,
    /// Keys with an expiry, ordered by expiry time (the active cycle pops
    /// from the front), each named by its slot hash ([`KeyTable::hash`]):
    /// 16 bytes an entry and no copy of the key. An entry `(at, h)` stands
    /// for every key of hash `h` expiring at `at` (two keys share one only
    /// if their 64-bit hashes and expiry times are equal): it is removed
    /// when the last of them goes ([`Db::unindex`]).
    expires: BTreeSet<(u64, u64)>,
    /// Keys with an expiry (what `expires` would count if no two keys
    /// shared an entry).
    expiring: usize,
    /// WATCHed keys and the flags of the transactions watching them.
    watched: HashMap<Bytes, Vec<Arc<AtomicBool>>, KeyHasher>,
    expired_count: u64,
    /// Keys removed because they expired, not yet taken by the AOF (which
    /// writes a DEL for each, so that loading needs no clock).
    expired_log: Vec<Bytes>,
    /// A snapshot's walk over `map` in steps (`keycapture`): every write
    /// to an entry tells it first.
    capture: Option<Box<KeyCapture>>,
    /// The keyspace's record of databases that have held keys, and this
    /// database's bit in it.
    in_use: Arc<DbsInUse>,
    bit: u64,
}

/// The databases of a keyspace that have held a key since it was made:
/// bit `i` for database `i`, bit 63 for every database from 63 on. A
/// superset of the non-empty ones (a bit is never cleared), set by the
/// first key a database of any shard takes, under that shard's write lock
/// (so a reader holding the shard's lock sees it). Eviction's sampling
/// reads it rather than each database's table in every shard it samples
/// (16 databases by default, a cache line or two each).
#[derive(Debug, Default)]
pub struct DbsInUse(AtomicU64);

impl DbsInUse {
    /// The bit of database `db`.
    fn bit(db: usize) -> u64 {
        1 << db.min(63)
    }

    /// Notes that a database of bit `bit` holds a key (a load when it is
    /// known already).
    #[inline]
    fn note(&self, bit: u64) {
        if self.0.load(Ordering::Relaxed) & bit == 0 {
            self.0.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// The numbers, ascending, of the databases among `0..databases` that
    /// may hold keys: those that ever did.
    pub fn dbs(&self, databases: usize) -> impl Iterator<Item = usize> {
        let mask = self.0.load(Ordering::Relaxed);
        let low = (0..databases.min(63)).filter(move |&i| mask & (1 << i) != 0);
        let high = if mask >> 63 != 0 { 63..databases } else { 0..0 };
        low.chain(high)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        PENDING_EXPIRED_LOG.fetch_sub(self.expired_log.len() as u64, Ordering::Relaxed);
        self.finish_capture();
    }
}

/// Puts `value` in an existing entry as [`Db::insert`] does (a fresh
/// access time; the expiry dropped unless `keep_ttl`); the expiry time
/// dropped, which the caller takes out of the index.
fn overwrite(e: &mut Entry, value: Value, keep_ttl: bool, now_ms: u64) -> Option<u64> {
    e.value = value;
    e.touch_lru(now_ms);
    (!keep_ttl && e.expire_at != 0).then(|| std::mem::replace(&mut e.expire_at, 0))
}

impl Db {
    /// Database `index` of a keyspace whose record of databases in use is
    /// `in_use`.
    fn new(hasher: &KeyHasher, index: usize, in_use: &Arc<DbsInUse>) -> Self {
        Db {
            map: KeyTable::new(hasher.clone()),
            expires: BTreeSet::new(),
            expiring: 0,
            watched: HashMap::with_hasher(hasher.clone()),
            expired_count: 0,
            expired_log: Vec::new(),
            capture: None,
            in_use: in_use.clone(),
            bit: DbsInUse::bit(index),
        }
    }

    /// Starts snapshot `id`'s capture of this part in steps: from now on
    /// `sink` gets each key stored now, as it is now, exactly once (see
    /// `keycapture`). An empty part needs none. Replaces (abandons) any
    /// capture left by another snapshot.
    pub fn begin_capture(&mut self, id: u64, sink: Box<dyn KeySink>) {
        self.capture = None;
        self.map.thaw();
        if self.map.is_empty() {
            return;
        }
        // No slot moves under the walk: a key that would make the table
        // grow goes into its spill table until the walk ends (keys spilled
        // by an earlier walk move in first, so the walk's slots are fixed).
        self.map.freeze();
        self.capture = Some(Box::new(KeyCapture::new(id, &self.map, sink)));
    }

    /// One step of snapshot `id`'s capture, handing on up to `budget`
    /// entries; true when it is over (or there is none for `id`).
    pub fn capture_step(&mut self, id: u64, budget: usize) -> bool {
        let over = match &mut self.capture {
            Some(c) if c.id() == id => c.step(&mut self.map, budget),
            // Another snapshot's, given up: it feeds nothing any more.
            _ => true,
        };
        if over {
            self.capture = None;
            self.map.thaw();
        }
        over
    }

    /// Whether a snapshot's capture of this part is under way.
    pub fn is_capturing(&self) -> bool {
        self.capture.is_some()
    }

    /// Drops the capture without finishing it (the snapshot gave up).
    pub fn abandon_capture(&mut self) {
        self.capture = None;
        self.map.thaw();
    }

    /// Ends the capture now, handing on every entry it has not reached
    /// (the table is about to move its entries or go).
    fn finish_capture(&mut self) {
        if let Some(mut c) = self.capture.take() {
            c.finish(&mut self.map);
            self.map.thaw();
        }
    }

    /// Tells the capture, if any, that `key`'s entry is about to change.
    #[inline]
    fn before_write(&mut self, key: &[u8]) {
        if let Some(c) = &mut self.capture {
            c.before_write(&mut self.map, key);
        }
    }

    /// Keys stored here, including expired ones not yet removed.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no key is stored.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Keys with an expiry time.
    pub fn expires_len(&self) -> usize {
        self.expiring
    }

    /// Adds the expiry index entry of the key of slot hash `h` expiring at
    /// `at` (its entry already says so).
    fn index(&mut self, at: u64, h: u64) {
        self.expires.insert((at, h));
        self.expiring += 1;
    }

    /// Takes out of the expiry index a key of slot hash `h` that expired at
    /// `at` until now (the table no longer says so): its entry goes unless
    /// another key shares it.
    fn unindex(&mut self, at: u64, h: u64) {
        self.expiring = self.expiring.saturating_sub(1);
        if self.map.find_expiring(h, at).is_none() {
            self.expires.remove(&(at, h));
        }
    }

    /// Keys stored here that are still live at `now_ms` (expired keys not
    /// yet removed are not counted); costs O(expired-but-present keys).
    pub fn live_len(&self, now_ms: u64) -> usize {
        let due: usize = self
            .expires
            .range(..(now_ms.saturating_add(1), 0))
            .map(|&(at, h)| self.map.count_expiring(h, at))
            .sum();
        self.map.len().saturating_sub(due)
    }

    /// The live entry under `key` (an expired one reads as absent).
    pub fn get(&self, key: &[u8], now_ms: u64) -> Option<&Entry> {
        let e = self.map.get(key)?;
        if e.expire_at != 0 && e.expire_at <= now_ms {
            return None;
        }
        e.touch_lru(now_ms);
        Some(e)
    }

    /// First step of reading `key` ahead ([`Keyspace::prefetch`]), whose
    /// keyspace hash is `h`: starts loading the nodes it could be in.
    fn prefetch_node(&self, key: &[u8], h: u64) {
        self.map.prefetch_node(key, h);
    }

    /// Second step of reading `key` ahead: starts loading what a command
    /// reads first from its value, if the key is here. Touches nothing
    /// (not the access time, not expiry).
    fn prefetch_value(&self, key: &[u8], h: u64) {
        if let Some(e) = self.map.get_hashed(key, h) {
            e.value.prefetch();
        }
    }

    /// The live entry under `key` without touching its access time (TYPE,
    /// TTL, OBJECT: Redis's `LOOKUP_NOTOUCH`).
    pub fn peek(&self, key: &[u8], now_ms: u64) -> Option<&Entry> {
        self.map
            .get(key)
            .filter(|e| e.expire_at == 0 || e.expire_at > now_ms)
    }

    /// The live entry under `key` for change; an expired one is removed.
    pub fn get_mut(&mut self, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        self.expire_if_needed(key, now_ms);
        self.before_write(key);
        let e = self.map.get_mut(key)?;
        e.touch_lru(now_ms);
        Some(e)
    }

    /// Whether `key` is present but past its expiry time (a read finds it
    /// absent; a write would remove it).
    pub fn holds_expired(&self, key: &[u8], now_ms: u64) -> bool {
        matches!(self.map.get(key), Some(e) if e.expire_at != 0 && e.expire_at <= now_ms)
    }

    /// Whether a live key exists, without touching its access time.
    pub fn contains(&self, key: &[u8], now_ms: u64) -> bool {
        match self.map.get(key) {
            Some(e) => e.expire_at == 0 || e.expire_at > now_ms,
            None => false,
        }
    }

    /// Removes `key` if it has expired; returns whether it did.
    pub fn expire_if_needed(&mut self, key: &[u8], now_ms: u64) -> bool {
        // Every key with an expiry is in `expires`: none, no lookup.
        if self.expires.is_empty() {
            return false;
        }
        let expired =
            matches!(self.map.get(key), Some(e) if e.expire_at != 0 && e.expire_at <= now_ms);
        if expired {
            self.remove(key);
            self.expired_count += 1;
            self.log_expired(Bytes::copy_from_slice(key));
        }
        expired
    }

    /// Whether keys expired here since the last [`Db::take_expired`].
    pub fn has_expired(&self) -> bool {
        !self.expired_log.is_empty()
    }

    /// The keys removed because they expired since the last call.
    pub fn take_expired(&mut self) -> Vec<Bytes> {
        let taken = std::mem::take(&mut self.expired_log);
        PENDING_EXPIRED_LOG.fetch_sub(taken.len() as u64, Ordering::Relaxed);
        taken
    }

    fn log_expired(&mut self, key: Bytes) {
        PENDING_EXPIRED_LOG.fetch_add(1, Ordering::Relaxed);
        self.expired_log.push(key);
    }

    /// Stores `value` under `key`, replacing any value. The expiry is kept
    /// when `keep_ttl`, removed otherwise (as Redis's `setKey`).
    pub fn insert(&mut self, key: &[u8], value: Value, keep_ttl: bool, now_ms: u64) {
        if self.capture.is_some() {
            self.insert_captured(key, value, keep_ttl, now_ms);
            return;
        }
        match self.map.get_or_vacant(key) {
            Ok(e) => {
                if let Some(at) = overwrite(e, value, keep_ttl, now_ms) {
                    let h = self.map.hash(key);
                    self.unindex(at, h);
                }
            }
            Err(slot) => {
                slot.insert(key, Entry::new(value, now_ms));
                self.in_use.note(self.bit);
            }
        }
    }

    /// [`Db::insert`] while a capture walks the table: an existing entry is
    /// handed on first and changed where it is; a new key is marked as not
    /// the snapshot's (the table is frozen: one that would make it grow
    /// goes into its spill table, past the walk's slots).
    #[cold]
    fn insert_captured(&mut self, key: &[u8], value: Value, keep_ttl: bool, now_ms: u64) {
        self.before_write(key);
        if let Some(e) = self.map.get_mut(key) {
            if let Some(at) = overwrite(e, value, keep_ttl, now_ms) {
                let h = self.map.hash(key);
                self.unindex(at, h);
            }
            return;
        }
        if let Err(slot) = self.map.get_or_vacant(key) {
            slot.insert(key, Entry::new(value, now_ms));
            self.in_use.note(self.bit);
        }
        if let Some(c) = &mut self.capture {
            c.after_insert(&self.map, key);
        }
    }

    /// Inserts a whole entry (value and expiry) under `key`, replacing any.
    pub fn insert_with_expiry(
        &mut self,
        key: &[u8],
        value: Value,
        expire_at: Option<u64>,
        now_ms: u64,
    ) {
        self.insert(key, value, false, now_ms);
        if let Some(at) = expire_at {
            self.set_expire(key, at);
        }
    }

    /// Removes `key`, returning its entry (expired or not).
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        self.before_write(key);
        let mut e = self.map.remove(key)?;
        // A snapshot walking the value in steps could not find it again.
        e.value.end_snapshot();
        if e.expire_at != 0 {
            let h = self.map.hash(key);
            self.unindex(e.expire_at, h);
        }
        Some(e)
    }

    /// Sets the absolute expiry (unix ms) of an existing key; false if absent.
    pub fn set_expire(&mut self, key: &[u8], at_ms: u64) -> bool {
        self.before_write(key);
        let Some(e) = self.map.get_mut(key) else {
            return false;
        };
        // 0 means "no expiry": an expiry at the epoch is 1 ms after it.
        let at_ms = at_ms.max(1);
        let old = std::mem::replace(&mut e.expire_at, at_ms);
        let h = self.map.hash(key);
        if old != 0 {
            self.unindex(old, h);
        }
        self.index(at_ms, h);
        true
    }

    /// Removes the expiry of `key`; returns whether it had one.
    pub fn persist(&mut self, key: &[u8]) -> bool {
        self.before_write(key);
        let Some(e) = self.map.get_mut(key) else {
            return false;
        };
        if e.expire_at == 0 {
            return false;
        }
        let at = std::mem::replace(&mut e.expire_at, 0);
        let h = self.map.hash(key);
        self.unindex(at, h);
        true
    }

    /// Removes up to `budget` keys whose expiry time has passed; returns how
    /// many were removed and whether more remain due.
    pub fn expire_cycle(&mut self, now_ms: u64, budget: usize) -> (usize, bool) {
        let mut removed = 0;
        while removed < budget {
            let Some(&(at, h)) = self.expires.first() else {
                return (removed, false);
            };
            if at > now_ms {
                return (removed, false);
            }
            // Every key the entry stands for, one a turn; then the entry.
            let Some(key) = self
                .map
                .find_expiring(h, at)
                .map(|(k, _)| Bytes::copy_from_slice(k))
            else {
                self.expires.pop_first();
                continue;
            };
            self.before_write(&key);
            self.map.remove(&key);
            self.expiring = self.expiring.saturating_sub(1);
            self.expired_count += 1;
            self.touch_watched(&key);
            self.log_expired(key);
            removed += 1;
        }
        (removed, true)
    }

    /// Offers about `n` keys of this part, taken at random, to `offer` with
    /// their eviction score under `policy` (higher: evict first) and their
    /// slot (for [`Db::key_at`] and [`Db::remove_at`]); with `volatile`,
    /// only keys with an expiry (the nearest expiries for
    /// [`Eviction::Ttl`]). Redis's sampling for its eviction pool: the keys
    /// of consecutive slots from a random one, as its `dictGetSomeKeys`.
    pub fn sample_for_eviction(
        &self,
        policy: Eviction,
        volatile: bool,
        n: usize,
        now_ms: u64,
        offer: &mut dyn FnMut(u64, usize, &[u8]),
    ) {
        if volatile {
            if self.expires.is_empty() {
                return;
            }
            let mut take = |&(at, h): &(u64, u64)| {
                let Some((key, _)) = self.map.find_expiring(h, at) else {
                    return;
                };
                if let Some((slot, e)) = self.map.slot_of(key) {
                    let score = match policy {
                        Eviction::Ttl => u64::MAX - at,
                        _ => e.eviction_score(policy, now_ms),
                    };
                    offer(score, slot, key);
                }
            };
            if policy == Eviction::Ttl {
                self.expires.iter().take(n).for_each(&mut take);
                return;
            }
            // A random point between the first and last expiry, and the
            // keys that follow it (wrapping to the front).
            let (lo, hi) = match (self.expires.first(), self.expires.last()) {
                (Some(a), Some(b)) => (a.0, b.0),
                _ => return,
            };
            let at = lo + access::random_u64() % (hi - lo + 1);
            let after = self.expires.range((at, 0)..);
            let before = self.expires.range(..(at, 0));
            after.chain(before).take(n).for_each(&mut take);
            return;
        }
        let want = n.min(self.map.len());
        if want == 0 {
            return;
        }
        // A walk of at most 32 slots a wanted key: a table's load is over
        // 7/16 once it has grown, but hashbrown never shrinks it on
        // removal, and a table that evictions thinned may hold a key in 8
        // slots or fewer. As Redis's walk, it may offer fewer than `n`.
        let slots = self.map.slots();
        let start = (access::random_u64() % slots as u64) as usize;
        let mut got = 0;
        self.map
            .walk(start, (want * 32).max(128), &mut |slot, k, e| {
                offer(e.eviction_score(policy, now_ms), slot, k);
                got += 1;
                got < want
            });
        if got > 0 {
            return;
        }
        // A table all but emptied: pick by position.
        for _ in 0..want {
            let i = (access::random_u64() % self.map.len() as u64) as usize;
            if let Some((slot, (k, e))) = self
                .map
                .nth_slot(i)
                .and_then(|s| self.map.get_at(s).map(|ke| (s, ke)))
            {
                offer(e.eviction_score(policy, now_ms), slot, k);
            }
        }
    }

    /// The key in slot `slot` (as [`Db::sample_for_eviction`] offered it),
    /// if the slot holds one: the slot may hold another key by now, which
    /// the caller tells from the key.
    pub fn key_at(&self, slot: usize) -> Option<&[u8]> {
        self.map.get_at(slot).map(|(k, _)| k)
    }

    /// Removes the key in slot `slot`, returning its entry: what
    /// [`Db::remove`] of the key found there does.
    pub fn remove_at(&mut self, slot: usize) -> Option<Entry> {
        if self.capture.is_some() {
            // Through the key, so that a snapshot's walk sees it as any
            // other removal.
            let key = self.map.get_at(slot).map(|(k, _)| k.to_vec())?;
            return self.remove(&key);
        }
        // No capture to tell: the slot is removed as it is (no copy of the
        // key, no second lookup); the expiry index needs the key's hash
        // only when it has an expiry.
        let indexed = match self.map.get_at(slot)? {
            (k, e) if e.expire_at != 0 => Some(self.map.hash(k)),
            _ => None,
        };
        let mut e = self.map.remove_at(slot)?;
        // A snapshot walking the value in steps could not find it again.
        e.value.end_snapshot();
        if let Some(h) = indexed {
            self.unindex(e.expire_at, h);
        }
        Some(e)
    }

    /// Iterates over every stored key and entry, expired ones included.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.map.iter()
    }

    /// Every stored key and entry for change, expired ones included;
    /// touches nothing. A capture under way is finished first.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&[u8], &mut Entry)> {
        self.finish_capture();
        self.map.iter_mut()
    }

    /// The entry under `key` for change, expired or not, without touching
    /// its access time or expiring it (a snapshot's walk).
    pub fn peek_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        self.before_write(key);
        self.map.get_mut(key)
    }

    /// Removes every key; returns how many there were.
    pub fn clear(&mut self) -> usize {
        self.finish_capture();
        let n = self.map.len();
        for (k, flags) in &self.watched {
            if self.map.get(k).is_some() {
                for f in flags {
                    f.store(true, Ordering::Release);
                }
            }
        }
        self.map.clear();
        self.expires.clear();
        self.expiring = 0;
        n
    }

    /// Marks every transaction watching `key` as dirty.
    pub fn touch_watched(&self, key: &[u8]) {
        if self.watched.is_empty() {
            return;
        }
        if let Some(flags) = self.watched.get(key) {
            for f in flags {
                f.store(true, Ordering::Release);
            }
        }
    }

    /// Marks every transaction watching any key of this part as dirty.
    pub fn touch_all_watched(&self) {
        for flags in self.watched.values() {
            for f in flags {
                f.store(true, Ordering::Release);
            }
        }
    }

    /// Registers `flag` as watching `key`.
    pub fn watch(&mut self, key: &[u8], flag: &Arc<AtomicBool>) {
        let list = self.watched.entry(Bytes::copy_from_slice(key)).or_default();
        if !list.iter().any(|f| Arc::ptr_eq(f, flag)) {
            list.push(flag.clone());
        }
    }

    /// Removes `flag` from the watchers of `key`.
    pub fn unwatch(&mut self, key: &[u8], flag: &Arc<AtomicBool>) {
        if let Some(list) = self.watched.get_mut(key) {
            list.retain(|f| !Arc::ptr_eq(f, flag));
            if list.is_empty() {
                self.watched.remove(key);
            }
        }
    }

    /// Keys expired (lazily or actively) in this part since start.
    pub fn expired_count(&self) -> u64 {
        self.expired_count
    }

    /// A hash of `key` in [0, 2^58): the order in which SCAN visits a shard.
    pub fn scan_position(hasher: &KeyHasher, key: &[u8]) -> u64 {
        hasher.hash_one(key) & ((1u64 << (SHARD_SHIFT)) - 1)
    }
}

/// One shard: the part of every database whose keys hash here.
#[derive(Debug)]
pub struct Shard {
    /// One part per database, indexed by database number.
    pub dbs: Vec<Db>,
}

impl Shard {
    /// Swaps the keys of databases `a` and `b` (SWAPDB); false if either is
    /// out of range. WATCHes stay with their database number, as in Redis,
    /// and a watch fires when its key is live in either database.
    pub fn swap_dbs(&mut self, a: usize, b: usize, now_ms: u64) -> bool {
        let (lo, hi) = (a.min(b), a.max(b));
        if hi >= self.dbs.len() {
            return false;
        }
        if lo == hi {
            return true;
        }
        let (left, right) = self.dbs.split_at_mut(hi);
        let (x, y) = (&mut left[lo], &mut right[0]);
        for (db, other) in [(&*x, &*y), (&*y, &*x)] {
            for (key, flags) in &db.watched {
                if db.contains(key, now_ms) || other.contains(key, now_ms) {
                    for f in flags {
                        f.store(true, Ordering::Release);
                    }
                }
            }
        }
        // A snapshot walking a value in steps finds it by database and key.
        if super::zset::cow::captures_alive() {
            for (_, e) in x.map.iter_mut().chain(y.map.iter_mut()) {
                e.value.end_snapshot();
            }
        }
        std::mem::swap(&mut x.map, &mut y.map);
        std::mem::swap(&mut x.expires, &mut y.expires);
        std::mem::swap(&mut x.expiring, &mut y.expiring);
        // A capture walks its table wherever the table goes.
        std::mem::swap(&mut x.capture, &mut y.capture);
        for db in [x, y] {
            if !db.map.is_empty() {
                db.in_use.note(db.bit);
            }
        }
        true
    }
}

/// A shard's lock, and the mark of the thread that write-locked it last
/// (written only under the write lock, whose cache line it shares).
#[repr(align(128))]
#[derive(Debug)]
struct Padded(RwLock<Shard>, AtomicU32);

/// The whole keyspace: all databases, all shards.
#[derive(Debug)]
pub struct Keyspace {
    shards: Box<[Padded]>,
    hasher: KeyHasher,
    databases: usize,
    lazy_expired: AtomicU64,
    in_use: Arc<DbsInUse>,
}

/// A held shard lock.
pub enum ShardGuard<'a> {
    /// Shared access.
    Read(RwLockReadGuard<'a, Shard>),
    /// Exclusive access.
    Write(RwLockWriteGuard<'a, Shard>),
}

impl ShardGuard<'_> {
    /// The shard, for reading.
    pub fn shard(&self) -> &Shard {
        match self {
            ShardGuard::Read(g) => g,
            ShardGuard::Write(g) => g,
        }
    }

    /// The shard, for writing: `None` when only read-locked.
    pub fn shard_mut(&mut self) -> Option<&mut Shard> {
        match self {
            ShardGuard::Read(_) => None,
            ShardGuard::Write(g) => Some(g),
        }
    }

    /// Lets go of the lock handing it to a thread waiting for it, if any
    /// (a background walk that locks the shard again right away must not
    /// keep a command waiting behind it).
    pub fn unlock_fair(self) {
        match self {
            ShardGuard::Read(g) => RwLockReadGuard::unlock_fair(g),
            ShardGuard::Write(g) => RwLockWriteGuard::unlock_fair(g),
        }
    }
}

/// The shards one command holds, taken in ascending order.
pub struct Locked<'a> {
    guards: SmallVec<[(usize, ShardGuard<'a>); 2]>,
    all: bool,
}

impl<'a> Locked<'a> {
    /// Holds nothing (for commands without keys).
    pub fn none() -> Self {
        Locked {
            guards: SmallVec::new(),
            all: false,
        }
    }

    /// The indexes of the held shards, ascending.
    pub fn shards(&self) -> impl Iterator<Item = usize> + '_ {
        self.guards.iter().map(|(i, _)| *i)
    }

    /// Whether every shard is held (EXEC, scripts, keyspace-wide commands).
    pub fn holds_all(&self) -> bool {
        self.all
    }

    /// The held guard of shard `idx`, if held.
    pub fn guard(&self, idx: usize) -> Option<&ShardGuard<'a>> {
        if self.all {
            return self.guards.get(idx).map(|(_, g)| g);
        }
        self.guards.iter().find(|(i, _)| *i == idx).map(|(_, g)| g)
    }

    /// The held guard of shard `idx` for change, if held.
    pub fn guard_mut(&mut self, idx: usize) -> Option<&mut ShardGuard<'a>> {
        if self.all {
            return self.guards.get_mut(idx).map(|(_, g)| g);
        }
        self.guards
            .iter_mut()
            .find(|(i, _)| *i == idx)
            .map(|(_, g)| g)
    }

    /// Every held guard, in shard order.
    pub fn guards_mut(&mut self) -> impl Iterator<Item = &mut ShardGuard<'a>> {
        self.guards.iter_mut().map(|(_, g)| g)
    }
}

impl Keyspace {
    /// An empty keyspace with `databases` databases.
    pub fn new(databases: usize) -> Self {
        let hasher = KeyHasher::new();
        let in_use = Arc::new(DbsInUse::default());
        let shards = (0..SHARD_COUNT)
            .map(|_| {
                Padded(
                    RwLock::new(Shard {
                        dbs: (0..databases)
                            .map(|i| Db::new(&hasher, i, &in_use))
                            .collect(),
                    }),
                    AtomicU32::new(0),
                )
            })
            .collect();
        Keyspace {
            shards,
            hasher,
            databases,
            lazy_expired: AtomicU64::new(0),
            in_use,
        }
    }

    /// Number of databases.
    pub fn databases(&self) -> usize {
        self.databases
    }

    /// The numbers of the databases that may hold keys in some shard (a
    /// superset of the non-empty ones: every database that ever held a
    /// key). Read while holding a shard's lock, it includes every
    /// database that shard has keys in.
    pub fn dbs_in_use(&self) -> impl Iterator<Item = usize> {
        self.in_use.dbs(self.databases)
    }

    /// The hasher keys are placed with.
    pub fn hasher(&self) -> &KeyHasher {
        &self.hasher
    }

    /// The shard that holds `key` in every database.
    pub fn shard_of(&self, key: &[u8]) -> usize {
        (self.hasher.hash_one(key) >> SHARD_SHIFT) as usize
    }

    /// The shards of `keys`, ascending and deduplicated: the order in which
    /// they are locked.
    pub fn shards_of<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) -> SmallVec<[usize; 4]> {
        let mut idx: SmallVec<[usize; 4]> = keys.map(|k| self.shard_of(k)).collect();
        // Most commands name one key: nothing to order.
        if idx.len() > 1 {
            idx.sort_unstable();
            idx.dedup();
        }
        idx
    }

    /// Locks the shards of `keys` (deduplicated, ascending order).
    pub fn lock_shards<'k>(&self, keys: impl Iterator<Item = &'k [u8]>, write: bool) -> Locked<'_> {
        self.lock_sorted(&self.shards_of(keys), write)
    }

    /// Locks the shards `idx` (ascending, deduplicated, as
    /// [`Keyspace::shard_of`] gives them).
    pub fn lock_sorted(&self, idx: &[usize], write: bool) -> Locked<'_> {
        let guards = idx.iter().map(|&i| (i, self.lock_one(i, write))).collect();
        Locked { guards, all: false }
    }

    /// Locks every shard, in ascending order.
    pub fn lock_all(&self, write: bool) -> Locked<'_> {
        let guards = (0..SHARD_COUNT)
            .map(|i| (i, self.lock_one(i, write)))
            .collect();
        Locked { guards, all: true }
    }

    /// Reads ahead `keys` of database `db` (a connection's next pipelined
    /// commands, in different shards as often as not): starts loading each
    /// key's node and then its value's first bytes, all keys' loads at
    /// once, so that their cache misses overlap here instead of coming one
    /// after another as the commands run. Only a hint: changes nothing, and
    /// skips a shard whose lock is not free at once (it never waits, so it
    /// may be called holding other shards' locks). Reads at most
    /// [`MAX_PREFETCH`] keys.
    pub fn prefetch(&self, db: usize, keys: &[&[u8]]) {
        let keys = &keys[..keys.len().min(MAX_PREFETCH)];
        let mut guards: SmallVec<[RwLockReadGuard<'_, Shard>; MAX_PREFETCH]> = SmallVec::new();
        // Each shard's place in `guards`: NONE until tried, BUSY if its
        // lock was not free (and for a key that repeats the one before).
        const NONE: u8 = u8::MAX;
        const BUSY: u8 = u8::MAX - 1;
        let mut place = [NONE; SHARD_COUNT];
        // Each key's hash and its shard's place.
        let mut placed: SmallVec<[(u64, u8); MAX_PREFETCH]> = SmallVec::new();
        let mut last: Option<&[u8]> = None;
        for key in keys {
            // A run of calls on one key (a pipeline of ZADDs to one board)
            // reads it ahead once.
            if last == Some(*key) {
                placed.push((0, BUSY));
                continue;
            }
            last = Some(key);
            let h = self.hasher.hash_one(key);
            let idx = (h >> SHARD_SHIFT) as usize % SHARD_COUNT;
            if place[idx] == NONE {
                place[idx] = match self.shards[idx].0.try_read() {
                    Some(g) => {
                        guards.push(g);
                        (guards.len() - 1) as u8
                    }
                    None => BUSY,
                };
            }
            placed.push((h, place[idx]));
        }
        let part = |at: u8| guards.get(at as usize)?.dbs.get(db);
        for (key, &(h, at)) in keys.iter().zip(&placed) {
            if let Some(p) = part(at) {
                p.prefetch_node(key, h);
            }
        }
        for (key, &(h, at)) in keys.iter().zip(&placed) {
            if let Some(p) = part(at) {
                p.prefetch_value(key, h);
            }
        }
    }

    /// Locks one shard; only for callers holding no other shard. A write
    /// lock that another thread held last is noted for [`take_handoff`].
    pub fn lock_one(&self, idx: usize, write: bool) -> ShardGuard<'_> {
        let idx = idx % SHARD_COUNT;
        let Padded(lock, writer) = &self.shards[idx];
        if write {
            let guard = lock.write();
            let me = WRITER_MARK.with(|m| m.get());
            if writer.load(Ordering::Relaxed) != me {
                writer.store(me, Ordering::Relaxed);
                HANDOFF.with(|c| c.set(idx as u8 + 1));
            }
            ShardGuard::Write(guard)
        } else {
            ShardGuard::Read(lock.read())
        }
    }

    /// Runs one pass of active expiry over every shard and database, removing
    /// at most `budget` keys per shard part; returns (removed, more_due).
    /// `on_expired(db, keys)` gets the removed keys while their shard is
    /// still locked (the AOF logs them in order with the commands).
    pub fn active_expire(
        &self,
        now_ms: u64,
        budget: usize,
        on_expired: &mut dyn FnMut(usize, Vec<Bytes>),
    ) -> (usize, bool) {
        let mut removed = 0;
        let mut more = false;
        for padded in self.shards.iter() {
            // Skip a busy shard this round rather than wait for it.
            let Some(mut shard) = padded.0.try_write() else {
                more = true;
                continue;
            };
            for (i, db) in shard.dbs.iter_mut().enumerate() {
                if !db.expires.is_empty() {
                    let (n, m) = db.expire_cycle(now_ms, budget);
                    removed += n;
                    more |= m;
                }
                if db.has_expired() {
                    on_expired(i, db.take_expired());
                }
            }
        }
        (removed, more)
    }

    /// Counts a key found expired on access under a read lock.
    pub fn note_lazy_expired(&self) {
        self.lazy_expired.fetch_add(1, Ordering::Relaxed);
    }

    /// Keys per database: (keys, keys with expiry), summed over shards.
    pub fn db_sizes(&self) -> Vec<(usize, usize)> {
        let mut out = vec![(0, 0); self.databases];
        for padded in self.shards.iter() {
            let shard = padded.0.read();
            for (i, db) in shard.dbs.iter().enumerate() {
                out[i].0 += db.len();
                out[i].1 += db.expires_len();
            }
        }
        out
    }

    /// Keys expired since start.
    pub fn expired_keys(&self) -> u64 {
        let mut n = 0;
        for padded in self.shards.iter() {
            let shard = padded.0.read();
            n += shard.dbs.iter().map(|d| d.expired_count()).sum::<u64>();
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::value::Value;

    fn s(v: &[u8]) -> Value {
        Value::Str(crate::engine::string::StrValue::from_bytes(v))
    }

    /// A write lock taken after another thread's is a hand-off, noted
    /// once per taking; taken again by the same thread, or read, it is not.
    #[test]
    fn handoff_is_a_write_lock_taken_after_another_threads() {
        let ks = Keyspace::new(1);
        let idx = ks.shard_of(b"board");
        let other = (idx + 1) % SHARD_COUNT;
        take_handoff();
        drop(ks.lock_one(idx, true));
        assert_eq!(take_handoff(), Some(idx), "first writer of the shard");
        drop(ks.lock_one(idx, true));
        drop(ks.lock_one(idx, false));
        assert_eq!(take_handoff(), None, "same thread again, and a read");
        std::thread::scope(|sc| {
            sc.spawn(|| {
                drop(ks.lock_one(idx, false));
                assert_eq!(take_handoff(), None, "a read is no hand-off");
                drop(ks.lock_one(idx, true));
                assert_eq!(take_handoff(), Some(idx), "taken over by another thread");
            });
        });
        drop(ks.lock_sorted(&[other, idx], true));
        assert_eq!(take_handoff(), Some(idx), "the last shard taken over");
        assert_eq!(take_handoff(), None, "taken once");
    }

    /// A guest's writes are another writer's: the thread's own write after
    /// them takes the shard over, as a guest's after the thread's own.
    #[test]
    fn a_guest_writer_is_another_writer() {
        let ks = Keyspace::new(1);
        let idx = ks.shard_of(b"board");
        drop(ks.lock_one(idx, true));
        take_handoff();
        as_guest_writer(|| drop(ks.lock_one(idx, true)));
        assert_eq!(take_handoff(), Some(idx), "the guest takes it over");
        as_guest_writer(|| drop(ks.lock_one(idx, true)));
        assert_eq!(take_handoff(), None, "a guest again");
        drop(ks.lock_one(idx, true));
        assert_eq!(take_handoff(), Some(idx), "the thread's own after a guest");
        drop(ks.lock_one(idx, true));
        assert_eq!(take_handoff(), None, "its own again");
    }

    /// Reading keys ahead changes nothing: not the values, not their
    /// access time, not an expired key; it skips a shard locked for
    /// writing (never waits) and keys of other types, absent keys and
    /// keys of another database.
    #[test]
    fn prefetch_changes_nothing_and_never_waits() {
        let ks = Keyspace::new(2);
        let keys: Vec<Vec<u8>> = (0..40).map(|i| format!("key:{i}").into_bytes()).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        {
            let mut l = ks.lock_shards(refs.iter().copied(), true);
            for (i, key) in refs.iter().enumerate() {
                let db = &mut l
                    .guard_mut(ks.shard_of(key))
                    .unwrap()
                    .shard_mut()
                    .unwrap()
                    .dbs[0];
                let value = match i % 3 {
                    0 => s(b"short"),
                    1 => s(&vec![b'x'; 500]),
                    _ => {
                        let mut h = crate::engine::hash::HashValue::new();
                        h.set(b"f", b"v", Default::default());
                        Value::Hash(h)
                    }
                };
                db.insert(key, value, false, 1000);
                if i == 5 {
                    db.set_expire(key, 1500);
                }
            }
        }
        let idle = |k: &[u8]| {
            let g = ks.lock_one(ks.shard_of(k), false);
            g.shard().dbs[0].peek(k, 0).map(|e| e.idle_secs(1_000_000))
        };
        let before: Vec<_> = refs.iter().map(|k| idle(k)).collect();
        let mut asked = refs.clone();
        asked.push(b"absent");
        ks.prefetch(0, &asked);
        ks.prefetch(1, &asked);
        ks.prefetch(0, &[refs[2], refs[2], refs[3], refs[3], refs[2]]);
        // A shard held for writing by this thread is skipped, not waited for.
        {
            let _held = ks.lock_one(ks.shard_of(refs[0]), true);
            ks.prefetch(0, &refs);
        }
        let after: Vec<_> = refs.iter().map(|k| idle(k)).collect();
        assert_eq!(before, after);
        let g = ks.lock_one(ks.shard_of(refs[5]), false);
        assert!(g.shard().dbs[0].holds_expired(refs[5], 2000));
        drop(g);
        assert_eq!(ks.db_sizes()[0].0, 40);
        assert_eq!(ks.db_sizes()[1].0, 0);
    }

    #[test]
    fn expiry_lazy_and_active() {
        let ks = Keyspace::new(2);
        {
            let mut l = ks.lock_shards([&b"a"[..], b"b"].into_iter(), true);
            for key in [&b"a"[..], b"b"] {
                let i = ks.shard_of(key);
                let db = &mut l.guard_mut(i).unwrap().shard_mut().unwrap().dbs[0];
                db.insert(key, s(b"1"), false, 1000);
                db.set_expire(key, 2000);
            }
        }
        let i = ks.shard_of(b"a");
        {
            let g = ks.lock_one(i, false);
            assert!(g.shard().dbs[0].get(b"a", 1500).is_some());
            assert!(g.shard().dbs[0].get(b"a", 2000).is_none());
        }
        let mut logged = Vec::new();
        let (n, more) = ks.active_expire(2500, 100, &mut |db, keys| logged.push((db, keys)));
        assert_eq!((n, more), (2, false));
        assert_eq!(logged.iter().map(|(_, k)| k.len()).sum::<usize>(), 2);
        assert_eq!(ks.db_sizes()[0], (0, 0));
        assert_eq!(ks.expired_keys(), 2);
    }

    #[test]
    fn dbs_in_use_are_those_that_took_a_key() {
        let ks = Keyspace::new(70);
        let in_use = |ks: &Keyspace| ks.dbs_in_use().collect::<Vec<_>>();
        assert_eq!(in_use(&ks), Vec::<usize>::new());
        let put = |db: usize, key: &[u8]| {
            let mut g = ks.lock_one(ks.shard_of(key), true);
            g.shard_mut().unwrap().dbs[db].insert(key, s(b"v"), false, 1000);
        };
        put(3, b"a");
        put(3, b"b");
        assert_eq!(in_use(&ks), [3]);
        // Every database from 63 on shares a bit: all of them are offered.
        put(65, b"c");
        assert_eq!(in_use(&ks), [3, 63, 64, 65, 66, 67, 68, 69]);
        // A database that takes keys by SWAPDB alone is in use too; one
        // emptied stays in (a superset).
        let ks = Keyspace::new(16);
        let key = &b"k"[..];
        let i = ks.shard_of(key);
        ks.lock_one(i, true).shard_mut().unwrap().dbs[1].insert(key, s(b"v"), false, 1000);
        for idx in 0..SHARD_COUNT {
            ks.lock_one(idx, true)
                .shard_mut()
                .unwrap()
                .swap_dbs(1, 7, 1000);
        }
        assert_eq!(in_use(&ks), [1, 7]);
        assert!(ks.lock_one(i, false).shard().dbs[7]
            .get(key, 1000)
            .is_some());
    }

    #[test]
    fn insert_clears_or_keeps_ttl() {
        let ks = Keyspace::new(1);
        let mut g = ks.lock_one(ks.shard_of(b"k"), true);
        let db = &mut g.shard_mut().unwrap().dbs[0];
        db.insert(b"k", s(b"1"), false, 0);
        db.set_expire(b"k", 5000);
        db.insert(b"k", s(b"2"), true, 0);
        assert_eq!(db.get(b"k", 0).unwrap().expire_at(), Some(5000));
        db.insert(b"k", s(b"3"), false, 0);
        assert_eq!(db.get(b"k", 0).unwrap().expire_at(), None);
        assert_eq!(db.expires_len(), 0);
        assert!(!db.persist(b"k"));
    }

    #[test]
    fn watch_flags_fire() {
        let ks = Keyspace::new(1);
        let flag = Arc::new(AtomicBool::new(false));
        let mut g = ks.lock_one(ks.shard_of(b"k"), true);
        let db = &mut g.shard_mut().unwrap().dbs[0];
        db.watch(b"k", &flag);
        db.touch_watched(b"x");
        assert!(!flag.load(Ordering::Acquire));
        db.touch_watched(b"k");
        assert!(flag.load(Ordering::Acquire));
    }

    /// A [`Db`] against a plain model: key → (value tag, expiry), with the
    /// clock moving forward between operations.
    mod model {
        use std::collections::HashMap;

        use proptest::prelude::*;

        use super::*;

        #[derive(Debug, Clone)]
        enum Op {
            Insert(Vec<u8>, u8, bool),
            InsertWithExpiry(Vec<u8>, u8, Option<u64>),
            SetExpire(Vec<u8>, u64),
            Persist(Vec<u8>),
            Remove(Vec<u8>),
            RemoveAt(Vec<u8>),
            Get(Vec<u8>),
            GetMut(Vec<u8>),
            ExpireCycle(usize),
            Clear,
            Tick(u64),
        }

        fn key() -> impl Strategy<Value = Vec<u8>> {
            prop_oneof![
                6 => "[a-e]{1,2}".prop_map(String::into_bytes),
                2 => "key:[0-9]{1,3}".prop_map(String::into_bytes),
                1 => (0u8..2, 21usize..25).prop_map(|(c, n)| vec![b'x' + c; n]),
            ]
        }

        fn op() -> impl Strategy<Value = Op> {
            let at = 1000u64..1100;
            prop_oneof![
                6 => (key(), any::<u8>(), any::<bool>()).prop_map(|(k, v, t)| Op::Insert(k, v, t)),
                2 => (key(), any::<u8>(), proptest::option::of(at.clone()))
                    .prop_map(|(k, v, a)| Op::InsertWithExpiry(k, v, a)),
                3 => (key(), at).prop_map(|(k, a)| Op::SetExpire(k, a)),
                1 => key().prop_map(Op::Persist),
                2 => key().prop_map(Op::Remove),
                2 => key().prop_map(Op::RemoveAt),
                3 => key().prop_map(Op::Get),
                2 => key().prop_map(Op::GetMut),
                1 => (0usize..4).prop_map(Op::ExpireCycle),
                1 => Just(Op::Clear),
                2 => (0u64..20).prop_map(Op::Tick),
            ]
        }

        fn tag(e: &Entry) -> u8 {
            match &e.value {
                Value::Str(s) => s.as_bytes().first().copied().unwrap_or(0),
                _ => 0,
            }
        }

        /// The model's live value under `k` at `now`, removing it when
        /// expired (as a lookup for change does).
        fn live(m: &HashMap<Vec<u8>, (u8, u64)>, k: &[u8], now: u64) -> Option<(u8, u64)> {
            m.get(k).copied().filter(|&(_, at)| at == 0 || at > now)
        }

        proptest! {
            #[test]
            fn db_matches_a_model(ops in proptest::collection::vec(op(), 1..300)) {
                let mut db = Db::new(&KeyHasher::new(), 0, &Arc::default());
                let mut m: HashMap<Vec<u8>, (u8, u64)> = HashMap::new();
                let mut now = 1000u64;
                for op in ops {
                    match op {
                        Op::Insert(k, v, keep) => {
                            db.insert(&k, s(&[v]), keep, now);
                            let at = match m.get(&k) {
                                Some(&(_, at)) if keep => at,
                                _ => 0,
                            };
                            m.insert(k, (v, at));
                        }
                        Op::InsertWithExpiry(k, v, at) => {
                            db.insert_with_expiry(&k, s(&[v]), at, now);
                            m.insert(k, (v, at.unwrap_or(0)));
                        }
                        Op::SetExpire(k, at) => {
                            let had = m.contains_key(&k);
                            prop_assert_eq!(db.set_expire(&k, at), had);
                            if let Some(e) = m.get_mut(&k) {
                                e.1 = at;
                            }
                        }
                        Op::Persist(k) => {
                            let had = m.get(&k).is_some_and(|e| e.1 != 0);
                            prop_assert_eq!(db.persist(&k), had);
                            if let Some(e) = m.get_mut(&k) {
                                e.1 = 0;
                            }
                        }
                        Op::Remove(k) => {
                            let got = db.remove(&k).map(|e| (tag(&e), e.expire_at));
                            prop_assert_eq!(got, m.remove(&k));
                        }
                        Op::RemoveAt(k) => {
                            // Eviction's removal by slot (no capture: the
                            // slot goes as it is, the expiry index with it).
                            let slot = db.map.slot_of(&k).map(|(i, _)| i);
                            let got = slot
                                .and_then(|i| db.remove_at(i))
                                .map(|e| (tag(&e), e.expire_at));
                            prop_assert_eq!(got, m.remove(&k));
                        }
                        Op::Get(k) => {
                            let want = live(&m, &k, now);
                            prop_assert_eq!(db.peek(&k, now).map(tag), want.map(|e| e.0));
                            prop_assert_eq!(db.contains(&k, now), want.is_some());
                            let got = db.get(&k, now).map(|e| (tag(e), e.expire_at().unwrap_or(0)));
                            prop_assert_eq!(got, want);
                        }
                        Op::GetMut(k) => {
                            let want = live(&m, &k, now);
                            if want.is_none() {
                                m.remove(&k);
                            }
                            let got = db.get_mut(&k, now).map(|e| (tag(e), e.expire_at().unwrap_or(0)));
                            prop_assert_eq!(got, want);
                        }
                        Op::ExpireCycle(budget) => {
                            let due = m.values().filter(|e| e.1 != 0 && e.1 <= now).count();
                            let (n, more) = db.expire_cycle(now, budget);
                            prop_assert_eq!(n, due.min(budget));
                            prop_assert_eq!(more, due >= budget);
                            if n == due {
                                m.retain(|_, e| e.1 == 0 || e.1 > now);
                            } else {
                                // Which ones went is the index's order: follow the table.
                                m.retain(|k, _| db.map.get(k).is_some());
                            }
                        }
                        Op::Clear => {
                            prop_assert_eq!(db.clear(), m.len());
                            m.clear();
                        }
                        Op::Tick(ms) => now += ms,
                    }
                    prop_assert_eq!(db.len(), m.len());
                    prop_assert_eq!(db.expires_len(), m.values().filter(|e| e.1 != 0).count());
                    let live_n = m.values().filter(|e| e.1 == 0 || e.1 > now).count();
                    prop_assert_eq!(db.live_len(now), live_n);
                }
                let mut got: Vec<(Vec<u8>, u8, u64)> = db
                    .iter()
                    .map(|(k, e)| (k.to_vec(), tag(e), e.expire_at().unwrap_or(0)))
                    .collect();
                let mut want: Vec<(Vec<u8>, u8, u64)> =
                    m.into_iter().map(|(k, (v, at))| (k, v, at)).collect();
                got.sort();
                want.sort();
                prop_assert_eq!(got, want);
                db.take_expired();
            }
        }
    }

    /// A snapshot's key walk ([`Db::begin_capture`]) under random writes
    /// between its steps: what the sink gets is exactly each part's keys,
    /// values and expiries at the start, each key once.
    mod capture {
        use std::collections::BTreeMap;

        use parking_lot::Mutex;
        use proptest::prelude::*;

        use super::*;
        use crate::engine::keycapture::KeySink;

        /// (database, key) and (value, expiry) of a key handed on.
        type Taken = ((usize, Vec<u8>), (Vec<u8>, Option<u64>));

        /// What the sinks got.
        type Got = Arc<Mutex<Vec<Taken>>>;

        struct ModelSink {
            db: usize,
            got: Got,
            taken: Vec<Taken>,
        }

        impl KeySink for ModelSink {
            fn capture(&mut self, key: &[u8], entry: &mut Entry) {
                let v = match &entry.value {
                    Value::Str(s) => s.as_bytes().to_vec(),
                    _ => Vec::new(),
                };
                self.taken
                    .push(((self.db, key.to_vec()), (v, entry.expire_at())));
            }

            fn flush(&mut self) {
                self.got.lock().append(&mut self.taken);
            }
        }

        #[derive(Debug, Clone)]
        enum Op {
            Step(usize),
            /// SET: a new key or an overwrite (keeping the TTL or not).
            Insert(usize, Vec<u8>, u8, bool),
            /// A change in place through a lookup for change (APPEND).
            Append(usize, Vec<u8>),
            Remove(usize, Vec<u8>),
            /// An eviction: the key found in a slot is removed by slot.
            RemoveAt(usize, Vec<u8>),
            SetExpire(usize, Vec<u8>, u64),
            Persist(usize, Vec<u8>),
            /// The key's expiry passes and a lookup removes it.
            ExpireNow(usize, Vec<u8>),
            ExpireCycle(usize),
            /// RENAME / MOVE: the entry leaves one key for another, maybe
            /// in the other database.
            Rename(usize, Vec<u8>, usize, Vec<u8>),
            /// Enough new keys for the table to grow under the walk.
            Grow(usize, u16),
            Swap,
            Clear(usize),
        }

        fn key() -> impl Strategy<Value = Vec<u8>> {
            prop_oneof![
                4 => "k[0-9]{1,3}".prop_map(String::into_bytes),
                1 => "n[0-9]{1,2}".prop_map(String::into_bytes),
                // Keys added by Grow: spilled ones while a walk runs.
                1 => "g[0-9]{1,3}".prop_map(String::into_bytes),
            ]
        }

        fn op() -> impl Strategy<Value = Op> {
            let db = 0usize..2;
            prop_oneof![
                6 => (1usize..40).prop_map(Op::Step),
                5 => (db.clone(), key(), any::<u8>(), any::<bool>())
                    .prop_map(|(d, k, v, t)| Op::Insert(d, k, v, t)),
                3 => (db.clone(), key()).prop_map(|(d, k)| Op::Append(d, k)),
                3 => (db.clone(), key()).prop_map(|(d, k)| Op::Remove(d, k)),
                2 => (db.clone(), key()).prop_map(|(d, k)| Op::RemoveAt(d, k)),
                2 => (db.clone(), key(), 2000u64..3000).prop_map(|(d, k, a)| Op::SetExpire(d, k, a)),
                1 => (db.clone(), key()).prop_map(|(d, k)| Op::Persist(d, k)),
                2 => (db.clone(), key()).prop_map(|(d, k)| Op::ExpireNow(d, k)),
                1 => db.clone().prop_map(Op::ExpireCycle),
                3 => (db.clone(), key(), db.clone(), key())
                    .prop_map(|(a, k, b, l)| Op::Rename(a, k, b, l)),
                2 => (db.clone(), 1u16..400).prop_map(|(d, n)| Op::Grow(d, n)),
                1 => Just(Op::Swap),
                1 => db.prop_map(Op::Clear),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(300))]

            #[test]
            fn walk_plus_writes_is_the_part_at_the_start(
                sizes in (0usize..600, 0usize..80),
                with_ttl in 0usize..5,
                ops in proptest::collection::vec(op(), 0..120),
            ) {
                let hasher = KeyHasher::new();
                let in_use = Arc::default();
                let mut shard = Shard { dbs: vec![Db::new(&hasher, 0, &in_use), Db::new(&hasher, 1, &in_use)] };
                let now = 1000;
                for (d, n) in [sizes.0, sizes.1].into_iter().enumerate() {
                    for i in 0..n {
                        let k = format!("k{i}").into_bytes();
                        shard.dbs[d].insert(&k, s(format!("v{i}").as_bytes()), false, now);
                        if with_ttl > 0 && i % with_ttl == 0 {
                            shard.dbs[d].set_expire(&k, 5000 + i as u64);
                        }
                    }
                }
                let mut at_start = BTreeMap::new();
                for (d, db) in shard.dbs.iter().enumerate() {
                    for (k, e) in db.iter() {
                        let v = match &e.value {
                            Value::Str(s) => s.as_bytes().to_vec(),
                            _ => Vec::new(),
                        };
                        at_start.insert((d, k.to_vec()), (v, e.expire_at()));
                    }
                }
                let got: Got = Arc::default();
                for (d, db) in shard.dbs.iter_mut().enumerate() {
                    db.begin_capture(7, Box::new(ModelSink { db: d, got: got.clone(), taken: Vec::new() }));
                }
                let mut fresh = 0u32;
                for op in ops {
                    match op {
                        Op::Step(n) => {
                            for db in shard.dbs.iter_mut() {
                                db.capture_step(7, n);
                            }
                        }
                        Op::Insert(d, k, v, keep) => shard.dbs[d].insert(&k, s(&[v]), keep, now),
                        Op::Append(d, k) => {
                            if let Some(e) = shard.dbs[d].get_mut(&k, now) {
                                if let Value::Str(s) = &mut e.value {
                                    let mut b = s.as_bytes().to_vec();
                                    b.push(b'+');
                                    *s = crate::engine::string::StrValue::from_bytes(&b);
                                }
                            }
                        }
                        Op::Remove(d, k) => {
                            shard.dbs[d].remove(&k);
                        }
                        Op::RemoveAt(d, k) => {
                            let slot = shard.dbs[d].map.slot_of(&k).map(|(i, _)| i);
                            if let Some(i) = slot {
                                shard.dbs[d].remove_at(i);
                            }
                        }
                        Op::SetExpire(d, k, at) => {
                            shard.dbs[d].set_expire(&k, at);
                        }
                        Op::Persist(d, k) => {
                            shard.dbs[d].persist(&k);
                        }
                        Op::ExpireNow(d, k) => {
                            if shard.dbs[d].set_expire(&k, now - 1) {
                                prop_assert!(shard.dbs[d].get_mut(&k, now).is_none());
                            }
                        }
                        Op::ExpireCycle(d) => {
                            shard.dbs[d].expire_cycle(9000, 3);
                        }
                        Op::Rename(a, k, b, l) => {
                            if let Some(e) = shard.dbs[a].remove(&k) {
                                let at = e.expire_at();
                                shard.dbs[b].insert_with_expiry(&l, e.value, at, now);
                            }
                        }
                        Op::Grow(d, n) => {
                            let walking = shard.dbs[d].is_capturing();
                            let slots = shard.dbs[d].map.slots() - shard.dbs[d].map.spilled_slots();
                            for _ in 0..n {
                                fresh += 1;
                                let k = format!("g{fresh}").into_bytes();
                                shard.dbs[d].insert(&k, s(b"g"), false, now);
                            }
                            // The walk goes on over the same slots: keys
                            // that would make the table grow were spilled.
                            prop_assert_eq!(shard.dbs[d].is_capturing(), walking);
                            if walking {
                                let now_slots = shard.dbs[d].map.slots() - shard.dbs[d].map.spilled_slots();
                                prop_assert_eq!(now_slots, slots);
                            }
                        }
                        Op::Swap => {
                            prop_assert!(shard.swap_dbs(0, 1, now));
                        }
                        Op::Clear(d) => {
                            shard.dbs[d].clear();
                        }
                    }
                }
                for db in shard.dbs.iter_mut() {
                    while !db.capture_step(7, 16) {}
                    prop_assert!(!db.is_capturing());
                }
                let got = std::mem::take(&mut *got.lock());
                let count = got.len();
                let got: BTreeMap<_, _> = got.into_iter().collect();
                prop_assert_eq!(count, got.len(), "a key handed on twice");
                prop_assert_eq!(got, at_start);
            }
        }

        /// A sink that keeps only what the capture says it holds.
        struct HeldSink(Arc<std::sync::atomic::AtomicUsize>);

        impl KeySink for HeldSink {
            fn capture(&mut self, _: &[u8], _: &mut Entry) {}
            fn flush(&mut self) {}
            fn held(&mut self, bytes: usize) {
                self.0.store(bytes, Ordering::Relaxed);
            }
        }

        /// The slots a walk must skip (keys added ahead of it) are memory
        /// the snapshot holds: the sink is told how much, and 0 at the end.
        #[test]
        fn the_set_of_slots_to_skip_is_counted_as_held() {
            let hasher = KeyHasher::new();
            let mut db = Db::new(&hasher, 0, &Arc::default());
            for i in 0..20_000 {
                db.insert(format!("k{i}").as_bytes(), s(b"v"), false, 0);
            }
            let held = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            db.begin_capture(1, Box::new(HeldSink(held.clone())));
            assert_eq!(held.load(Ordering::Relaxed), 0);
            // Overwrites and new keys ahead of the walk each mark a slot.
            for i in 0..2000 {
                db.insert(format!("k{i}").as_bytes(), s(b"w"), false, 0);
            }
            let marked = held.load(Ordering::Relaxed);
            // At least a usize and a control byte per marked slot.
            assert!(marked >= 2000 * 9, "{marked}");
            while !db.capture_step(1, 256) {}
            assert_eq!(held.load(Ordering::Relaxed), 0);
            // An abandoned capture lets go of its set too.
            db.begin_capture(2, Box::new(HeldSink(held.clone())));
            for i in 0..100 {
                db.insert(format!("k{i}").as_bytes(), s(b"x"), false, 0);
            }
            assert!(held.load(Ordering::Relaxed) > 0);
            db.abandon_capture();
            assert_eq!(held.load(Ordering::Relaxed), 0);
        }

        #[test]
        fn a_step_reads_a_bounded_part_and_a_dropped_part_hands_on_the_rest() {
            let hasher = KeyHasher::new();
            let mut db = Db::new(&hasher, 0, &Arc::default());
            for i in 0..5000 {
                db.insert(format!("k{i}").as_bytes(), s(b"v"), false, 0);
            }
            let got: Got = Arc::default();
            db.begin_capture(
                1,
                Box::new(ModelSink {
                    db: 0,
                    got: got.clone(),
                    taken: Vec::new(),
                }),
            );
            assert!(!db.capture_step(1, 100));
            assert_eq!(got.lock().len(), 100);
            // Another snapshot's step finds no walk of its own (and ends this one).
            assert!(db.capture_step(2, 100));
            assert!(!db.is_capturing());
            db.begin_capture(
                3,
                Box::new(ModelSink {
                    db: 0,
                    got: got.clone(),
                    taken: Vec::new(),
                }),
            );
            assert!(!db.capture_step(3, 10));
            drop(db);
            assert_eq!(got.lock().len(), 100 + 5000);
        }
    }
}
