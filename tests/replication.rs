//! Replication with real redis-server processes on loopback: Rostrum as
//! primary of a redis-server replica, as replica of a redis-server
//! primary, Rostrum to Rostrum, and the chain redis -> Rostrum -> redis;
//! disk and diskless full syncs, mixed writes then equal data, READONLY,
//! WAIT, and partial resyncs after CLIENT KILL TYPE master / replica.

mod common;

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::redis_server::RedisServer;
use common::{free_port, info, temp_dir, wait_synced, TestServer};

/// A redis-server in a folder of its own, as the replication tests want
/// it (no disk, an immediate diskless sync).
fn redis() -> RedisServer {
    RedisServer::start_in_temp(
        "redis",
        &[
            "--daemonize",
            "no",
            "--repl-diskless-sync-delay",
            "0",
            "--loglevel",
            "warning",
        ],
    )
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
    let r = redis();
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
    let p = redis();
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
    let top = redis();
    let mid = rostrum(&[]);
    let bottom = redis();
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

/// Clients writing to whichever port `target` names, each recording the
/// writes that were acknowledged (`SET w:<t>:<i> <i>` and
/// `ZADD board <i> <t>:<i>`). An error is not an acknowledgement: the
/// client reconnects (to the current target) and goes on.
struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    target: std::sync::Arc<std::sync::atomic::AtomicU16>,
    handles: Vec<std::thread::JoinHandle<Vec<(String, i64)>>>,
}

impl Load {
    fn start(port: u16, clients: usize) -> Load {
        use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
        use std::sync::Arc;
        let stop = Arc::new(AtomicBool::new(false));
        let target = Arc::new(AtomicU16::new(port));
        let handles = (0..clients)
            .map(|t| {
                let (stop, target) = (stop.clone(), target.clone());
                std::thread::spawn(move || {
                    let mut acked = Vec::new();
                    let mut c: Option<(u16, redis::Connection)> = None;
                    let mut i: i64 = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let port = target.load(Ordering::Relaxed);
                        if c.as_ref().map(|(p, _)| *p) != Some(port) {
                            c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                                .and_then(|cl| {
                                    cl.get_connection_with_timeout(Duration::from_secs(2))
                                })
                                .ok()
                                .map(|conn| (port, conn));
                            if c.is_none() {
                                std::thread::sleep(Duration::from_millis(10));
                                continue;
                            }
                        }
                        let Some((_, conn)) = c.as_mut() else {
                            continue;
                        };
                        i += 1;
                        let r: redis::RedisResult<()> = if i % 2 == 0 {
                            redis::cmd("SET")
                                .arg(format!("w:{t}:{i}"))
                                .arg(i)
                                .query(conn)
                        } else {
                            redis::cmd("ZADD")
                                .arg("board")
                                .arg(i)
                                .arg(format!("{t}:{i}"))
                                .query(conn)
                        };
                        match r {
                            Ok(()) => acked.push((format!("{t}:{i}"), i)),
                            Err(_) => {
                                c = None;
                                std::thread::sleep(Duration::from_millis(10));
                            }
                        }
                    }
                    acked
                })
            })
            .collect();
        Load {
            stop,
            target,
            handles,
        }
    }

    fn move_to(&self, port: u16) {
        self.target
            .store(port, std::sync::atomic::Ordering::Relaxed);
    }

    /// Stops the clients; the writes they saw acknowledged.
    fn finish(self) -> Vec<(String, i64)> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handles
            .into_iter()
            .flat_map(|h| h.join().expect("writer"))
            .collect()
    }
}

/// Every acknowledged write is on the server behind `c`.
fn assert_has_all(c: &mut redis::Connection, acked: &[(String, i64)], who: &str) {
    for chunk in acked.chunks(1000) {
        let mut p = redis::pipe();
        for (name, i) in chunk {
            if i % 2 == 0 {
                p.cmd("GET").arg(format!("w:{name}"));
            } else {
                p.cmd("ZSCORE").arg("board").arg(name);
            }
        }
        let got: Vec<Option<String>> = p.query(c).expect("read back");
        for ((name, i), v) in chunk.iter().zip(got) {
            let ok = v.as_deref().and_then(|s| s.parse::<f64>().ok()) == Some(*i as f64);
            assert!(ok, "{who}: acknowledged write {name} ({i}) is {v:?}");
        }
    }
}

/// The migration recipe of the README under a write load: a Rostrum
/// replica of a redis-server, the switch-over (CLIENT PAUSE WRITE on
/// redis, offsets equal, REPLICAOF NO ONE on Rostrum, the clients moved),
/// not one acknowledged write missing; then the way back: the redis-server
/// a replica of Rostrum, with everything.
#[test]
fn migration_from_redis_under_load_and_back() {
    let redis = redis();
    let rostrum = rostrum(&[]);
    let (mut pc, mut rc) = (redis.conn(), rostrum.conn());
    let load = Load::start(redis.port, 4);
    std::thread::sleep(Duration::from_millis(800));
    replicaof(&mut rc, redis.port);
    std::thread::sleep(Duration::from_millis(1500));
    // The switch-over.
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(60_000)
        .arg("WRITE")
        .query(&mut pc)
        .unwrap();
    wait_synced(&mut pc, &mut rc);
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut rc)
        .unwrap();
    load.move_to(rostrum.port);
    // Writes held by the pause are dropped with their connections (not
    // acknowledged); then the old primary follows the new one, and only
    // then is it unpaused.
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .query(&mut pc)
        .unwrap();
    replicaof(&mut pc, rostrum.port);
    let _: () = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut pc).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let acked = load.finish();
    assert!(acked.len() > 1000, "only {} writes", acked.len());
    assert_has_all(&mut rc, &acked, "rostrum");
    // The way back: redis-server, now a replica of Rostrum, has them all.
    wait_synced(&mut rc, &mut pc);
    assert_has_all(&mut pc, &acked, "redis-server replica of rostrum");
    assert_eq!(snapshot(&mut rc), snapshot(&mut pc));
    assert_eq!(info(&mut pc, "replication")["role"], "slave");
}

/// haproxy (Debian's) with the usual `tcp-check` recipe in front of a
/// Rostrum primary and its Rostrum replica: clients reach the primary;
/// after the roles swap (REPLICAOF NO ONE, then REPLICAOF of the old
/// primary) they reach the new one.
#[test]
fn haproxy_sends_clients_to_the_primary() {
    if !std::path::Path::new("/usr/sbin/haproxy").exists() {
        eprintln!("haproxy not installed: skipped");
        return;
    }
    let a = rostrum(&[]);
    let b = rostrum(&[]);
    let (mut ac, mut bc) = (a.conn(), b.conn());
    replicaof(&mut bc, a.port);
    wait_synced(&mut ac, &mut bc);
    let dir = temp_dir("haproxy");
    let front = free_port();
    let cfg = format!(
        "global\n  maxconn 256\n\
         defaults\n  mode tcp\n  timeout connect 2s\n  timeout client 30s\n  timeout server 30s\n\
         frontend redis\n  bind 127.0.0.1:{front}\n  default_backend primary\n\
         backend primary\n  option tcp-check\n  tcp-check connect\n\
         \x20 tcp-check send PING\\r\\n\n  tcp-check expect string +PONG\n\
         \x20 tcp-check send info\\ replication\\r\\n\n  tcp-check expect string role:master\n\
         \x20 tcp-check send QUIT\\r\\n\n  tcp-check expect string +OK\n\
         \x20 server a 127.0.0.1:{} check inter 100ms fall 2 rise 2 on-marked-down shutdown-sessions\n\
         \x20 server b 127.0.0.1:{} check inter 100ms fall 2 rise 2 on-marked-down shutdown-sessions\n",
        a.port, b.port
    );
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, cfg).unwrap();
    let mut haproxy = Command::new("/usr/sbin/haproxy")
        .arg("-f")
        .arg(&path)
        .arg("-db")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn haproxy");
    struct Stop<'a>(&'a mut Child);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _stop = Stop(&mut haproxy);
    // The port of the node a new client through haproxy reaches, once
    // only `want` is up.
    let reach = |want: u16| {
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut in_a_row = 0;
        loop {
            let got = redis::Client::open(format!("redis://127.0.0.1:{front}/"))
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
                .and_then(|mut c| {
                    redis::cmd("CONFIG")
                        .arg("GET")
                        .arg("port")
                        .query::<Vec<String>>(&mut c)
                });
            let port = got
                .ok()
                .and_then(|v| v.get(1).and_then(|p| p.parse::<u16>().ok()));
            in_a_row = if port == Some(want) { in_a_row + 1 } else { 0 };
            if in_a_row == 10 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "haproxy does not send clients to {want} (last: {port:?})"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let via = || {
        redis::Client::open(format!("redis://127.0.0.1:{front}/"))
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(2))
            .unwrap()
    };
    reach(a.port);
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("1")
        .query(&mut via())
        .unwrap();
    wait_synced(&mut ac, &mut bc);
    let v: String = redis::cmd("GET").arg("k").query(&mut bc).unwrap();
    assert_eq!(v, "1");
    // The roles swap.
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut bc)
        .unwrap();
    replicaof(&mut ac, b.port);
    reach(b.port);
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("2")
        .query(&mut via())
        .unwrap();
    wait_synced(&mut bc, &mut ac);
    let v: String = redis::cmd("GET").arg("k").query(&mut ac).unwrap();
    assert_eq!(v, "2");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Rostrum replica of the primary on `primary_port`, started in `dir`
/// from a config file with `replicaof` (and its RDB there, if any).
fn replica_in(dir: std::path::PathBuf, primary_port: u16) -> TestServer {
    let conf = dir.join("replica.conf");
    std::fs::write(
        &conf,
        format!("replicaof 127.0.0.1 {primary_port}\nsave \"\"\n"),
    )
    .unwrap();
    let conf = conf.to_str().unwrap().to_string();
    TestServer::start_in(dir, &[&conf])
}

/// A replica restarted from the RDB it saved keeps its primary's id and
/// offset (the file's repl-id / repl-offset aux fields): it asks
/// `PSYNC <id> <offset+1>` and gets `+CONTINUE`.
fn restart_resyncs_partially(pc: &mut redis::Connection, primary_port: u16) {
    let mut r = replica_in(temp_dir("replica"), primary_port);
    let mut rc = r.conn();
    mixed_writes(pc, 2000, 21, false);
    settle();
    wait_synced(pc, &mut rc);
    let _: () = redis::cmd("SAVE").query(&mut rc).unwrap();
    r.terminate();
    drop(rc);
    // Writes while the replica is down: sent from the primary's backlog.
    mixed_writes(pc, 1000, 22, false);
    let dir = temp_dir("replica");
    std::fs::copy(r.dir.join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    drop(r);
    let before = info(pc, "stats");
    let r = replica_in(dir, primary_port);
    let mut rc = r.conn();
    settle();
    wait_synced(pc, &mut rc);
    let after = info(pc, "stats");
    assert_eq!(
        after["sync_partial_ok"].parse::<u64>().unwrap(),
        before["sync_partial_ok"].parse::<u64>().unwrap() + 1,
        "{after:?}"
    );
    assert_eq!(after["sync_full"], before["sync_full"]);
    assert_eq!(snapshot(pc), snapshot(&mut rc));
}

#[test]
fn replica_restart_partial_resync_from_rostrum() {
    let p = rostrum(&[]);
    restart_resyncs_partially(&mut p.conn(), p.port);
}

#[test]
fn replica_restart_partial_resync_from_redis() {
    let p = redis();
    restart_resyncs_partially(&mut p.conn(), p.port);
}

/// `repl-backlog-ttl`: a primary without replicas for that long frees
/// its backlog and draws a new id (as Redis); a replica attaching later
/// syncs in full.
#[test]
fn backlog_freed_after_ttl_without_replicas() {
    let p = rostrum(&["--repl-backlog-ttl", "1"]);
    let r = rostrum(&[]);
    let (mut pc, mut rc) = (p.conn(), r.conn());
    replicaof(&mut rc, p.port);
    mixed_writes(&mut pc, 500, 31, true);
    wait_synced(&mut pc, &mut rc);
    let before = info(&mut pc, "replication");
    assert_eq!(before["repl_backlog_active"], "1");
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut rc)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = info(&mut pc, "replication");
        if now["repl_backlog_active"] == "0" {
            assert_ne!(now["master_replid"], before["master_replid"]);
            break;
        }
        assert!(Instant::now() < deadline, "backlog kept: {now:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    replicaof(&mut rc, p.port);
    mixed_writes(&mut pc, 500, 32, true);
    settle();
    wait_synced(&mut pc, &mut rc);
    assert_eq!(snapshot(&mut pc), snapshot(&mut rc));
    assert_eq!(info(&mut pc, "stats")["sync_full"], "2");
}

/// `replica-announce-ip` / `-port` go to the primary in REPLCONF and
/// show in its INFO slaveN line and ROLE.
#[test]
fn replica_announce_ip_and_port() {
    let p = rostrum(&[]);
    let r = rostrum(&[
        "--replica-announce-ip",
        "10.1.2.3",
        "--replica-announce-port",
        "7777",
    ]);
    let (mut pc, mut rc) = (p.conn(), r.conn());
    replicaof(&mut rc, p.port);
    wait_synced(&mut pc, &mut rc);
    let i = info(&mut pc, "replication");
    assert!(
        i["slave0"].starts_with("ip=10.1.2.3,port=7777,"),
        "{}",
        i["slave0"]
    );
}

/// A replica hides keys whose time passed but does not delete them (its
/// primary's DEL does); WAIT counts the calling client's last write.
#[test]
fn replica_hides_expired_keys_and_wait_counts_own_write() {
    let p = rostrum(&[]);
    let mut r = rostrum(&[]);
    let (mut pc, mut rc) = (p.conn(), r.conn());
    replicaof(&mut rc, p.port);
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .arg("PX")
        .arg(300)
        .query(&mut pc)
        .unwrap();
    wait_synced(&mut pc, &mut rc);
    // The primary's deletions held back by a pause: no DEL comes.
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(3000)
        .arg("WRITE")
        .query(&mut pc)
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let v: Option<String> = redis::cmd("GET").arg("k").query(&mut rc).unwrap();
    assert_eq!(v, None);
    let n: i64 = redis::cmd("EXISTS").arg("k").query(&mut rc).unwrap();
    assert_eq!(n, 0);
    std::thread::sleep(Duration::from_millis(300));
    // Still stored (INFO keyspace counts stored keys).
    let ks = info(&mut rc, "keyspace");
    assert!(
        ks.get("db0").is_some_and(|v| v.starts_with("keys=1,")),
        "the replica deleted the key itself: {ks:?}"
    );
    let _: () = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut pc).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while info(&mut rc, "keyspace").contains_key("db0") {
        assert!(Instant::now() < deadline, "the primary's DEL did not come");
        std::thread::sleep(Duration::from_millis(50));
    }
    // WAIT: a client whose writes are acknowledged gets 1 at once, even
    // while another's newer write is not acknowledged (replica stopped).
    let mut other = p.conn();
    let _: () = redis::cmd("SET").arg("a").arg(1).query(&mut other).unwrap();
    let n: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(2000)
        .query(&mut other)
        .unwrap();
    assert_eq!(n, 1);
    let pid = r.child.id().to_string();
    let stop = |sig: &str| {
        assert!(Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap()
            .success());
    };
    stop("-STOP");
    wait_stopped(&pid);
    let _: () = redis::cmd("SET").arg("b").arg(2).query(&mut pc).unwrap();
    let n: i64 = redis::cmd("WAIT").arg(1).arg(200).query(&mut pc).unwrap();
    let m: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(200)
        .query(&mut other)
        .unwrap();
    stop("-CONT");
    assert_eq!((n, m), (0, 1));
    let n: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut pc).unwrap();
    assert_eq!(n, 1);
    r.kill();
}

/// Waits until every thread of process `pid` has taken a SIGSTOP (state
/// `T` in /proc): `kill` returns once the signal is queued, and a thread
/// running on another core can still read and acknowledge a write for a
/// moment after that.
fn wait_stopped(pid: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
        let all = tasks.flatten().all(|t| {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            // The state follows the command name in parentheses.
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('T') || rest.starts_with('t'))
        });
        if all {
            return;
        }
        assert!(Instant::now() < deadline, "process {pid} did not stop");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A diskless full sync goes to the sockets without `dir`/`dbfilename`
/// (no file appears, none is replaced), and replicas arriving together
/// share one snapshot: with `repl-diskless-sync-max-replicas 2` the
/// second one's arrival starts it, long before the 60 s delay.
#[test]
fn diskless_sync_writes_no_file_and_gathers_replicas() {
    let p = rostrum(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "60",
        "--repl-diskless-sync-max-replicas",
        "2",
    ]);
    let (r1, r2) = (rostrum(&[]), rostrum(&[]));
    let mut pc = p.conn();
    mixed_writes(&mut pc, 2000, 41, true);
    let (mut c1, mut c2) = (r1.conn(), r2.conn());
    replicaof(&mut c1, p.port);
    replicaof(&mut c2, p.port);
    mixed_writes(&mut pc, 1000, 42, true);
    settle();
    wait_synced(&mut pc, &mut c1);
    wait_synced(&mut pc, &mut c2);
    let a = snapshot(&mut pc);
    assert_eq!(a, snapshot(&mut c1));
    assert_eq!(a, snapshot(&mut c2));
    assert!(
        !p.dir.join("dump.rdb").exists(),
        "a diskless sync wrote dump.rdb"
    );
    assert_eq!(info(&mut pc, "persistence")["rdb_saves"], "0");
}

/// PUBLISH on the primary on `primary` reaches a client subscribed on the
/// replica on `replica` through the replication stream (Redis 7.0
/// propagates PUBLISH to replicas); the offsets stay equal.
fn publish_reaches_replica_subscriber(primary: u16, replica: u16) {
    let (mut pc, mut rc) = (conn(primary), conn(replica));
    replicaof(&mut rc, primary);
    let _: () = redis::cmd("SET").arg("x").arg(1).query(&mut pc).unwrap();
    wait_synced(&mut pc, &mut rc);
    let mut sub_conn = conn(replica);
    let mut sub = sub_conn.as_pubsub();
    sub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sub.subscribe("news").unwrap();
    for i in 0..3 {
        let n: i64 = redis::cmd("PUBLISH")
            .arg("news")
            .arg(format!("hello {i}"))
            .query(&mut pc)
            .unwrap();
        assert_eq!(n, 0, "no subscriber on the primary");
    }
    for i in 0..3 {
        let m = sub
            .get_message()
            .expect("the message published on the primary");
        assert_eq!(m.get_channel_name(), "news");
        let payload: String = m.get_payload().unwrap();
        assert_eq!(payload, format!("hello {i}"));
    }
    wait_synced(&mut pc, &mut rc);
}

#[test]
fn publish_reaches_replica_rostrum_to_rostrum() {
    let (p, r) = (rostrum(&[]), rostrum(&[]));
    publish_reaches_replica_subscriber(p.port, r.port);
}

#[test]
fn publish_reaches_replica_rostrum_to_redis() {
    let (p, r) = (rostrum(&[]), redis());
    publish_reaches_replica_subscriber(p.port, r.port);
}

#[test]
fn publish_reaches_replica_redis_to_rostrum() {
    let (p, r) = (redis(), rostrum(&[]));
    publish_reaches_replica_subscriber(p.port, r.port);
}

/// PUBLISH goes to the replicas, not into the AOF (as Redis).
#[test]
fn publish_is_not_in_the_aof() {
    let dir = temp_dir("publish-aof");
    let p = TestServer::start_with_aof(&dir);
    let mut pc = p.conn();
    let _: i64 = redis::cmd("PUBLISH")
        .arg("news")
        .arg("x")
        .query(&mut pc)
        .unwrap();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut pc).unwrap();
    let r = rostrum(&[]);
    let mut rc = r.conn();
    replicaof(&mut rc, p.port);
    wait_synced(&mut pc, &mut rc);
    let _: i64 = redis::cmd("PUBLISH")
        .arg("news")
        .arg("y")
        .query(&mut pc)
        .unwrap();
    let _: () = redis::cmd("SET").arg("k2").arg("v").query(&mut pc).unwrap();
    wait_synced(&mut pc, &mut rc);
    let aof = common::aof_bytes(&dir);
    assert!(
        !aof.windows(7).any(|w| w.eq_ignore_ascii_case(b"publish")),
        "PUBLISH in the AOF"
    );
    assert!(aof.windows(2).any(|w| w == b"k2"));
}

/// Pauses the primary's writes (so its DEL of an expired key waits), then
/// sleeps until the key set at `set_at` with `ttl_ms` has expired. The
/// setup must have paused it before the key's time ran out.
fn pause_past_expiry(primary: &mut redis::Connection, set_at: Instant, ttl_ms: u64) {
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(ttl_ms * 3)
        .arg("WRITE")
        .query(primary)
        .unwrap();
    assert!(
        set_at.elapsed() < Duration::from_millis(ttl_ms),
        "the setup took longer than the key's time"
    );
    std::thread::sleep(Duration::from_millis(ttl_ms + 300).saturating_sub(set_at.elapsed()));
}

/// DBSIZE on a replica counts the keys whose time passed but that are
/// still stored (the primary's DEL is held back by a pause), as a
/// redis-server replica of the same primary does; reads still hide them.
#[test]
fn replica_dbsize_counts_expired_keys_still_stored() {
    const TTL_MS: u64 = 2000;
    let p = redis();
    let rr = redis();
    let rs = rostrum(&[]);
    let (mut pc, mut redis_r, mut rost_r) = (p.conn(), rr.conn(), rs.conn());
    replicaof(&mut redis_r, p.port);
    replicaof(&mut rost_r, p.port);
    let _: () = redis::cmd("SET").arg("keep").arg(1).query(&mut pc).unwrap();
    // Long enough for the syncs and the pause to come first on a loaded
    // machine: the key must still be there when the primary is paused.
    let set_at = Instant::now();
    let _: () = redis::cmd("SET")
        .arg("gone")
        .arg(1)
        .arg("PX")
        .arg(TTL_MS)
        .query(&mut pc)
        .unwrap();
    wait_synced(&mut pc, &mut redis_r);
    wait_synced(&mut pc, &mut rost_r);
    pause_past_expiry(&mut pc, set_at, TTL_MS);
    for (who, c) in [("redis", &mut redis_r), ("rostrum", &mut rost_r)] {
        let v: Option<String> = redis::cmd("GET").arg("gone").query(c).unwrap();
        assert_eq!(v, None, "{who}");
        let n: i64 = redis::cmd("DBSIZE").query(c).unwrap();
        assert_eq!(n, 2, "{who}'s DBSIZE");
    }
    let _: () = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut pc).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    for c in [&mut redis_r, &mut rost_r] {
        loop {
            let n: i64 = redis::cmd("DBSIZE").query(c).unwrap();
            if n == 1 {
                break;
            }
            assert!(Instant::now() < deadline, "the primary's DEL did not come");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // A Rostrum replica of a Rostrum primary counts the same way.
    let p2 = rostrum(&[]);
    let r2 = rostrum(&[]);
    let (mut pc2, mut rc2) = (p2.conn(), r2.conn());
    replicaof(&mut rc2, p2.port);
    let set_at = Instant::now();
    let _: () = redis::cmd("SET")
        .arg("gone")
        .arg(1)
        .arg("PX")
        .arg(TTL_MS)
        .query(&mut pc2)
        .unwrap();
    wait_synced(&mut pc2, &mut rc2);
    pause_past_expiry(&mut pc2, set_at, TTL_MS);
    let n: i64 = redis::cmd("DBSIZE").query(&mut rc2).unwrap();
    assert_eq!(n, 1);
    let _: () = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut pc2).unwrap();
}

/// `rdb-del-sync-files` (Redis 7.0): with persistence off (no save points,
/// no AOF), the RDB file a disk-based full sync used is removed, on the
/// primary once read for sending and on the replica once loaded; with it
/// off, or with a save point, the files stay.
#[test]
fn rdb_del_sync_files_removes_the_sync_rdb_when_persistence_is_off() {
    for (del, primary_save) in [("no", ""), ("yes", ""), ("yes", "3600 1")] {
        let p = rostrum(&[
            "--repl-diskless-sync",
            "no",
            "--rdb-del-sync-files",
            del,
            "--save",
            primary_save,
        ]);
        let r = rostrum(&["--rdb-del-sync-files", del]);
        let (mut pc, mut rc) = (p.conn(), r.conn());
        mixed_writes(&mut pc, 500, 51, false);
        replicaof(&mut rc, p.port);
        settle();
        wait_synced(&mut pc, &mut rc);
        assert_eq!(snapshot(&mut pc), snapshot(&mut rc));
        assert_eq!(info(&mut pc, "stats")["sync_full"], "1");
        let case = format!("rdb-del-sync-files {del}, primary save '{primary_save}'");
        assert_eq!(
            p.dir.join("dump.rdb").exists(),
            del == "no" || !primary_save.is_empty(),
            "primary's dump.rdb, {case}"
        );
        assert_eq!(
            r.dir.join("dump.rdb").exists(),
            del == "no",
            "replica's dump.rdb, {case}"
        );
    }
}

/// A bare replica on a raw connection: it asks `PSYNC ? -1`, skips the
/// RDB, and reads the commands of the replication stream after it.
struct StreamReader {
    s: std::net::TcpStream,
    buf: Vec<u8>,
}

impl StreamReader {
    fn attach(port: u16) -> StreamReader {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n")
            .unwrap();
        let mut r = StreamReader { s, buf: Vec::new() };
        // Newlines keep the link alive while the RDB is made.
        let mut line = r.line();
        while line.is_empty() {
            line = r.line();
        }
        assert!(line.starts_with("+FULLRESYNC"), "{line}");
        let mut header = r.line();
        while header.is_empty() {
            header = r.line();
        }
        if let Some(mark) = header.strip_prefix("$EOF:") {
            let mark = mark.as_bytes().to_vec();
            loop {
                if let Some(at) = r.buf.windows(mark.len()).position(|w| w == mark) {
                    r.buf.drain(..at + mark.len());
                    break;
                }
                r.fill();
            }
        } else {
            let len: usize = header[1..].parse().expect("RDB length");
            r.take(len);
        }
        r
    }

    fn fill(&mut self) {
        use std::io::Read;
        let mut chunk = [0u8; 65536];
        let n = self.s.read(&mut chunk).expect("replication stream");
        assert!(n > 0, "the primary closed the link");
        self.buf.extend_from_slice(&chunk[..n]);
    }

    fn line(&mut self) -> String {
        loop {
            if let Some(at) = self.buf.iter().position(|&b| b == b'\n') {
                let l: Vec<u8> = self.buf.drain(..=at).collect();
                return String::from_utf8_lossy(&l).trim_end().to_string();
            }
            self.fill();
        }
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            self.fill();
        }
        self.buf.drain(..n).collect()
    }

    /// The next command of the stream, PINGs and REPLCONFs left out.
    fn command(&mut self) -> Vec<String> {
        loop {
            let head = self.line();
            if head.is_empty() {
                continue;
            }
            let n: usize = head[1..].parse().expect("array length");
            let mut cmd = Vec::with_capacity(n);
            for _ in 0..n {
                let len: usize = self.line()[1..].parse().expect("bulk length");
                let arg = self.take(len + 2);
                cmd.push(String::from_utf8_lossy(&arg[..len]).to_string());
            }
            let name = cmd
                .first()
                .map(|s| s.to_ascii_uppercase())
                .unwrap_or_default();
            if name != "PING" && name != "REPLCONF" {
                return cmd;
            }
        }
    }

    /// The commands up to and including `SET end <mark>`.
    fn until_end(&mut self, mark: &str) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            let c = self.command();
            let text = c.join(" ");
            out.push(text.clone());
            if text.eq_ignore_ascii_case(&format!("SET end {mark}")) {
                return out;
            }
        }
    }
}

/// What a primary on `port` sends its replicas for PUBLISH inside
/// MULTI/EXEC and inside scripts, one case after another.
fn publish_in_transactions_stream(port: u16) -> Vec<Vec<String>> {
    let mut c = conn(port);
    let mut stream = StreamReader::attach(port);
    let mut cases = Vec::new();
    let mut run = |c: &mut redis::Connection, i: usize, cmds: &[&[&str]]| {
        for args in cmds {
            let _: redis::Value = common::cmd(args).query(c).expect("command");
        }
        let _: () = redis::cmd("SET").arg("end").arg(i).query(c).unwrap();
        cases.push(stream.until_end(&i.to_string()));
    };
    let multi = |inner: &[&'static [&'static str]]| {
        let mut v: Vec<&[&str]> = vec![&["MULTI"]];
        v.extend_from_slice(inner);
        v.push(&["EXEC"]);
        v
    };
    run(
        &mut c,
        1,
        &multi(&[
            &["SET", "a", "1"],
            &["PUBLISH", "ch", "m1"],
            &["SET", "b", "2"],
        ]),
    );
    // One write and a PUBLISH: still a transaction for replicas.
    run(
        &mut c,
        2,
        &multi(&[&["PUBLISH", "ch", "m2"], &["INCR", "a"]]),
    );
    // Only PUBLISH.
    run(&mut c, 3, &multi(&[&["PUBLISH", "ch", "m3"]]));
    run(
        &mut c,
        4,
        &[&[
            "EVAL",
            "redis.call('set', KEYS[1], 'x'); redis.call('publish', 'ch', 'm4'); \
             redis.call('set', KEYS[2], 'y')",
            "2",
            "s1",
            "s2",
        ]],
    );
    run(
        &mut c,
        5,
        &[&["EVAL", "redis.call('publish', 'ch', 'm5')", "0"]],
    );
    // Another database inside the transaction.
    run(
        &mut c,
        6,
        &multi(&[
            &["SELECT", "2"],
            &["PUBLISH", "ch", "m6"],
            &["SET", "c", "3"],
            &["SELECT", "0"],
        ]),
    );
    cases
}

/// A PUBLISH run by EXEC or a script reaches replicas inside the
/// MULTI/EXEC of the transaction, in order with its writes, as
/// redis-server 7.0 sends it (the same commands, case by case).
#[test]
fn publish_inside_transactions_is_replicated_in_order() {
    let (ours, theirs) = (rostrum(&[]), redis());
    let want = publish_in_transactions_stream(theirs.port);
    let got = publish_in_transactions_stream(ours.port);
    assert_eq!(got, want);
    // And in order: MULTI, SET a, PUBLISH, SET b, EXEC.
    let first: Vec<&str> = got[0]
        .iter()
        .map(String::as_str)
        .filter(|c| !c.starts_with("SELECT"))
        .collect();
    assert_eq!(
        first,
        [
            "MULTI",
            "SET a 1",
            "PUBLISH ch m1",
            "SET b 2",
            "EXEC",
            "SET end 1"
        ]
    );
}
