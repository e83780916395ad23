//! `maxmemory`: what the allocator holds, and eviction to keep it under the
//! limit (Redis's `performEvictions`).
//!
//! - Accounting: INFO `used_memory` is jemalloc's `stats.allocated` less the
//!   freed blocks the thread caches keep ([`allocator_used`]). Reading it
//!   costs an epoch advance (a walk over every arena's statistics, some
//!   360,000 instructions), so the check before a command reads a copy
//!   ([`Memory::used`]) that the cron reads afresh every [`REFRESH`]
//!   ([`Memory::refresh_if_due`]: no clock is read per command); in between,
//!   each thread that checks adds to the copy what it allocated less what
//!   it freed since it last did (jemalloc's per-thread counters: two loads),
//!   as Redis keeps `used_memory` up to date on every allocation. What an
//!   eviction frees is so taken off the copy at once.
//! - Eviction: an approximation by sampling, as Redis's: each step samples
//!   `maxmemory-samples` keys of one shard (every database) into a pool of
//!   the 16 best candidates seen, and evicts the best of the pool; random
//!   policies evict the sampled key. Evicted keys are written to the AOF as
//!   DELs, invalidated for client-side caching, touch WATCHes, raise
//!   `evicted` and count in INFO `evicted_keys`.
//!
//! The dispatcher calls [`perform_evictions`] before a command while over
//! the limit, holding no lock; an eviction locks one shard at a time.
//!
//! - Client eviction (`maxmemory-clients`, Redis 7.0): every connection
//!   publishes what its buffers hold ([`Memory::note_client`]) into one
//!   total; past the limit, [`evict_clients`] closes the clients holding
//!   most until the total is under it (not those under CLIENT NO-EVICT,
//!   nor replication links), counted in INFO `evicted_clients`. The
//!   buffers are allocations, so they count in `used_memory` (and so
//!   against `maxmemory`) as in Redis.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;

use super::client::ClientInfo;
use super::notify::{self, Class, Event};
use super::pubsub::Own;
use super::{journal, Config, Server};
use crate::engine::access::{self, Mode};
use crate::engine::{Entry, Eviction, ShardGuard, SHARD_COUNT};

/// Candidates the eviction pool keeps (Redis's EVPOOL_SIZE).
const POOL_SIZE: usize = 16;

/// The least `maxmemory-clients` means, so that a bad setting cannot
/// leave the server unreachable (Redis's floor).
const MIN_CLIENTS_LIMIT: u64 = 128 * 1024;

/// How often the cron reads the copy of `used_memory` afresh from the
/// allocator (between readings the threads' own counters keep it current;
/// the reading corrects what threads that never check allocated or freed:
/// little, since every command thread checks and the AOF writer swaps its
/// buffers rather than freeing them).
const REFRESH: Duration = Duration::from_secs(1);

/// Net bytes a thread allocates before it adds them to the copy (so that
/// the shared counter is not written on every command).
const PUBLISH_AT: i64 = 256;

/// jemalloc's name for the bytes every thread cache holds, summed over the
/// arenas (4096 is its "all arenas" index).
const TCACHE_BYTES: &[u8] = b"stats.arenas.4096.tcache_bytes\0";

/// Bytes held by live allocations now, as INFO `used_memory` reports them,
/// and jemalloc's `stats.allocated` (thread caches included).
pub fn allocator_used() -> (u64, u64) {
    use tikv_jemalloc_ctl::{epoch, stats, Access, AsName};
    // The statistics are cached until the epoch advances.
    let _ = epoch::advance();
    let allocated = stats::allocated::read().unwrap_or(0) as u64;
    let cached: usize = TCACHE_BYTES.name().read().unwrap_or(0);
    (allocated.saturating_sub(cached as u64), allocated)
}

/// Bytes this thread has freed less those it has allocated since start
/// (jemalloc's per-thread counters: two reads of thread-local memory; the
/// counters' addresses are looked up once per thread).
fn thread_net_freed() -> i64 {
    use tikv_jemalloc_ctl::thread::{self, ThreadLocal};
    thread_local! {
        static COUNTERS: Option<(ThreadLocal<u64>, ThreadLocal<u64>)> =
            thread::allocatedp::read()
                .and_then(|a| thread::deallocatedp::read().map(|d| (a, d)))
                .ok();
    }
    COUNTERS.with(|c| c.map_or(0, |(a, d)| d.get() as i64 - a.get() as i64))
}

thread_local! {
    /// The reading generation this thread last added to the copy under,
    /// and its [`thread_net_freed`] then.
    static PUBLISHED: std::cell::Cell<(u64, i64)> = const { std::cell::Cell::new((u64::MAX, 0)) };
}

/// The `maxmemory-policy` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Refuse DENYOOM commands over the limit.
    NoEviction,
    /// Evict among every key.
    AllKeys(Eviction),
    /// Evict among keys with an expiry.
    Volatile(Eviction),
}

impl Policy {
    /// The policy named `name` (a `maxmemory-policy` value).
    pub fn parse(name: &str) -> Policy {
        let rank = |r: &str| match r {
            "lru" => Some(Eviction::Lru),
            "lfu" => Some(Eviction::Lfu),
            "ttl" => Some(Eviction::Ttl),
            "random" => Some(Eviction::Random),
            _ => None,
        };
        match name.split_once('-') {
            Some(("allkeys", r)) => rank(r).map_or(Policy::NoEviction, Policy::AllKeys),
            Some(("volatile", r)) => rank(r).map_or(Policy::NoEviction, Policy::Volatile),
            _ => Policy::NoEviction,
        }
    }

    fn code(self) -> u8 {
        let r = |e: Eviction| e as u8;
        match self {
            Policy::NoEviction => 0,
            Policy::AllKeys(e) => 1 + r(e),
            Policy::Volatile(e) => 8 + r(e),
        }
    }

    fn from_code(c: u8) -> Policy {
        const RANKS: [Eviction; 4] = [
            Eviction::Lru,
            Eviction::Lfu,
            Eviction::Ttl,
            Eviction::Random,
        ];
        match c {
            1..=4 => Policy::AllKeys(RANKS[c as usize - 1]),
            8..=11 => Policy::Volatile(RANKS[c as usize - 8]),
            _ => Policy::NoEviction,
        }
    }

    /// Whether the policy counts access frequency (OBJECT FREQ).
    pub fn is_lfu(self) -> bool {
        matches!(
            self,
            Policy::AllKeys(Eviction::Lfu) | Policy::Volatile(Eviction::Lfu)
        )
    }
}

/// What [`perform_evictions`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Under the limit (or no limit).
    Ok,
    /// Still over after its time budget; the next command goes on.
    Running,
    /// Over the limit and nothing left to evict: DENYOOM commands fail.
    Fail,
}

/// The memory limit, its hot settings and the eviction state.
pub struct Memory {
    origin: Instant,
    /// `used_memory` at the last reading, less what evictions freed since.
    used: AtomicU64,
    /// When it was read, µs after `origin` (+1, 0 for never or for "read
    /// it again before the next check").
    read_at_us: AtomicU64,
    /// Counts readings: a thread's net allocations from before the last
    /// one are in it already.
    generation: AtomicU64,
    /// Hot copy of `maxmemory` (0: no limit).
    maxmemory: AtomicU64,
    policy: AtomicU8,
    samples: AtomicU64,
    tenacity: AtomicU64,
    /// Keys evicted since start (INFO evicted_keys).
    pub evicted_keys: AtomicU64,
    /// What every client's buffers held when last counted (see
    /// [`Memory::note_client`]).
    clients_mem: AtomicU64,
    /// `maxmemory-clients` in bytes (0: no limit).
    clients_limit: AtomicU64,
    /// Clients closed for `maxmemory-clients` (INFO evicted_clients).
    pub evicted_clients: AtomicU64,
    /// The eviction pool (sorted by score, the best last) and the policy
    /// its scores were taken under; held while evicting, so one thread
    /// evicts at once.
    pool: Mutex<(u8, Vec<Candidate>)>,
}

/// A key in the eviction pool: where it was sampled and a hash of it (no
/// copy of its bytes: most candidates are never evicted). The slot may
/// hold another key by the time it is evicted; the hash tells.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    score: u64,
    shard: usize,
    db: usize,
    slot: usize,
    hash: u64,
}

impl Memory {
    /// The state for `config`.
    pub fn new(config: &Config) -> Memory {
        let m = Memory {
            origin: Instant::now(),
            used: AtomicU64::new(0),
            read_at_us: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            maxmemory: AtomicU64::new(0),
            policy: AtomicU8::new(0),
            samples: AtomicU64::new(5),
            tenacity: AtomicU64::new(10),
            evicted_keys: AtomicU64::new(0),
            clients_mem: AtomicU64::new(0),
            clients_limit: AtomicU64::new(0),
            evicted_clients: AtomicU64::new(0),
            pool: Mutex::new((0, Vec::with_capacity(POOL_SIZE + 8))),
        };
        m.configure(config);
        m
    }

    /// Takes the settings of `config` (at start and after CONFIG SET).
    pub fn configure(&self, c: &Config) {
        // (The pool is not locked here: the caller may hold the config.)
        let policy = Policy::parse(&c.maxmemory_policy);
        // Without a limit nothing kept the copy current: the next check
        // reads the allocator.
        self.read_at_us.store(0, Ordering::Relaxed);
        self.maxmemory.store(c.maxmemory, Ordering::Relaxed);
        self.clients_limit.store(
            clients_limit(c.maxmemory_clients, c.maxmemory),
            Ordering::Relaxed,
        );
        self.policy.store(policy.code(), Ordering::Relaxed);
        self.samples
            .store(c.maxmemory_samples.clamp(1, 64), Ordering::Relaxed);
        self.tenacity
            .store(c.maxmemory_eviction_tenacity.min(100), Ordering::Relaxed);
        access::set_mode(if policy.is_lfu() {
            Mode::Lfu {
                log_factor: c.lfu_log_factor.min(u32::MAX as u64) as u32,
                decay_minutes: c.lfu_decay_time.min(i32::MAX as u64) as u32,
            }
        } else {
            Mode::Lru
        });
    }

    /// The eviction policy now.
    pub fn policy(&self) -> Policy {
        Policy::from_code(self.policy.load(Ordering::Relaxed))
    }

    /// The limit, 0 for none.
    pub fn maxmemory(&self) -> u64 {
        self.maxmemory.load(Ordering::Relaxed)
    }

    /// `used_memory`: the last reading, kept current by every checking
    /// thread's own counters (read afresh first if there is none).
    #[inline]
    pub fn used(&self) -> u64 {
        let at = self.read_at_us.load(Ordering::Relaxed);
        if at == 0 {
            self.read_if(at);
        }
        self.publish(PUBLISH_AT);
        self.used.load(Ordering::Relaxed)
    }

    /// Reads the allocator afresh when a limit is set and the last reading
    /// is [`REFRESH`] old: the cron's call, every tick.
    pub fn refresh_if_due(&self) {
        if self.maxmemory() == 0 {
            return;
        }
        let now = self.origin.elapsed().as_micros() as u64 + 1;
        let at = self.read_at_us.load(Ordering::Relaxed);
        if at == 0 || now.saturating_sub(at) >= REFRESH.as_micros() as u64 {
            self.read_if(at);
        }
    }

    /// Reads the allocator into the copy unless another thread did since
    /// the reading of time `at` (the others use the copy meanwhile).
    #[cold]
    fn read_if(&self, at: u64) {
        let now = self.origin.elapsed().as_micros() as u64 + 1;
        if self
            .read_at_us
            .compare_exchange(at, now, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            self.used.store(allocator_used().0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    /// Adds to the copy what this thread allocated less what it freed
    /// since it last did, once that is `at_least` bytes either way. After
    /// a fresh reading a thread starts counting anew (what it allocated
    /// before is in the reading).
    #[inline]
    fn publish(&self, at_least: i64) {
        let generation = self.generation.load(Ordering::Acquire);
        let freed = thread_net_freed();
        let (seen, last) = PUBLISHED.get();
        if seen != generation {
            PUBLISHED.set((generation, freed));
            return;
        }
        let net_allocated = last - freed;
        if net_allocated.abs() < at_least {
            return;
        }
        PUBLISHED.set((generation, freed));
        if net_allocated > 0 {
            self.used.fetch_add(net_allocated as u64, Ordering::Relaxed);
        } else {
            self.freed(net_allocated.unsigned_abs());
        }
    }

    /// Records a fresh reading (INFO reads the allocator itself).
    pub fn note_reading(&self, used: u64) {
        let now = self.origin.elapsed().as_micros() as u64 + 1;
        self.used.store(used, Ordering::Relaxed);
        self.read_at_us.store(now, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Whether a limit is set and the last reading, less `not_counted`
    /// (see [`not_counted`]), is over it: the cheap test before every
    /// command.
    #[inline]
    pub fn over_limit(&self, not_counted: u64) -> bool {
        let max = self.maxmemory();
        max != 0 && self.used().saturating_sub(not_counted) > max
    }

    /// Records that client `c`'s buffers hold `bytes` now; returns whether
    /// the clients together are past `maxmemory-clients` (then call
    /// [`evict_clients`]). A figure that did not change costs a load.
    #[inline]
    pub fn note_client(&self, c: &ClientInfo, bytes: usize) -> bool {
        if c.killed.load(Ordering::Relaxed) {
            self.forget_client(c);
            return false;
        }
        let old = c.counted_mem.load(Ordering::Relaxed);
        if old != bytes {
            c.counted_mem.store(bytes, Ordering::Relaxed);
            if bytes > old {
                self.clients_mem
                    .fetch_add((bytes - old) as u64, Ordering::Relaxed);
            } else {
                self.uncount((old - bytes) as u64);
            }
        }
        let limit = self.clients_limit.load(Ordering::Relaxed);
        limit != 0 && self.clients_mem.load(Ordering::Relaxed) >= limit
    }

    /// Takes client `c` out of the total (it is closing).
    pub fn forget_client(&self, c: &ClientInfo) {
        let old = c.counted_mem.swap(0, Ordering::Relaxed);
        self.uncount(old as u64);
    }

    fn uncount(&self, bytes: u64) {
        let _ = self
            .clients_mem
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                Some(u.saturating_sub(bytes))
            });
    }

    fn freed(&self, bytes: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                Some(u.saturating_sub(bytes))
            });
    }

    /// How long one call may evict (Redis's `evictionTimeLimitUs`): 50 µs
    /// per tenacity step up to 10, then 15% more a step; 100: no limit.
    fn time_limit(&self) -> Option<Duration> {
        let t = self.tenacity.load(Ordering::Relaxed);
        match t {
            0..=10 => Some(Duration::from_micros(50 * t.max(1))),
            11..=99 => Some(Duration::from_micros(
                (500.0 * 1.15f64.powi(t as i32 - 10)) as u64,
            )),
            _ => None,
        }
    }
}

/// `maxmemory-clients` in bytes for the setting `setting` (negative: a
/// percentage of `maxmemory`), as Redis's `getClientEvictionLimit`: 0 for
/// none, at least [`MIN_CLIENTS_LIMIT`].
fn clients_limit(setting: i64, maxmemory: u64) -> u64 {
    let bytes = match setting {
        0 => return 0,
        // A percentage of no limit is no limit.
        n if n < 0 && maxmemory == 0 => return 0,
        n if n < 0 => (maxmemory as f64 * n.unsigned_abs() as f64 / 100.0) as u64,
        n => n as u64,
    };
    bytes.max(MIN_CLIENTS_LIMIT)
}

/// Closes the clients whose buffers hold most until all of them together
/// hold less than `maxmemory-clients` (Redis's `evictClients`), skipping
/// those [`ClientInfo::evictable`] refuses. A closed client is taken out
/// of the total at once, so that other connections do not close more for
/// it while it goes.
pub fn evict_clients(server: &Server) {
    let mem = &server.memory;
    let limit = mem.clients_limit.load(Ordering::Relaxed);
    if limit == 0 || mem.clients_mem.load(Ordering::Relaxed) < limit {
        return;
    }
    let mut by_size: Vec<(usize, std::sync::Arc<ClientInfo>)> = server
        .clients
        .iter()
        .filter(|c| c.evictable())
        .map(|c| (c.buffer_memory(), c.value().clone()))
        .collect();
    by_size.sort_by_key(|c| std::cmp::Reverse(c.0));
    for (_, c) in by_size {
        if mem.clients_mem.load(Ordering::Relaxed) < limit {
            break;
        }
        tracing::info!(
            "Evicting client: id={} addr={} laddr={} name={} tot-mem={}",
            c.id,
            c.addr,
            c.laddr,
            String::from_utf8_lossy(&c.name.lock()),
            c.buffer_memory(),
        );
        c.kill();
        mem.forget_client(&c);
        mem.evicted_clients.fetch_add(1, Ordering::Relaxed);
    }
}

/// Memory `maxmemory` leaves out (INFO `mem_not_counted_for_evict`): the
/// replication stream's bytes beyond `repl-backlog-size`, held for
/// replicas that lag, as Redis leaves its replication buffer past the
/// backlog's size out. Counting them would evict keys for memory that
/// goes back once the replicas catch up (or, with the keys all gone, fail
/// every write while they do).
pub fn not_counted(server: &Server) -> u64 {
    server.aof.backlog.beyond_size()
}

/// Evicts keys until memory is under `maxmemory` (or the time budget of
/// `maxmemory-eviction-tenacity` is spent). The caller holds no shard lock.
pub fn perform_evictions(server: &Server) -> Outcome {
    let mem = &server.memory;
    if !mem.over_limit(not_counted(server)) {
        return Outcome::Ok;
    }
    let policy = mem.policy();
    let (eviction, volatile) = match policy {
        Policy::NoEviction => return Outcome::Fail,
        Policy::AllKeys(e) => (e, false),
        Policy::Volatile(e) => (e, true),
    };
    let mut guard = mem.pool.lock();
    let (pool_policy, pool) = &mut *guard;
    if *pool_policy != policy.code() {
        // Candidates ranked under another policy are worth nothing.
        pool.clear();
        *pool_policy = policy.code();
    }
    // Another thread may have evicted while this one waited.
    let used = mem.used().saturating_sub(not_counted(server));
    let max = mem.maxmemory();
    if used <= max {
        return Outcome::Ok;
    }
    let to_free = used - max;
    let start = Instant::now();
    let limit = mem.time_limit();
    let base = thread_net_freed();
    let mut freed = 0u64;
    let mut evicted = 0u64;
    let samples = mem.samples.load(Ordering::Relaxed) as usize;
    // Scores taken a little late rank keys the same.
    let now_ms = super::unix_ms();
    let mut outcome = Outcome::Ok;
    while freed < to_free {
        let Some(c) = next_candidate(server, pool, eviction, volatile, samples, now_ms) else {
            outcome = Outcome::Fail;
            break;
        };
        if evict(server, c) {
            evicted += 1;
            freed = (thread_net_freed() - base).max(0) as u64;
            if evicted.is_multiple_of(16) && limit.is_some_and(|l| start.elapsed() > l) {
                outcome = Outcome::Running;
                break;
            }
        }
    }
    drop(guard);
    // What the evictions freed (this thread's counters have it all).
    mem.publish(1);
    if outcome == Outcome::Fail && evicted > 0 && !mem.over_limit(not_counted(server)) {
        outcome = Outcome::Ok;
    }
    outcome
}

/// The best key to evict next: from a fresh sample of one shard merged
/// into the pool, or (random policies) the sample itself. `None` when no
/// shard holds a candidate.
fn next_candidate(
    server: &Server,
    pool: &mut Vec<Candidate>,
    eviction: Eviction,
    volatile: bool,
    samples: usize,
    now_ms: u64,
) -> Option<Candidate> {
    let ks = &server.keyspace;
    let first = access::random_u64() as usize % SHARD_COUNT;
    let n = if eviction == Eviction::Random {
        1
    } else {
        samples
    };
    for step in 0..SHARD_COUNT {
        let shard = (first + step) % SHARD_COUNT;
        let guard = ks.lock_one(shard, false);
        let mut found = 0;
        let dbs = &guard.shard().dbs;
        // Most databases never hold a key: not even their tables are read
        // (16 databases' tables would be some 30 cache lines a sample).
        for db in ks.dbs_in_use() {
            let Some(part) = dbs.get(db) else {
                break;
            };
            if (volatile && part.expires_len() == 0) || part.is_empty() {
                continue;
            }
            part.sample_for_eviction(eviction, volatile, n, now_ms, &mut |score, slot, key| {
                found += 1;
                // The pool is sorted, worst first: most samples rank no
                // better than a full pool's worst, which ends it here.
                if pool.len() >= POOL_SIZE && pool.first().is_none_or(|w| w.score >= score) {
                    return;
                }
                if pool
                    .iter()
                    .any(|c| c.slot == slot && c.db == db && c.shard == shard)
                {
                    return;
                }
                if pool.len() >= POOL_SIZE {
                    pool.remove(0);
                }
                let at = pool.partition_point(|c| c.score <= score);
                pool.insert(
                    at,
                    Candidate {
                        score,
                        shard,
                        db,
                        slot,
                        hash: ks.hasher().hash_one(key),
                    },
                );
            });
        }
        drop(guard);
        if found > 0 || !pool.is_empty() {
            break;
        }
    }
    pool.pop()
}

/// Removes candidate `c` for maxmemory, if its key is still in its slot.
fn evict(server: &Server, c: Candidate) -> bool {
    let ks = &server.keyspace;
    let idx = c.shard;
    let mut guard = ks.lock_one(idx, true);
    let taken = if server.aof.rewriting() {
        // A rewrite copies the shard before it changes (checked with the
        // shard held, as the journal does).
        drop(guard);
        let mut locked = ks.lock_sorted(&[idx], true);
        journal::before_write(
            &server.aof,
            || Some([idx].into_iter().collect()),
            &mut locked,
        );
        locked.guard_mut(idx).and_then(|g| take(server, g, c))
    } else {
        take(server, &mut guard, c)
    };
    // (The lock is let go before the entry is freed.)
    let Some((entry, key)) = taken else {
        return false;
    };
    drop(entry);
    server.memory.evicted_keys.fetch_add(1, Ordering::Relaxed);
    if let Some(key) = key {
        mem_evicted(server, c.db, key);
    }
    true
}

/// Takes candidate `c` out of its shard (`guard`, held for writing) if
/// its key is still in its slot: its entry, and a copy of its key when
/// something must hear of it (the AOF and replicas as a DEL, client-side
/// caching, the `evicted` event); most evictions copy nothing.
fn take(
    server: &Server,
    guard: &mut ShardGuard<'_>,
    c: Candidate,
) -> Option<(Entry, Option<Bytes>)> {
    let ks = &server.keyspace;
    let part = guard.shard_mut()?.dbs.get_mut(c.db)?;
    let key = part
        .key_at(c.slot)
        .filter(|k| ks.hasher().hash_one(k) == c.hash)?;
    part.touch_watched(key);
    let propagate = journal::feeding(&server.aof) || server.tracking.active();
    let flags = server.notify_flags.load(Ordering::Relaxed);
    let copy =
        (propagate || notify::enabled(flags, Class::EVICTED)).then(|| Bytes::copy_from_slice(key));
    let entry = part.remove_at(c.slot)?;
    if let Some(key) = copy.as_ref().filter(|_| propagate) {
        // In the AOF as a DEL, in order with the commands on this shard.
        server.removed_expired(c.db, vec![key.clone()]);
    }
    Some((entry, copy))
}

/// The `evicted` keyspace event for `key`, if enabled.
fn mem_evicted(server: &Server, db: usize, key: Bytes) {
    let flags = server.notify_flags.load(Ordering::Relaxed);
    if !notify::enabled(flags, Class::EVICTED) {
        return;
    }
    let events = [Event {
        name: "evicted",
        db,
        key,
    }];
    let mut nowhere = Vec::new();
    let mut own = Own {
        id: 0,
        resp3: false,
        out: &mut nowhere,
    };
    notify::publish(&server.pubsub, flags, &events, &mut own);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_limit_as_redis_computes_it() {
        assert_eq!(clients_limit(0, 1 << 30), 0);
        assert_eq!(clients_limit(-10, 0), 0);
        assert_eq!(clients_limit(-10, 100 << 20), 10 << 20);
        assert_eq!(clients_limit(1024, 0), MIN_CLIENTS_LIMIT);
        assert_eq!(clients_limit(-1, 1 << 20), MIN_CLIENTS_LIMIT);
        assert_eq!(clients_limit(5 << 20, 0), 5 << 20);
    }

    #[test]
    fn policies_round_trip() {
        for name in [
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "noeviction",
        ] {
            let p = Policy::parse(name);
            assert_eq!(Policy::from_code(p.code()), p, "{name}");
            assert_eq!(p.is_lfu(), name.ends_with("lfu"));
            assert_eq!(p == Policy::NoEviction, name == "noeviction");
        }
    }
}
