//! Failover with real Redis Sentinels and with the FAILOVER command.
//!
//! - Three `redis-server --sentinel` watch one Rostrum primary and two
//!   Rostrum replicas (each started from its own config file). Under a
//!   write load that waits for one replica (SET then WAIT 1), the primary
//!   is killed with SIGKILL: the sentinels promote a replica within 10 s,
//!   every write WAIT acknowledged is on it, the other replica follows it,
//!   the nodes' config files were rewritten by the sentinels' CONFIG
//!   REWRITE, and the old primary, restarted from its config file, is
//!   turned into a replica of the new one.
//! - A planned hand-over with FAILOVER TO under the same load loses no
//!   write that was answered OK.
//!
//! Every process is stopped by PID.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{free_port, info, server_binary, temp_dir, try_info, wait_ready, TestServer};

/// A process stopped by PID (SIGKILL) on drop.
struct Proc {
    child: Option<Child>,
    port: u16,
}

impl Proc {
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A Rostrum node started from `conf` (which names its port), in `dir`.
fn start_node(conf: &Path, dir: &Path, port: u16) -> Proc {
    let mut child = Command::new(server_binary())
        .arg(conf)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn rostrum");
    assert!(
        wait_ready(port, &mut child),
        "rostrum on {port} did not start"
    );
    Proc {
        child: Some(child),
        port,
    }
}

fn start_sentinel(dir: &Path, master_port: u16) -> Proc {
    let port = free_port();
    let conf = dir.join(format!("sentinel-{port}.conf"));
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndaemonize no\nloglevel warning\ndir {}\n\
             sentinel monitor m 127.0.0.1 {master_port} 2\n\
             sentinel down-after-milliseconds m 1000\n\
             sentinel failover-timeout m 20000\n\
             sentinel parallel-syncs m 2\n",
            dir.display()
        ),
    )
    .expect("write sentinel config");
    let mut child = Command::new("redis-server")
        .arg(&conf)
        .arg("--sentinel")
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn redis-server --sentinel");
    assert!(wait_ready(port, &mut child), "sentinel did not start");
    Proc {
        child: Some(child),
        port,
    }
}

fn conn(port: u16) -> redis::RedisResult<redis::Connection> {
    let c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?
        .get_connection_with_timeout(Duration::from_secs(2))?;
    c.set_read_timeout(Some(Duration::from_secs(5)))?;
    Ok(c)
}

/// SENTINEL GET-MASTER-ADDR-BY-NAME m's port.
fn master_port(sentinel: u16) -> Option<u16> {
    let mut c = conn(sentinel).ok()?;
    let addr: Vec<String> = redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg("m")
        .query(&mut c)
        .ok()?;
    addr.get(1)?.parse().ok()
}

/// SENTINEL MASTER m as a map.
fn sentinel_master(sentinel: u16) -> std::collections::HashMap<String, String> {
    let Ok(mut c) = conn(sentinel) else {
        return Default::default();
    };
    let v: Vec<String> = redis::cmd("SENTINEL")
        .arg("master")
        .arg("m")
        .query(&mut c)
        .unwrap_or_default();
    v.chunks(2)
        .filter(|p| p.len() == 2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect()
}

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until `port` is [`synced`] with `master`; past `limit` fails
/// with both nodes' INFO replication (and `sentinel`'s view of the
/// primary), so that a slow failover says where it stood.
fn wait_synced(what: &str, limit: Duration, port: u16, master: u16, sentinel: Option<u16>) {
    let deadline = Instant::now() + limit;
    while !synced(port, master) {
        if Instant::now() >= deadline {
            let replication = |p: u16| {
                conn(p)
                    .map(|mut c| format!("{:?}", info(&mut c, "replication")))
                    .unwrap_or_else(|e| format!("unreachable: {e}"))
            };
            panic!(
                "timed out waiting for {what}: node {port}: {}; primary {master}: {}; \
                 sentinel: {:?}",
                replication(port),
                replication(master),
                sentinel.map(sentinel_master)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether `port` is a replica of `master` with its link up and its
/// offset equal to the primary's. A node not up yet, or a connection the
/// sentinels close (their failover ends with CLIENT KILL TYPE normal on
/// each node they reconfigure), is "not yet".
fn synced(port: u16, master: u16) -> bool {
    let (Ok(mut r), Ok(mut p)) = (conn(port), conn(master)) else {
        return false;
    };
    let (Ok(ri), Ok(pi)) = (
        try_info(&mut r, "replication"),
        try_info(&mut p, "replication"),
    ) else {
        return false;
    };
    ri.get("master_port").map(String::as_str) == Some(&master.to_string())
        && ri.get("master_link_status").map(String::as_str) == Some("up")
        && ri.get("slave_repl_offset") == pi.get("master_repl_offset")
}

/// Writes `w:<n>` = n, each followed by WAIT 1, to whichever node `find`
/// names, until `stop`; returns the writes answered OK and the ones WAIT
/// acknowledged. On an error the node is asked for again and the same
/// write is retried.
fn write_load(
    stop: Arc<AtomicBool>,
    find: impl Fn() -> Option<u16> + Send + 'static,
) -> std::thread::JoinHandle<(Vec<u64>, Vec<u64>)> {
    std::thread::spawn(move || {
        let (mut ok, mut acked) = (Vec::new(), Vec::new());
        let mut n = 0u64;
        let mut c: Option<redis::Connection> = None;
        while !stop.load(Ordering::Relaxed) {
            let Some(cur) = c.as_mut() else {
                c = find().and_then(|p| conn(p).ok());
                if c.is_none() {
                    std::thread::sleep(Duration::from_millis(50));
                }
                continue;
            };
            let set: redis::RedisResult<String> =
                redis::cmd("SET").arg(format!("w:{n}")).arg(n).query(cur);
            match set {
                Ok(_) => ok.push(n),
                Err(_) => {
                    c = None;
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            }
            let wait: redis::RedisResult<i64> = redis::cmd("WAIT").arg(1).arg(2000).query(cur);
            match wait {
                Ok(k) if k >= 1 => acked.push(n),
                Ok(_) => {}
                Err(_) => c = None,
            }
            n += 1;
        }
        (ok, acked)
    })
}

/// The writes of `keys` missing on `port`.
fn missing(port: u16, keys: &[u64]) -> Vec<u64> {
    let mut c = conn(port).expect("connect");
    let mut out = Vec::new();
    for chunk in keys.chunks(500) {
        let names: Vec<String> = chunk.iter().map(|n| format!("w:{n}")).collect();
        let vals: Vec<Option<u64>> = redis::cmd("MGET").arg(&names).query(&mut c).expect("MGET");
        for (n, v) in chunk.iter().zip(vals) {
            if v != Some(*n) {
                out.push(*n);
            }
        }
    }
    out
}

fn node_conf(dir: &Path, port: u16, replicaof: Option<u16>) -> PathBuf {
    let conf = dir.join("rostrum.conf");
    let mut text = format!(
        "# node {port}\nport {port}\nbind 127.0.0.1\nsave \"\"\nloglevel warning\n\
         repl-diskless-sync-delay 0\n"
    );
    if let Some(m) = replicaof {
        text.push_str(&format!("replicaof 127.0.0.1 {m}\n"));
    }
    std::fs::write(&conf, text).expect("write node config");
    conf
}

#[test]
fn sentinels_promote_a_replica_when_the_primary_dies() {
    let base = temp_dir("sentinel");
    let ports = [free_port(), free_port(), free_port()];
    let dirs: Vec<PathBuf> = ports
        .iter()
        .map(|p| {
            let d = base.join(format!("node-{p}"));
            std::fs::create_dir_all(&d).expect("mkdir");
            d
        })
        .collect();
    let confs: Vec<PathBuf> = (0..3)
        .map(|i| node_conf(&dirs[i], ports[i], (i > 0).then_some(ports[0])))
        .collect();
    let mut nodes: Vec<Proc> = (0..3)
        .map(|i| start_node(&confs[i], &dirs[i], ports[i]))
        .collect();
    wait_for("replicas in sync", Duration::from_secs(10), || {
        synced(ports[1], ports[0]) && synced(ports[2], ports[0])
    });
    let sentinels: Vec<Proc> = (0..3).map(|_| start_sentinel(&base, ports[0])).collect();
    wait_for(
        "sentinels to know the group",
        Duration::from_secs(15),
        || {
            sentinels.iter().all(|s| {
                let m = sentinel_master(s.port);
                m.get("num-slaves").map(String::as_str) == Some("2")
                    && m.get("num-other-sentinels").map(String::as_str) == Some("2")
            })
        },
    );

    let stop = Arc::new(AtomicBool::new(false));
    let sports: Vec<u16> = sentinels.iter().map(|s| s.port).collect();
    let load = write_load(stop.clone(), move || {
        sports.iter().find_map(|&s| master_port(s))
    });
    std::thread::sleep(Duration::from_secs(2));
    let old = ports[0];
    nodes[0].kill();
    let killed = Instant::now();
    let mut new = 0;
    wait_for("a promoted replica", Duration::from_secs(10), || {
        new = master_port(sentinels[0].port).unwrap_or(old);
        new != old
    });
    let promoted_in = killed.elapsed();
    assert!(promoted_in < Duration::from_secs(10), "{promoted_in:?}");
    // Writes go on against the new primary for a moment.
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let (ok, acked) = load.join().expect("writer");
    assert!(
        acked.len() > 50,
        "too few writes acknowledged: {}",
        acked.len()
    );

    let gone = missing(new, &acked);
    assert!(
        gone.is_empty(),
        "acknowledged writes missing on the new primary: {gone:?}"
    );
    let mut c = conn(new).expect("new primary");
    assert_eq!(info(&mut c, "replication")["role"], "master");

    // The other replica follows the new primary and has the same data.
    let other = if new == ports[1] { ports[2] } else { ports[1] };
    wait_synced(
        "the other replica to follow",
        Duration::from_secs(15),
        other,
        new,
        Some(sentinels[0].port),
    );
    assert!(missing(other, &acked).is_empty());

    // The sentinels' CONFIG REWRITE: no replicaof on the new primary, the
    // new one on the other replica, comments kept.
    let conf_of = |port: u16| {
        std::fs::read_to_string(&confs[ports.iter().position(|&p| p == port).expect("port")])
            .expect("read config")
    };
    let new_conf = conf_of(new);
    assert!(
        new_conf.starts_with(&format!("# node {new}\n")),
        "{new_conf}"
    );
    assert!(!new_conf.contains("replicaof"), "{new_conf}");
    let other_conf = conf_of(other);
    assert!(
        other_conf.contains(&format!("\nreplicaof 127.0.0.1 {new}\n")),
        "{other_conf}"
    );

    // The old primary, restarted from its config file, is made a replica.
    nodes[0] = start_node(&confs[0], &dirs[0], old);
    wait_synced(
        "the old primary to rejoin as a replica",
        Duration::from_secs(30),
        old,
        new,
        Some(sentinels[0].port),
    );
    assert!(missing(old, &acked).is_empty());
    let _ = ok;
    drop(sentinels);
    drop(nodes);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn failover_command_hands_over_without_losing_a_write() {
    let args = ["--save", "", "--repl-diskless-sync-delay", "0"];
    let primary = TestServer::start(&args);
    let port_arg = primary.port.to_string();
    let mut rargs = args.to_vec();
    rargs.extend(["--replicaof", "127.0.0.1", &port_arg]);
    let r1 = TestServer::start(&rargs);
    let r2 = TestServer::start(&rargs);
    wait_for("replicas in sync", Duration::from_secs(10), || {
        synced(r1.port, primary.port) && synced(r2.port, primary.port)
    });

    // The writer follows the role: the primary until it answers READONLY,
    // then the target.
    let stop = Arc::new(AtomicBool::new(false));
    let (p, t) = (primary.port, r1.port);
    let load = write_load(stop.clone(), move || {
        [p, t].into_iter().find(|&port| {
            conn(port)
                .ok()
                .map(|mut c| info(&mut c, "replication")["role"] == "master")
                .unwrap_or(false)
        })
    });
    std::thread::sleep(Duration::from_secs(1));
    let mut c = primary.conn();
    let r: String = redis::cmd("FAILOVER")
        .arg("TO")
        .arg("127.0.0.1")
        .arg(r1.port)
        .arg("TIMEOUT")
        .arg(5000)
        .query(&mut c)
        .expect("FAILOVER");
    assert_eq!(r, "OK");
    wait_for("the roles to swap", Duration::from_secs(10), || {
        let mut t = r1.conn();
        let mut p = primary.conn();
        info(&mut t, "replication")["role"] == "master"
            && info(&mut p, "replication")["master_port"] == r1.port.to_string()
            && info(&mut p, "replication")["master_failover_state"] == "no-failover"
    });
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let (ok, acked) = load.join().expect("writer");
    assert!(acked.len() > 50, "too few writes: {}", acked.len());
    // Every write answered OK, acknowledged or not, is on the new primary.
    let gone = missing(r1.port, &ok);
    assert!(gone.is_empty(), "writes lost in the hand-over: {gone:?}");
    // The old primary follows it (a partial resync) and has them too; the
    // other replica, chained below the old primary, as well.
    wait_synced(
        "the old primary in sync",
        Duration::from_secs(10),
        primary.port,
        r1.port,
        None,
    );
    assert!(missing(primary.port, &ok).is_empty());
    wait_synced(
        "the other replica in sync",
        Duration::from_secs(10),
        r2.port,
        primary.port,
        None,
    );
    assert!(missing(r2.port, &ok).is_empty());
    let mut t = r1.conn();
    assert_eq!(info(&mut t, "stats")["sync_partial_ok"], "1");
}

/// CONFIG REWRITE of the same file after the same changes, by redis-server
/// and by Rostrum: the same text up to the signature line, the same lines
/// appended below it (Redis appends in its hash table's order; `port`,
/// given on the command line, differs).
#[test]
fn config_rewrite_matches_redis_server() {
    let base = temp_dir("rewrite");
    let file = "# top comment\nbind 127.0.0.1\nsave \"\"\n  hz   12   \nslaveof 127.0.0.1 1\n\n\
                # a comment between\n\n\nmaxmemory-policy allkeys-lru\nslave-priority 100\n\
                hz 13\nappendonly no\ndbfilename dump.rdb\n";
    let mut texts = Vec::new();
    for (i, bin) in [PathBuf::from("redis-server"), server_binary()]
        .iter()
        .enumerate()
    {
        let dir = base.join(format!("n{i}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let conf = dir.join("node.conf");
        std::fs::write(&conf, file).expect("write config");
        let port = free_port();
        let mut child = Command::new(bin)
            .arg(&conf)
            .args(["--port", &port.to_string(), "--loglevel", "warning"])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        assert!(wait_ready(port, &mut child));
        let mut p = Proc {
            child: Some(child),
            port,
        };
        let mut c = conn(p.port).expect("connect");
        for args in [
            vec!["CONFIG", "SET", "hz", "10"],
            vec!["CONFIG", "SET", "maxmemory", "1mb"],
            vec!["REPLICAOF", "NO", "ONE"],
            vec!["CONFIG", "SET", "replica-priority", "0"],
            vec![
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "pubsub 64mb 16mb 30",
            ],
            vec!["CONFIG", "SET", "notify-keyspace-events", "KEA"],
            vec!["CONFIG", "REWRITE"],
            vec!["REPLICAOF", "127.0.0.1", "1"],
            vec!["CONFIG", "REWRITE"],
        ] {
            let mut cmd = redis::cmd(args[0]);
            for a in &args[1..] {
                cmd.arg(*a);
            }
            let _: String = cmd.query(&mut c).expect("command");
        }
        p.kill();
        texts.push(std::fs::read_to_string(&conf).expect("read config"));
    }
    let split = |t: &str| {
        let (head, tail) = t
            .split_once("# Generated by CONFIG REWRITE\n")
            .expect("signature");
        let mut lines: Vec<String> = tail
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with("port ") && !l.starts_with("dir "))
            .map(str::to_string)
            .collect();
        lines.sort();
        (head.to_string(), lines)
    };
    let (redis_head, redis_tail) = split(&texts[0]);
    let (head, tail) = split(&texts[1]);
    assert_eq!(
        head, redis_head,
        "redis:\n{}\nrostrum:\n{}",
        texts[0], texts[1]
    );
    assert_eq!(
        tail, redis_tail,
        "redis:\n{}\nrostrum:\n{}",
        texts[0], texts[1]
    );
    // `dir`: the working directory, absolute, quoted.
    let cwd = std::fs::canonicalize(base.join("n1")).expect("canonical dir");
    assert!(
        texts[1].contains(&format!("\ndir \"{}\"\n", cwd.display())),
        "{}",
        texts[1]
    );
    let _ = std::fs::remove_dir_all(&base);
}
