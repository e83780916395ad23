//! Replication with real redis-server processes on loopback: Rostrum as
//! primary of a redis-server replica, as replica of a redis-server
//! primary, Rostrum to Rostrum, and the chain redis -> Rostrum -> redis;
//! disk and diskless full syncs, mixed writes then equal data, READONLY,
//! WAIT, and partial resyncs after CLIENT KILL TYPE master / replica.

mod common;

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, info, temp_dir, wait_ready, TestServer};

/// A redis-server on a free port, stopped by PID on drop.
struct Redis {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl Redis {
    fn start() -> Redis {
        let dir = temp_dir("redis");
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--daemonize",
                    "no",
                    "--repl-diskless-sync-delay",
                    "0",
                    "--loglevel",
                    "warning",
                ])
                .current_dir(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            if wait_ready(port, &mut child) {
                return Redis { child, port, dir };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("redis-server did not start");
    }

    fn conn(&self) -> redis::Connection {
        conn(self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn conn(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .expect("client")
        .get_connection_with_timeout(Duration::from_secs(5))
        .expect("connect")
}

fn rostrum(extra: &[&str]) -> TestServer {
    let mut args = vec!["--save", "", "--repl-diskless-sync-delay", "0"];
    args.extend_from_slice(extra);
    TestServer::start(&args)
}

fn replicaof(replica: &mut redis::Connection, port: u16) {
    let r: String = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(port)
        .query(replica)
        .expect("REPLICAOF");
    assert!(r.starts_with("OK"), "{r}");
}

/// Waits until the replica's link is up and its offset is the primary's.
fn wait_synced(primary: &mut redis::Connection, replica: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let p = info(primary, "replication");
        let r = info(replica, "replication");
        let up = r.get("master_link_status").map(String::as_str) == Some("up");
        if up && p.get("master_repl_offset") == r.get("slave_repl_offset") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "replica not in sync: primary {p:?} replica {r:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every key of databases 0..4, read by type, with whether it has a TTL.
fn snapshot(c: &mut redis::Connection) -> BTreeMap<(usize, Vec<u8>), String> {
    let mut out = BTreeMap::new();
    for db in 0..4 {
        let _: () = redis::cmd("SELECT").arg(db).query(c).expect("SELECT");
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
        for k in keys {
            let t: String = redis::cmd("TYPE").arg(&k).query(c).expect("TYPE");
            let v = match t.as_str() {
                "string" => format!("{:?}", q::<Option<Vec<u8>>>(c, "GET", &k, &[])),
                "hash" => {
                    let m: BTreeMap<Vec<u8>, Vec<u8>> = q(c, "HGETALL", &k, &[]);
                    format!("{m:?}")
                }
                "list" => format!("{:?}", q::<Vec<Vec<u8>>>(c, "LRANGE", &k, &["0", "-1"])),
                "set" => {
                    let mut m: Vec<Vec<u8>> = q(c, "SMEMBERS", &k, &[]);
                    m.sort();
                    format!("{m:?}")
                }
                "zset" => format!(
                    "{:?}",
                    q::<Vec<(Vec<u8>, f64)>>(c, "ZRANGE", &k, &["0", "-1", "WITHSCORES"])
                ),
                "stream" => format!("{:?}", q::<redis::Value>(c, "XRANGE", &k, &["-", "+"])),
                other => {
                    // A leaderboard (Rostrum's own type): its members in order.
                    let v: redis::Value = redis::cmd("LB.RANGE")
                        .arg(&k)
                        .arg(0)
                        .arg(-1)
                        .query(c)
                        .unwrap_or(redis::Value::Nil);
                    format!("{other} {v:?}")
                }
            };
            let pttl: i64 = q(c, "PTTL", &k, &[]);
            out.insert((db, k), format!("{t} {v} ttl={}", pttl > 0));
        }
    }
    let _: () = redis::cmd("SELECT").arg(0).query(c).expect("SELECT");
    out
}

fn q<T: redis::FromRedisValue>(
    c: &mut redis::Connection,
    name: &str,
    key: &[u8],
    rest: &[&str],
) -> T {
    redis::cmd(name)
        .arg(key)
        .arg(rest)
        .query(c)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// `n` mixed writes in pipelines of 100: sorted sets, bitmaps, sets with
/// SPOP, SET EX, INCRBYFLOAT, EXPIRE with keys that expire, EVAL,
/// MULTI/EXEC, hashes, lists, in several databases; LB.* and streams
/// too when `boards` (Rostrum to Rostrum: the RDB codec does not read
/// Redis's stream type 19 yet).
fn mixed_writes(c: &mut redis::Connection, n: usize, seed: u64, boards: bool) {
    let mut x = seed;
    let mut rnd = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let mut i = 0;
    while i < n {
        let mut p = redis::pipe();
        for _ in 0..100 {
            let k = rnd(50);
            match rnd(15) {
                0 => p.cmd("ZADD").arg(format!("z{k}")).arg(rnd(1000)).arg(format!("m{}", rnd(100))),
                1 => p.cmd("ZINCRBY").arg(format!("z{k}")).arg(1.5).arg(format!("m{}", rnd(100))),
                2 => p.cmd("SETBIT").arg(format!("b{k}")).arg(rnd(5000)).arg(rnd(2)),
                3 => p.cmd("SADD").arg(format!("s{k}")).arg(rnd(40)).arg(rnd(40)),
                4 => p.cmd("SPOP").arg(format!("s{k}")),
                5 => p.cmd("SET").arg(format!("t{k}")).arg(rnd(99)).arg("EX").arg(100 + rnd(100)),
                6 => p.cmd("INCRBYFLOAT").arg(format!("f{k}")).arg(0.1),
                7 => p
                    .cmd("SET")
                    .arg(format!("x{k}"))
                    .arg(1)
                    .ignore()
                    .cmd("PEXPIRE")
                    .arg(format!("x{k}"))
                    .arg(1 + rnd(50)),
                8 => p
                    .cmd("EVAL")
                    .arg("redis.call('incr', KEYS[1]); return redis.call('hincrby', KEYS[2], 'n', 1)")
                    .arg(2)
                    .arg(format!("e{k}"))
                    .arg(format!("h{k}")),
                9 => p
                    .cmd("MULTI")
                    .ignore()
                    .cmd("LPUSH")
                    .arg(format!("l{k}"))
                    .arg(rnd(9))
                    .ignore()
                    .cmd("HSET")
                    .arg(format!("h{k}"))
                    .arg(format!("f{}", rnd(9)))
                    .arg(rnd(9))
                    .ignore()
                    .cmd("EXEC"),
                10 => p.cmd("RPOP").arg(format!("l{k}")),
                11 if boards => p.cmd("XADD").arg(format!("x:s{}", k % 5)).arg("*").arg("f").arg(rnd(9)),
                12 => p
                    .cmd("SELECT")
                    .arg(1 + rnd(3))
                    .ignore()
                    .cmd("HSET")
                    .arg(format!("h{k}"))
                    .arg("a")
                    .arg(rnd(9))
                    .ignore()
                    .cmd("SELECT")
                    .arg(0),
                13 if boards => p
                    .cmd("LB.SUBMIT")
                    .arg(format!("lb{}", k % 4))
                    .arg(format!("p{}", rnd(30)))
                    .arg(rnd(1000)),
                11 | 13 | 14 if !boards => p.cmd("RPUSH").arg(format!("l{k}")).arg(rnd(9)),
                _ => p.cmd("LB.INCR").arg(format!("lb{}", k % 4)).arg(format!("p{}", rnd(30))).arg(1),
            };
            i += 1;
        }
        let _: redis::Value = p.query(c).expect("pipeline");
    }
}

/// Waits for the keys that expire (`x*`, PEXPIRE of at most 50 ms) to go.
fn settle() {
    std::thread::sleep(Duration::from_millis(300));
}

#[test]
fn rostrum_primary_redis_replica_diskless() {
    let p = rostrum(&[]);
    let r = Redis::start();
    let (mut pc, mut rc) = (p.conn(), r.conn());
    mixed_writes(&mut pc, 3000, 1, false);
    replicaof(&mut rc, p.port);
    mixed_writes(&mut pc, 8000, 2, false);
    settle();
    wait_synced(&mut pc, &mut rc);
    let a = snapshot(&mut pc);
    assert!(a.len() > 50);
    assert_eq!(a, snapshot(&mut rc));
    let n: i64 = redis::cmd("WAIT").arg(1).arg(2000).query(&mut pc).unwrap();
    assert_eq!(n, 1);
    let role: redis::Value = redis::cmd("ROLE").query(&mut pc).unwrap();
    assert!(format!("{role:?}").contains("master"));
}

#[test]
fn redis_primary_rostrum_replica() {
    let p = Redis::start();
    let r = rostrum(&[]);
    let (mut pc, mut rc) = (p.conn(), r.conn());
    mixed_writes(&mut pc, 3000, 3, false);
    replicaof(&mut rc, p.port);
    mixed_writes(&mut pc, 8000, 4, false);
    settle();
    wait_synced(&mut pc, &mut rc);
    assert_eq!(snapshot(&mut pc), snapshot(&mut rc));
    let e = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query::<()>(&mut rc)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("You can't write against a read only replica"),
        "{e}"
    );
    // Partial resync after the link is killed on the replica's side.
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("master")
        .query(&mut rc)
        .unwrap();
    mixed_writes(&mut pc, 500, 5, false);
    settle();
    wait_synced(&mut pc, &mut rc);
    assert_eq!(info(&mut pc, "stats")["sync_partial_ok"], "1");
    assert_eq!(snapshot(&mut pc), snapshot(&mut rc));
}

#[test]
fn rostrum_to_rostrum_disk_sync_partial_resync_and_wait() {
    let p = rostrum(&["--repl-diskless-sync", "no"]);
    let r = rostrum(&[]);
    let (mut pc, mut rc) = (p.conn(), r.conn());
    mixed_writes(&mut pc, 3000, 6, true);
    replicaof(&mut rc, p.port);
    mixed_writes(&mut pc, 8000, 7, true);
    settle();
    wait_synced(&mut pc, &mut rc);
    assert_eq!(snapshot(&mut pc), snapshot(&mut rc));
    let n: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut pc).unwrap();
    assert_eq!(n, 1);
    let n: i64 = redis::cmd("WAIT").arg(2).arg(200).query(&mut pc).unwrap();
    assert_eq!(n, 1);
    // Killed on the primary's side: the replica continues partially.
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query(&mut pc)
        .unwrap();
    mixed_writes(&mut pc, 500, 8, true);
    settle();
    wait_synced(&mut pc, &mut rc);
    // Killed on the replica's side.
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("master")
        .query(&mut rc)
        .unwrap();
    mixed_writes(&mut pc, 500, 9, true);
    settle();
    wait_synced(&mut pc, &mut rc);
    let stats = info(&mut pc, "stats");
    assert_eq!(stats["sync_full"], "1");
    assert_eq!(stats["sync_partial_ok"], "2");
    assert_eq!(snapshot(&mut pc), snapshot(&mut rc));
    // Promotion: the old id becomes master_replid2.
    let before = info(&mut rc, "replication");
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut rc)
        .unwrap();
    let after = info(&mut rc, "replication");
    assert_eq!(after["role"], "master");
    assert_eq!(after["master_replid2"], before["master_replid"]);
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut rc).unwrap();
}

#[test]
fn chain_redis_rostrum_redis() {
    let top = Redis::start();
    let mid = rostrum(&[]);
    let bottom = Redis::start();
    let (mut tc, mut mc, mut bc) = (top.conn(), mid.conn(), bottom.conn());
    mixed_writes(&mut tc, 2000, 10, false);
    replicaof(&mut mc, top.port);
    replicaof(&mut bc, mid.port);
    mixed_writes(&mut tc, 8000, 11, false);
    settle();
    wait_synced(&mut tc, &mut mc);
    wait_synced(&mut mc, &mut bc);
    let a = snapshot(&mut tc);
    assert_eq!(a, snapshot(&mut mc));
    assert_eq!(a, snapshot(&mut bc));
}
