//! `maxmemory` through a real client: the limit held under SET and ZADD
//! loads by every policy, which keys each policy evicts, OOM under
//! noeviction (and in MULTI / scripts as Redis 7.0 decides), OBJECT
//! FREQ / IDLETIME, the `evicted` keyspace event.

mod common;

use std::time::{Duration, Instant};

use common::{info, wait_synced, TestServer};

const MB: u64 = 1024 * 1024;

fn field(c: &mut redis::Connection, section: &str, name: &str) -> u64 {
    info(c, section)
        .get(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("INFO {name}"))
}

fn used(c: &mut redis::Connection) -> u64 {
    field(c, "memory", "used_memory")
}

fn evicted(c: &mut redis::Connection) -> u64 {
    field(c, "stats", "evicted_keys")
}

fn config_set(c: &mut redis::Connection, name: &str, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(c)
        .expect("CONFIG SET");
}

/// A server with `policy` and a limit of `mb` MB above what it uses idle.
fn limited(policy: &str, mb: u64) -> (TestServer, redis::Connection, u64) {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let limit = used(&mut c) + mb * MB;
    config_set(&mut c, "maxmemory-policy", policy);
    config_set(&mut c, "maxmemory", &limit.to_string());
    (s, c, limit)
}

/// SETs `prefix{i}` for i in `range` with a `size`-byte value (and an
/// expiry in `ttl(i)` seconds), pipelined by 500.
fn set_keys(
    c: &mut redis::Connection,
    prefix: &str,
    range: std::ops::Range<u64>,
    size: usize,
    ttl: impl Fn(u64) -> Option<u64>,
) {
    let value = vec![b'v'; size];
    let ids: Vec<u64> = range.collect();
    for chunk in ids.chunks(500) {
        let mut p = redis::pipe();
        for &i in chunk {
            let cmd = p.cmd("SET").arg(format!("{prefix}{i}")).arg(&value[..]);
            if let Some(t) = ttl(i) {
                cmd.arg("EX").arg(t);
            }
        }
        let replies: Vec<redis::Value> = p.query(c).expect("SET pipeline");
        for r in replies {
            assert_eq!(r, redis::Value::Okay, "SET {prefix}");
        }
    }
}

/// How many of `prefix{i}`, i in `range`, exist.
fn existing(c: &mut redis::Connection, prefix: &str, range: std::ops::Range<u64>) -> u64 {
    let ids: Vec<u64> = range.collect();
    let mut n = 0;
    for chunk in ids.chunks(500) {
        let mut p = redis::pipe();
        for &i in chunk {
            p.cmd("EXISTS").arg(format!("{prefix}{i}"));
        }
        let got: Vec<u64> = p.query(c).expect("EXISTS pipeline");
        n += got.iter().sum::<u64>();
    }
    n
}

/// used_memory within 5% of the limit. A command that ran out of its
/// eviction time may leave memory over until the next one (or the cron's
/// background eviction) carries on, as in Redis: a few readings over 1 s.
fn assert_within_limit(c: &mut redis::Connection, limit: u64, what: &str) {
    let mut u = used(c);
    for _ in 0..20 {
        if u as f64 <= limit as f64 * 1.05 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        u = used(c);
    }
    assert!(
        u as f64 <= limit as f64 * 1.05,
        "{what}: used_memory {u} over the limit {limit} by more than 5%"
    );
}

#[test]
fn a_set_load_is_held_under_the_limit_by_every_eviction_policy() {
    for policy in ["allkeys-lru", "allkeys-lfu", "allkeys-random"] {
        let (_s, mut c, limit) = limited(policy, 4);
        // ~12 MB of values into a 4 MB budget.
        set_keys(&mut c, "k:", 0..40_000, 300, |_| None);
        assert_within_limit(&mut c, limit, policy);
        // Every command evicts while over the limit: lift it to count.
        config_set(&mut c, "maxmemory", "0");
        let ev = evicted(&mut c);
        let left: u64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
        assert!(ev > 20_000, "{policy}: {ev} evicted");
        assert_eq!(left + ev, 40_000, "{policy}: every key kept or evicted");
        // (Which keys went is left to the hot-key tests below: the load
        // takes less than the LRU clock's second and the LFU counter's
        // first increment, so every key here looks alike to every policy,
        // as in Redis, and the newest may go too.)
    }
}

#[test]
fn volatile_policies_evict_only_keys_with_an_expiry() {
    for policy in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let (_s, mut c, limit) = limited(policy, 4);
        // 1 MB of keys without expiry, then 12 MB with one.
        set_keys(&mut c, "keep:", 0..3000, 300, |_| None);
        set_keys(&mut c, "tmp:", 0..40_000, 300, |i| Some(100_000 + i));
        assert_within_limit(&mut c, limit, policy);
        assert_eq!(existing(&mut c, "keep:", 0..3000), 3000, "{policy}");
        let ev = evicted(&mut c);
        assert!(ev > 20_000, "{policy}: {ev} evicted");
        if policy == "volatile-ttl" {
            // The nearest expiries go first: the keys written first.
            let early = existing(&mut c, "tmp:", 0..20_000);
            let late = existing(&mut c, "tmp:", 20_000..40_000);
            assert!(
                early * 10 < late,
                "volatile-ttl kept {early} early and {late} late keys"
            );
        }
        // Nothing left to evict but keys without expiry: OOM.
        let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
        config_set(&mut c, "maxmemory", "1");
        let e = redis::cmd("SET")
            .arg("x")
            .arg("1")
            .query::<()>(&mut c)
            .unwrap_err();
        assert_eq!(e.code(), Some("OOM"), "{policy}: {e}");
    }
}

#[test]
fn keys_of_every_database_are_evicted_swapped_ones_too() {
    // Eviction samples only the databases that have held keys: one first
    // written after the limit is set, and one that got its keys by SWAPDB
    // alone, must be among them.
    let (_s, mut c, limit) = limited("allkeys-lru", 4);
    let _: () = redis::cmd("SELECT").arg(9).query(&mut c).unwrap();
    set_keys(&mut c, "nine:", 0..40_000, 300, |_| None);
    assert_within_limit(&mut c, limit, "db 9");
    let ev = evicted(&mut c);
    assert!(ev > 20_000, "db 9: {ev} evicted");
    let _: () = redis::cmd("SELECT").arg(0).query(&mut c).unwrap();
    let in_0: u64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(in_0, 0);
    // Database 12 never took a key itself: its keys come from db 9. Then
    // a write to db 12 while over the limit evicts among them.
    let _: () = redis::cmd("SWAPDB").arg(9).arg(12).query(&mut c).unwrap();
    let before = evicted(&mut c);
    config_set(&mut c, "maxmemory", &(limit - 2 * MB).to_string());
    let _: () = redis::cmd("SELECT").arg(12).query(&mut c).unwrap();
    let _: () = redis::cmd("SET")
        .arg("twelve")
        .arg("v")
        .query(&mut c)
        .unwrap();
    assert_within_limit(&mut c, limit - 2 * MB, "db 12");
    assert!(evicted(&mut c) > before + 1000, "db 12's keys were evicted");
    let _: () = redis::cmd("SELECT").arg(9).query(&mut c).unwrap();
    let in_9: u64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(in_9, 0, "db 9 holds nothing after the swap");
}

#[test]
fn a_zadd_load_is_held_under_the_limit() {
    let (_s, mut c, limit) = limited("allkeys-lru", 4);
    // 150 members a board: past the listpack, in the skiplist.
    for board in 0..600u64 {
        let mut p = redis::pipe();
        for m in 0..150u64 {
            p.cmd("ZADD")
                .arg(format!("board:{board}"))
                .arg(m * 7 + board)
                .arg(format!("player:{m:08}:{board}"))
                .ignore();
        }
        let _: () = p.query(&mut c).expect("ZADD pipeline");
    }
    assert_within_limit(&mut c, limit, "ZADD");
    let ev = evicted(&mut c);
    assert!(ev > 100, "{ev} boards evicted");
    let n: u64 = redis::cmd("ZCARD").arg("board:599").query(&mut c).unwrap();
    assert_eq!(n, 150);
}

/// Fills to about 70% of the limit with `cold:` and `hot:` keys, runs
/// `use_hot` on the hot half, then writes `new:` keys until a fifth of the
/// first keys (`evict_per_key` of them per hot key) have been evicted;
/// returns the survivors (hot, cold) and the keys of each kind.
fn survivors(
    policy: &str,
    use_hot: impl Fn(&mut redis::Connection, u64),
    pause: Duration,
    evict_per_key: f64,
) -> (u64, u64, u64) {
    let (_s, mut c, limit) = limited(policy, 4);
    let idle = limit - 4 * MB;
    let mut n = 0;
    while used(&mut c) < idle + 28 * MB / 10 {
        set_keys(&mut c, "cold:", n..n + 500, 300, |_| None);
        set_keys(&mut c, "hot:", n..n + 500, 300, |_| None);
        n += 500;
        assert!(n < 100_000, "never filled");
    }
    std::thread::sleep(pause);
    use_hot(&mut c, n);
    let mut next = 0;
    while (evicted(&mut c) as f64) < n as f64 * evict_per_key {
        set_keys(&mut c, "new:", next..next + 500, 300, |_| None);
        next += 500;
        assert!(next < 200_000, "never evicted");
    }
    let hot = existing(&mut c, "hot:", 0..n);
    let cold = existing(&mut c, "cold:", 0..n);
    (hot, cold, n)
}

fn read_all(c: &mut redis::Connection, prefix: &str, n: u64, times: usize) {
    for _ in 0..times {
        let ids: Vec<u64> = (0..n).collect();
        for chunk in ids.chunks(500) {
            let mut p = redis::pipe();
            for &i in chunk {
                p.cmd("GET").arg(format!("{prefix}{i}")).ignore();
            }
            let _: () = p.query(c).unwrap();
        }
    }
}

#[test]
fn allkeys_lru_keeps_recently_read_keys() {
    // The LRU clock counts seconds: the cold keys are 2 s idle when the
    // hot ones are read.
    let (hot, cold, n) = survivors(
        "allkeys-lru",
        |c, n| read_all(c, "hot:", n, 1),
        Duration::from_millis(2100),
        0.4,
    );
    let (h, k) = (hot as f64 / n as f64, cold as f64 / n as f64);
    assert!(
        h > 0.9 && h > k + 0.3,
        "hot kept {hot}/{n}, cold kept {cold}/{n}"
    );
}

#[test]
fn allkeys_lfu_keeps_frequently_read_keys() {
    let (hot, cold, n) = survivors(
        "allkeys-lfu",
        |c, n| read_all(c, "hot:", n, 8),
        Duration::ZERO,
        // New keys count as little as cold ones: they share the evictions.
        1.0,
    );
    let (h, k) = (hot as f64 / n as f64, cold as f64 / n as f64);
    assert!(
        h > 0.9 && h > k + 0.3,
        "hot kept {hot}/{n}, cold kept {cold}/{n}"
    );
}

#[test]
fn noeviction_refuses_writes_and_serves_reads() {
    let (_s, mut c, limit) = limited("noeviction", 3);
    let value = vec![b'v'; 1000];
    let mut i = 0u64;
    let err = loop {
        match redis::cmd("SET")
            .arg(format!("k:{i}"))
            .arg(&value[..])
            .query::<()>(&mut c)
        {
            Ok(()) => i += 1,
            Err(e) => break e,
        }
        assert!(i < 20_000, "never refused");
    };
    assert_eq!(err.code(), Some("OOM"));
    assert_eq!(
        err.detail(),
        Some("command not allowed when used memory > 'maxmemory'.")
    );
    assert_within_limit(&mut c, limit, "noeviction");
    assert_eq!(evicted(&mut c), 0);
    // Reads and deletions go on; a DENYOOM command fails.
    let v: Vec<u8> = redis::cmd("GET").arg("k:0").query(&mut c).unwrap();
    assert_eq!(v, value);
    let e = redis::cmd("ZADD")
        .arg("z")
        .arg(1)
        .arg("m")
        .query::<()>(&mut c)
        .unwrap_err();
    assert_eq!(e.code(), Some("OOM"));
    // A script that reads is served; its first write is refused.
    let one: u64 = redis::cmd("EVAL")
        .arg("return redis.call('exists', KEYS[1])")
        .arg(1)
        .arg("k:0")
        .query(&mut c)
        .unwrap();
    assert_eq!(one, 1);
    let e = redis::cmd("EVAL")
        .arg("return redis.call('set', 'x', '1')")
        .arg(0)
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(e.to_string().contains("OOM"), "{e}");
    // Freeing memory lets writes in again.
    let ids: Vec<String> = (0..i).map(|j| format!("k:{j}")).collect();
    for chunk in ids.chunks(500) {
        let _: u64 = redis::cmd("DEL").arg(chunk).query(&mut c).unwrap();
    }
    let _: () = redis::cmd("SET").arg("x").arg("1").query(&mut c).unwrap();
}

#[test]
fn exec_with_a_queued_denyoom_command_is_aborted_over_the_limit() {
    let s = TestServer::start(&[]);
    let mut a = s.conn();
    let mut admin = s.conn();
    let _: () = redis::cmd("MULTI").query(&mut a).unwrap();
    let _: () = redis::cmd("SET").arg("x").arg("1").query(&mut a).unwrap();
    config_set(&mut admin, "maxmemory", "1");
    let e = redis::cmd("EXEC").query::<()>(&mut a).unwrap_err();
    assert_eq!(e.code(), Some("EXECABORT"), "{e}");
    assert!(e.to_string().contains("OOM command not allowed"), "{e}");
    // Inside MULTI even a read is refused while over the limit.
    let _: () = redis::cmd("MULTI").query(&mut a).unwrap();
    let e = redis::cmd("GET").arg("x").query::<()>(&mut a).unwrap_err();
    assert_eq!(e.code(), Some("OOM"));
    let e = redis::cmd("EXEC").query::<()>(&mut a).unwrap_err();
    assert_eq!(e.code(), Some("EXECABORT"));
    let none: Option<String> = redis::cmd("GET").arg("x").query(&mut a).unwrap();
    assert_eq!(none, None);
    // A script that starts under the limit may go over it.
    let limit = used(&mut admin) + MB;
    config_set(&mut admin, "maxmemory", &limit.to_string());
    let n: u64 = redis::cmd("EVAL")
        .arg("for i=1,40 do redis.call('set', 'big'..i, string.rep('x', 100000)) end return 40")
        .arg(0)
        .query(&mut a)
        .unwrap();
    assert_eq!(n, 40);
    let e = redis::cmd("SET")
        .arg("y")
        .arg("1")
        .query::<()>(&mut a)
        .unwrap_err();
    assert_eq!(e.code(), Some("OOM"));
}

#[test]
fn object_freq_and_idletime_count() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    config_set(&mut c, "maxmemory-policy", "allkeys-lfu");
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let freq = |c: &mut redis::Connection| -> u64 {
        redis::cmd("OBJECT").arg("FREQ").arg("k").query(c).unwrap()
    };
    assert_eq!(freq(&mut c), 5);
    for _ in 0..200 {
        let _: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    }
    let f = freq(&mut c);
    assert!((7..=20).contains(&f), "freq {f} after 200 reads");
    // OBJECT itself does not count as an access.
    assert_eq!(freq(&mut c), f);
    let e = redis::cmd("OBJECT")
        .arg("IDLETIME")
        .arg("k")
        .query::<u64>(&mut c)
        .unwrap_err();
    assert!(e
        .to_string()
        .contains("An LFU maxmemory policy is selected"));

    config_set(&mut c, "maxmemory-policy", "allkeys-lru");
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let idle = |c: &mut redis::Connection| -> u64 {
        redis::cmd("OBJECT")
            .arg("IDLETIME")
            .arg("k")
            .query(c)
            .unwrap()
    };
    let start = Instant::now();
    std::thread::sleep(Duration::from_millis(2100));
    let i = idle(&mut c);
    assert!(
        i >= 1 && i <= start.elapsed().as_secs() + 1,
        "idle {i} after 2.1 s"
    );
    let _: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(idle(&mut c), 0);
    let e = redis::cmd("OBJECT")
        .arg("FREQ")
        .arg("k")
        .query::<u64>(&mut c)
        .unwrap_err();
    assert!(e
        .to_string()
        .contains("An LFU maxmemory policy is not selected"));
}

#[test]
fn evicted_keys_raise_the_evicted_event() {
    let (s, mut c, _) = limited("allkeys-random", 2);
    config_set(&mut c, "notify-keyspace-events", "Ee");
    let mut sub = s.conn();
    sub.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut ps = sub.as_pubsub();
    ps.subscribe("__keyevent@0__:evicted").unwrap();
    set_keys(&mut c, "k:", 0..10_000, 300, |_| None);
    let ev = evicted(&mut c);
    assert!(ev > 0);
    let msg = ps.get_message().expect("an evicted event");
    assert_eq!(msg.get_channel_name(), "__keyevent@0__:evicted");
    let key: String = msg.get_payload().unwrap();
    assert!(key.starts_with("k:"), "{key}");
    let n: u64 = redis::cmd("EXISTS").arg(&key).query(&mut c).unwrap();
    assert_eq!(n, 0, "{key} was evicted");
}

/// The replication stream a lagging replica holds is left out of
/// `maxmemory` (INFO `mem_not_counted_for_evict`, as Redis leaves its
/// replication buffer past the backlog's size out), and goes back to the
/// allocator once the replica has caught up. Before, a burst of writes
/// while a replica waited for its sync left the stream's buffer at its
/// largest for good: under a limit between the data and the data plus
/// that buffer, the primary evicted every key and then refused every
/// write.
#[test]
fn a_lagging_replicas_stream_is_not_counted_and_is_given_back() {
    let primary = TestServer::start(&["--save", "", "--repl-diskless-sync-delay", "3"]);
    let mut pc = primary.conn();
    set_keys(&mut pc, "base:", 0..40_000, 200, |_| None);
    let data = used(&mut pc);
    let replica = TestServer::start(&["--save", ""]);
    let mut rc = replica.conn();
    let r: String = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(primary.port)
        .query(&mut rc)
        .expect("REPLICAOF");
    assert!(r.starts_with("OK"), "{r}");
    // While the replica waits for its sync (3 s), the stream keeps every
    // write for it: 3 passes over the same keys, about 27 MB of commands,
    // the data the same size.
    for pass in 0..3u8 {
        let value = vec![b'a' + pass; 200];
        let ids: Vec<u64> = (0..40_000).collect();
        for chunk in ids.chunks(500) {
            let mut p = redis::pipe();
            for i in chunk {
                p.cmd("SET").arg(format!("base:{i}")).arg(&value).ignore();
            }
            let _: () = p.query(&mut pc).expect("SET");
        }
    }
    let held = field(&mut pc, "memory", "mem_not_counted_for_evict");
    assert!(held > 16 * MB, "the lagging replica's stream: {held} bytes");
    assert_eq!(
        field(&mut pc, "memory", "mem_clients_slaves"),
        held,
        "the part past the backlog's size"
    );
    wait_synced(&mut pc, &mut rc);
    // The next change trims what no replica needs any more.
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("sync")
        .query(&mut pc)
        .unwrap();
    let total = field(&mut pc, "memory", "mem_total_replication_buffers");
    assert!(
        total <= 4 * MB,
        "stream after the replica caught up: {total} bytes"
    );
    // A limit above the data, far below the data and the burst's stream.
    config_set(&mut pc, "maxmemory-policy", "allkeys-lru");
    config_set(&mut pc, "maxmemory", &(data + 8 * MB).to_string());
    set_keys(&mut pc, "new:", 0..1_000, 100, |_| None);
    assert_eq!(evicted(&mut pc), 0, "nothing to evict for");
    let n: u64 = redis::cmd("DBSIZE").query(&mut pc).unwrap();
    assert_eq!(n, 41_001);
    wait_synced(&mut pc, &mut rc);
    let m: u64 = redis::cmd("DBSIZE").query(&mut rc).unwrap();
    assert_eq!(m, 41_001);
}
