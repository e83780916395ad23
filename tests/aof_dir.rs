//! The AOF in Redis 7.0's layout (`appendonlydir/`, its manifest, base
//! and incr files) against Debian's redis-server 7.0: each server starts
//! on the other's folder with equal data, with and without the RDB
//! preamble, after writes and a BGREWRITEAOF; redis-check-aof accepts
//! ours; a SIGKILL during a rewrite leaves the previous files loadable;
//! a single `appendonly.aof` is upgraded as Redis 7 upgrades it.
//! (Skipped when redis-server is not installed, outside CI.)
mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::redis_server::{redis_installed, RedisServer};
use common::{free_port, temp_dir, wait_ready};

/// A temporary directory removed at the end of the test.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        Dir(temp_dir(tag))
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server process (ours or redis-server) on a folder; killed on drop.
enum Proc {
    Ours { child: Child, port: u16 },
    Redis(RedisServer),
}

impl Proc {
    fn start(redis: bool, dir: &Path, extra: &[&str]) -> Proc {
        let mut args = vec!["--save", "", "--dir"];
        args.push(dir.to_str().expect("temp dir path is UTF-8"));
        args.extend(["--appendonly", "yes", "--appendfsync", "always"]);
        args.extend_from_slice(extra);
        if redis {
            let r = RedisServer::start_with(Some(dir), None, &args);
            return Proc::Redis(r.expect("redis-server is not installed"));
        }
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new(common::server_binary())
                .args(["--port", &port.to_string()])
                .args(&args)
                .current_dir(dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn");
            if wait_ready(port, &mut child) {
                return Proc::Ours { child, port };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("the server did not start on {}", dir.display());
    }

    fn conn(&self) -> redis::Connection {
        let port = match self {
            Proc::Ours { port, .. } => *port,
            Proc::Redis(r) => r.port,
        };
        redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .expect("client")
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect")
    }

    fn kill(&mut self) {
        match self {
            Proc::Ours { child, .. } => {
                let _ = child.kill();
                let _ = child.wait();
            }
            Proc::Redis(r) => r.kill(),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

fn run(c: &mut redis::Connection, args: &[&str]) -> redis::Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Every Redis type in several encodings, in databases 0 and 2, with TTLs.
fn write_dataset(c: &mut redis::Connection, round: usize, streams: bool) {
    let r = round.to_string();
    run(c, &["SELECT", "0"]);
    run(c, &["SET", &format!("s{r}"), "plain"]);
    run(c, &["SET", &format!("n{r}"), "12345"]);
    run(c, &["SET", "long", &"x".repeat(300)]);
    run(c, &["SET", &format!("ttl{r}"), "v", "EX", "10000"]);
    run(c, &["RPUSH", "list", "a", "b", "3", &r]);
    run(c, &["SADD", "intset", "1", "2", "3", &r]);
    run(c, &["SADD", "set", "a", "b", &format!("m{r}")]);
    run(
        c,
        &["ZADD", "zs", "1.5", "a", "-2", "b", &r, &format!("m{r}")],
    );
    run(c, &["HSET", "h", "f1", "v1", &format!("f{r}"), "2"]);
    run(c, &["INCRBY", "counter", "7"]);
    run(c, &["SELECT", "2"]);
    let mut big = vec!["ZADD".to_string(), "bigz".to_string()];
    let mut bighash = vec!["HSET".to_string(), "bigh".to_string()];
    let mut biglist = vec!["RPUSH".to_string(), "bigl".to_string()];
    let mut bigset = vec!["SADD".to_string(), "bigs".to_string()];
    for i in 0..300 {
        big.extend([format!("{}", i * 3 + round), format!("member:{i}")]);
        bighash.extend([format!("field:{i}"), format!("{}", i * round)]);
        biglist.push(format!("item:{i}:{r}"));
        bigset.push(format!("e{}", i + round * 1000));
    }
    for args in [big, bighash, biglist, bigset] {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        run(c, &a);
    }
    run(c, &["ZINCRBY", "bigz", "5", "member:7"]);
    run(c, &["LPOP", "bigl"]);
    run(c, &["DEL", &format!("s{r}")]);
    run(c, &["PEXPIREAT", "bigh", "99999999999999"]);
    if streams {
        run(c, &["SELECT", "0"]);
        for i in 0..5 {
            let id = format!("{}-{}", round * 10 + 1, i);
            run(c, &["XADD", "st", &id, "f", &i.to_string(), "g", &r]);
        }
        if round == 0 {
            run(c, &["XGROUP", "CREATE", "st", "grp", "0"]);
        }
        run(
            c,
            &[
                "XREADGROUP",
                "GROUP",
                "grp",
                "alice",
                "COUNT",
                "2",
                "STREAMS",
                "st",
                ">",
            ],
        );
        run(c, &["XACK", "st", "grp", &format!("{}-0", round * 10 + 1)]);
    }
}

fn text(v: &redis::Value) -> String {
    common::show(v)
}

/// The data of databases 0 to 2 as text: every key's type, contents and
/// whether it has a TTL, sorted.
fn dump(c: &mut redis::Connection) -> String {
    let mut out = Vec::new();
    for db in ["0", "1", "2"] {
        run(c, &["SELECT", db]);
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
        for k in keys {
            let t: String = redis::cmd("TYPE").arg(&k).query(c).expect("TYPE");
            let ttl: i64 = redis::cmd("PTTL").arg(&k).query(c).expect("PTTL");
            let body = match t.as_str() {
                "string" => text(&run(c, &["GET", &k])),
                "list" => text(&run(c, &["LRANGE", &k, "0", "-1"])),
                "set" => {
                    let mut m: Vec<String> = redis::cmd("SMEMBERS").arg(&k).query(c).expect("S");
                    m.sort();
                    m.join(",")
                }
                "zset" => text(&run(c, &["ZRANGE", &k, "0", "-1", "WITHSCORES"])),
                "hash" => {
                    let mut m: Vec<(String, String)> =
                        redis::cmd("HGETALL").arg(&k).query(c).expect("H");
                    m.sort();
                    format!("{m:?}")
                }
                "stream" => format!(
                    "{} {} {}",
                    text(&run(c, &["XRANGE", &k, "-", "+"])),
                    text(&run(c, &["XINFO", "GROUPS", &k])),
                    text(&run(c, &["XPENDING", &k, "grp"])),
                ),
                other => other.to_string(),
            };
            out.push(format!("{db} {k} {t} ttl:{} {body}", ttl > 0));
        }
    }
    out.sort();
    out.join("\n")
}

/// Equal dumps, or a panic naming the lines that differ.
fn same(got: &str, want: &str, what: &str) {
    if got == want {
        return;
    }
    let g: Vec<&str> = got.lines().collect();
    let w: Vec<&str> = want.lines().collect();
    let missing: Vec<String> = w
        .iter()
        .filter(|l| !g.contains(l))
        .map(|l| l.chars().take(300).collect())
        .collect();
    let extra: Vec<String> = g
        .iter()
        .filter(|l| !w.contains(l))
        .map(|l| l.chars().take(300).collect())
        .collect();
    panic!(
        "{what}: data differs\nwanted, not found:\n{}\nfound, not wanted:\n{}",
        missing.join("\n"),
        extra.join("\n")
    );
}

fn copy_aof_dir(from: &Path, to: &Path) {
    let (src, dst) = (from.join("appendonlydir"), to.join("appendonlydir"));
    std::fs::create_dir_all(&dst).expect("mkdir");
    for e in std::fs::read_dir(&src).expect("appendonlydir").flatten() {
        std::fs::copy(e.path(), dst.join(e.file_name())).expect("copy");
    }
}

fn wait_rewrite(c: &mut redis::Connection, count: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("persistence")
            .query(c)
            .expect("INFO");
        if info.contains("aof_rewrite_in_progress:0")
            && info.contains(&format!("aof_rewrites:{count}"))
        {
            return;
        }
        assert!(Instant::now() < deadline, "rewrite not done: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn manifest(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).expect("manifest")
}

/// Writes the dataset on `from` (redis-server or ours) in two rounds with a
/// BGREWRITEAOF between them, stops it, starts the other on a copy of its
/// folder; returns both dumps.
fn cross(from_redis: bool, preamble: &str, streams: bool) -> (String, String) {
    cross_with(from_redis, preamble, streams, &[])
}

/// [`cross`] with more options for both servers.
fn cross_with(from_redis: bool, preamble: &str, streams: bool, extra: &[&str]) -> (String, String) {
    let a = Dir::new("aofdir-from");
    let mut opts = vec!["--aof-use-rdb-preamble", preamble];
    opts.extend_from_slice(extra);
    let mut p = Proc::start(from_redis, &a.0, &opts);
    let mut c = p.conn();
    write_dataset(&mut c, 0, streams);
    run(&mut c, &["BGREWRITEAOF"]);
    wait_rewrite(&mut c, 1);
    if extra.contains(&"--aof-timestamp-enabled") {
        // The next write is in a later second: its annotation opens the
        // new incr file.
        std::thread::sleep(Duration::from_millis(1100));
    }
    write_dataset(&mut c, 1, streams);
    let live = dump(&mut c);
    drop(c);
    p.kill();
    let m = manifest(&a.0);
    let ext = if preamble == "yes" { "rdb" } else { "aof" };
    if extra.contains(&"--aof-timestamp-enabled") {
        // Both write `#TS:<unix>` annotations: in the incr file, and at
        // the top of a base written as commands.
        let dir = a.0.join("appendonlydir");
        let incr = std::fs::read(dir.join("appendonly.aof.2.incr.aof")).expect("incr");
        assert!(incr.starts_with(b"#TS:"), "no timestamp in the incr file");
        if preamble == "no" {
            let base = std::fs::read(dir.join("appendonly.aof.2.base.aof")).expect("base");
            assert!(base.starts_with(b"#TS:"), "no timestamp in the base");
        }
    }
    assert!(
        m.contains(&format!("appendonly.aof.2.base.{ext} seq 2 type b"))
            && m.contains("appendonly.aof.2.incr.aof seq 2 type i"),
        "{m}"
    );
    if !from_redis {
        // The old base and incr are gone with their history lines.
        assert!(!m.contains("type h"), "{m}");
        assert!(!a.0.join("appendonlydir/appendonly.aof.1.incr.aof").exists());
        let out = Command::new("redis-check-aof")
            .arg(a.0.join("appendonlydir/appendonly.aof.manifest"))
            .output()
            .expect("redis-check-aof");
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{report}");
        assert!(
            report.contains("All AOF files and manifest are valid"),
            "{report}"
        );
    }
    let b = Dir::new("aofdir-to");
    copy_aof_dir(&a.0, &b.0);
    // What the server that wrote the files loads from them (Redis itself
    // reloads a stream group's entries-read from its XCLAIMs as a count
    // that differs from the live one, for one).
    let p = Proc::start(from_redis, &a.0, &opts);
    let want = dump(&mut p.conn());
    drop(p);
    if !streams {
        same(&want, &live, "reloaded by the server that wrote it");
    }
    let q = Proc::start(!from_redis, &b.0, &opts);
    let got = dump(&mut q.conn());
    (want, got)
}

#[test]
fn redis_server_appendonlydir_loads_into_rostrum() {
    if !redis_installed() {
        return;
    }
    for (preamble, streams) in [("yes", true), ("no", true)] {
        let (want, got) = cross(true, preamble, streams);
        assert!(want.contains("bigz") && want.contains("ttl:true"), "{want}");
        same(&got, &want, &format!("preamble {preamble}"));
    }
}

#[test]
fn rostrum_appendonlydir_loads_into_redis_server() {
    if !redis_installed() {
        return;
    }
    for (preamble, streams) in [("yes", true), ("no", true)] {
        let (want, got) = cross(false, preamble, streams);
        assert!(want.contains("bigz") && want.contains("ttl:true"), "{want}");
        same(&got, &want, &format!("preamble {preamble}"));
    }
}

/// `aof-timestamp-enabled yes` (Redis 7.0's `#TS:` annotations): each
/// server's folder, annotated, passes redis-check-aof (ours) and loads
/// into the other.
#[test]
fn timestamped_appendonlydirs_load_both_ways() {
    if !redis_installed() {
        return;
    }
    let ts = ["--aof-timestamp-enabled", "yes"];
    for from_redis in [true, false] {
        for preamble in ["yes", "no"] {
            let (want, got) = cross_with(from_redis, preamble, false, &ts);
            assert!(want.contains("bigz"), "{want}");
            same(
                &got,
                &want,
                &format!("timestamps, from redis {from_redis}, preamble {preamble}"),
            );
        }
    }
}

/// A SIGKILL while a rewrite runs leaves the previous manifest and files,
/// which load with every acknowledged write.
#[test]
fn sigkill_during_a_rewrite_leaves_the_previous_files_loadable() {
    for preamble in ["yes", "no"] {
        let d = Dir::new("aofdir-kill");
        let opts = ["--aof-use-rdb-preamble", preamble];
        let mut p = Proc::start(false, &d.0, &opts);
        let mut c = p.conn();
        let mut pipe = redis::pipe();
        for i in 0..200_000 {
            pipe.cmd("ZADD")
                .arg("board")
                .arg(i % 1000)
                .arg(format!("player:{i}"))
                .ignore();
        }
        let _: () = pipe.query(&mut c).expect("pipeline");
        run(&mut c, &["SET", "last", "1"]);
        let before = manifest(&d.0);
        run(&mut c, &["BGREWRITEAOF"]);
        run(&mut c, &["SET", "during", "2"]);
        p.kill();
        let after = manifest(&d.0);
        let q = Proc::start(false, &d.0, &opts);
        let mut c = q.conn();
        let card: i64 = redis::cmd("ZCARD")
            .arg("board")
            .query(&mut c)
            .expect("ZCARD");
        assert_eq!(card, 200_000);
        let got: Vec<Option<String>> = redis::cmd("MGET")
            .arg("last")
            .arg("during")
            .query(&mut c)
            .expect("MGET");
        assert_eq!(got, vec![Some("1".to_string()), Some("2".to_string())]);
        // Either the rewrite had finished, or nothing of it is named.
        assert!(
            after == before || after.contains("seq 2 type b"),
            "{before} -> {after}"
        );
    }
}

/// Rostrum's and Redis's single `appendonly.aof` (commands, or an RDB
/// preamble then commands) is moved into the folder as the base, named by
/// a new manifest, and loads; so does the folder into redis-server.
#[test]
fn a_single_appendonly_aof_is_upgraded() {
    let d = Dir::new("aofdir-upgrade");
    let mut single = Vec::new();
    for args in [
        &["SELECT", "0"][..],
        &["SET", "a", "1"],
        &["RPUSH", "l", "x", "y"],
        &["SELECT", "2"],
        &["ZADD", "z", "2", "m"],
    ] {
        single.extend(format!("*{}\r\n", args.len()).bytes());
        for a in args {
            single.extend(format!("${}\r\n{a}\r\n", a.len()).bytes());
        }
    }
    std::fs::write(d.0.join("appendonly.aof"), &single).expect("write");
    let mut p = Proc::start(false, &d.0, &[]);
    let mut c = p.conn();
    run(&mut c, &["SET", "b", "2"]);
    let want = dump(&mut c);
    assert!(
        want.contains("2 z zset") && want.contains("0 b string"),
        "{want}"
    );
    drop(c);
    p.kill();
    assert!(!d.0.join("appendonly.aof").exists());
    assert_eq!(
        std::fs::read(d.0.join("appendonlydir/appendonly.aof")).expect("base"),
        single
    );
    assert_eq!(
        manifest(&d.0),
        "file appendonly.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );
    let p = Proc::start(false, &d.0, &[]);
    same(&dump(&mut p.conn()), &want, "restart");
    drop(p);
    if redis_installed() {
        let r = Dir::new("aofdir-upgrade-redis");
        copy_aof_dir(&d.0, &r.0);
        let p = Proc::start(true, &r.0, &[]);
        same(&dump(&mut p.conn()), &want, "redis-server");
    }

    // An old-style file with an RDB preamble (redis-server 7.0's base
    // followed by commands, as Redis before 7 wrote it).
    if !redis_installed() {
        return;
    }
    let src = Dir::new("aofdir-preamble-src");
    let mut p = Proc::start(true, &src.0, &[]);
    let mut c = p.conn();
    write_dataset(&mut c, 0, false);
    run(&mut c, &["BGREWRITEAOF"]);
    wait_rewrite(&mut c, 1);
    drop(c);
    p.kill();
    let mut old =
        std::fs::read(src.0.join("appendonlydir/appendonly.aof.2.base.rdb")).expect("base");
    old.extend(std::fs::read(src.0.join("appendonlydir/appendonly.aof.2.incr.aof")).expect("incr"));
    old.extend(b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$4\r\ntail\r\n$1\r\n1\r\n");
    let d = Dir::new("aofdir-upgrade-preamble");
    std::fs::write(d.0.join("appendonly.aof"), &old).expect("write");
    let p = Proc::start(false, &d.0, &[]);
    let mut c = p.conn();
    let got = dump(&mut c);
    assert!(
        got.contains("0 tail string") && got.contains("2 bigz zset"),
        "{got}"
    );
}

/// A truncated last incr is cut as `aof-load-truncated` says; a truncated
/// file before it refuses the start.
#[test]
fn truncated_incr_files() {
    let d = Dir::new("aofdir-trunc");
    let mut p = Proc::start(false, &d.0, &[]);
    let mut c = p.conn();
    run(&mut c, &["SET", "a", "1"]);
    drop(c);
    p.kill();
    let incr = d.0.join("appendonlydir/appendonly.aof.1.incr.aof");
    let good = std::fs::read(&incr).expect("incr");
    let mut bad = good.clone();
    bad.extend(b"*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1");
    std::fs::write(&incr, &bad).expect("write");
    let p = Proc::start(false, &d.0, &[]);
    let got: Option<String> = redis::cmd("GET")
        .arg("a")
        .query(&mut p.conn())
        .expect("GET");
    assert_eq!(got.as_deref(), Some("1"));
    drop(p);
    assert_eq!(std::fs::read(&incr).expect("incr"), good);

    // A cut base with an incr after it: refused.
    let base = d.0.join("appendonlydir/appendonly.aof.1.base.rdb");
    let b = std::fs::read(&base).expect("base");
    std::fs::write(&base, &b[..b.len() - 4]).expect("cut");
    let mut child = Command::new(common::server_binary())
        .args([
            "--port",
            &free_port().to_string(),
            "--appendonly",
            "yes",
            "--dir",
        ])
        .arg(&d.0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            assert!(!status.success());
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("started on a cut base file");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
