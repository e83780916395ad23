//! RDB files and DUMP/RESTORE against a real redis-server 7.0: its
//! `dump.rdb` (every type, small and big encodings, several databases,
//! TTLs) loads into Rostrum with equal data; Rostrum's file passes
//! redis-check-rdb and loads into redis-server; DUMP in one and RESTORE in
//! the other, both ways; a SIGKILL during BGSAVE leaves the previous file;
//! truncated and corrupted files are refused naming the offset.
//!
//! Without redis-server the Redis-side tests are skipped with a notice
//! (and fail when `CI` is set).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::redis_server::RedisServer;
use common::{free_port, temp_dir, TestServer};

/// Whether redis-server and redis-check-rdb can run; under `CI` they must.
fn have_redis() -> bool {
    let ok = ["redis-server", "redis-check-rdb"].iter().all(|t| {
        Command::new(t)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    });
    if !ok {
        assert!(
            std::env::var_os("CI").is_none_or(|v| v.is_empty()),
            "redis-server / redis-check-rdb not installed, and CI is set"
        );
        eprintln!("redis-server not installed: skipped");
    }
    ok
}

/// A redis-server in `dir` (loading what it finds there), killed on drop.
fn redis_in(dir: &Path, extra: &[&str]) -> Option<RedisServer> {
    RedisServer::start_with(Some(dir), None, extra)
}

/// Encoding limits: Redis's defaults, or low ones so every collection
/// takes its big encoding (hashtable, skiplist, many list nodes).
const LOW: &[&str] = &[
    "--hash-max-listpack-entries",
    "4",
    "--zset-max-listpack-entries",
    "4",
    "--set-max-intset-entries",
    "4",
    "--list-max-listpack-size",
    "3",
];

const DBS: [i64; 3] = [0, 2, 15];

/// Every type in small and big sizes, in three databases, some with TTLs.
fn populate(c: &mut redis::Connection) {
    for db in DBS {
        let _: () = redis::cmd("SELECT").arg(db).query(c).expect("select");
        let p = format!("d{db}:");
        let mut pipe = redis::pipe();
        pipe.cmd("SET").arg(format!("{p}int")).arg(12345).ignore();
        pipe.cmd("SET")
            .arg(format!("{p}neg"))
            .arg(-9_000_000_000i64)
            .ignore();
        pipe.cmd("SET")
            .arg(format!("{p}text"))
            .arg("hello")
            .ignore();
        pipe.cmd("SET")
            .arg(format!("{p}bin"))
            .arg(&b"a\r\n\0\xffb"[..])
            .ignore();
        pipe.cmd("SET")
            .arg(format!("{p}long"))
            .arg("abc".repeat(400))
            .ignore();
        pipe.cmd("SETBIT")
            .arg(format!("{p}bits"))
            .arg(10_000)
            .arg(1)
            .ignore();
        pipe.cmd("SET")
            .arg(format!("{p}ttl"))
            .arg("v")
            .arg("PX")
            .arg(500_000)
            .ignore();
        pipe.cmd("RPUSH")
            .arg(format!("{p}list"))
            .arg(&["a", "1", "-700", "x y"])
            .ignore();
        let big: Vec<String> = (0..1500).map(|i| format!("element:{i}")).collect();
        pipe.cmd("RPUSH")
            .arg(format!("{p}biglist"))
            .arg(&big)
            .ignore();
        pipe.cmd("SADD")
            .arg(format!("{p}ints"))
            .arg(&[1, 2, 3])
            .ignore();
        let many: Vec<i64> = (0..700).map(|i| i * 7 - 900).collect();
        pipe.cmd("SADD")
            .arg(format!("{p}manyints"))
            .arg(&many)
            .ignore();
        pipe.cmd("SADD")
            .arg(format!("{p}words"))
            .arg(&["x", "y", "z", "w", "v"])
            .ignore();
        pipe.cmd("ZADD")
            .arg(format!("{p}z"))
            .arg(&["1", "a", "2.5", "b", "-inf", "c"])
            .ignore();
        let zs: Vec<String> = (0..300)
            .flat_map(|i| [format!("{}", i as f64 * 0.75), format!("m{i}")])
            .collect();
        pipe.cmd("ZADD").arg(format!("{p}bigz")).arg(&zs).ignore();
        pipe.cmd("HSET")
            .arg(format!("{p}h"))
            .arg(&["f", "1", "g", "two"])
            .ignore();
        let hs: Vec<String> = (0..600)
            .flat_map(|i| [format!("f{i}"), format!("{}", i * 3)])
            .collect();
        pipe.cmd("HSET").arg(format!("{p}bigh")).arg(&hs).ignore();
        pipe.cmd("PEXPIRE")
            .arg(format!("{p}bigz"))
            .arg(400_000)
            .ignore();
        pipe.cmd("PEXPIRE")
            .arg(format!("{p}h"))
            .arg(400_000)
            .ignore();
        // A stream of two listpack nodes with a deleted entry, a group with
        // pending entries and consumers, and a second group.
        let st = format!("{p}stream");
        for i in 1..=150 {
            let x = pipe.cmd("XADD");
            x.arg(&st).arg(format!("{}-{}", 1000 + i, i % 3));
            if i % 7 == 0 {
                x.arg("other").arg(i).ignore();
            } else {
                x.arg("user").arg(i).arg("n").arg("12345678901").ignore();
            }
        }
        pipe.cmd("XDEL").arg(&st).arg("1010-1").ignore();
        pipe.cmd("XGROUP")
            .arg("CREATE")
            .arg(&st)
            .arg("g1")
            .arg("0")
            .ignore();
        pipe.cmd("XGROUP")
            .arg("CREATE")
            .arg(&st)
            .arg("g2")
            .arg("$")
            .ignore();
        pipe.cmd("XREADGROUP")
            .arg(&["GROUP", "g1", "alice", "COUNT", "5", "STREAMS"])
            .arg(&st)
            .arg(">")
            .ignore();
        pipe.cmd("XREADGROUP")
            .arg(&["GROUP", "g1", "bob", "COUNT", "2", "STREAMS"])
            .arg(&st)
            .arg(">")
            .ignore();
        pipe.cmd("XACK").arg(&st).arg("g1").arg("1002-2").ignore();
        let _: () = pipe.query(c).expect("populate");
    }
    let _: () = redis::cmd("SELECT").arg(0).query(c).expect("select");
}

/// Every key of the databases in a canonical text form: type, contents
/// (sets and hashes sorted) and whether it has a TTL (within 1000 s).
fn contents(c: &mut redis::Connection) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for db in DBS {
        let _: () = redis::cmd("SELECT").arg(db).query(c).expect("select");
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).expect("keys");
        for k in keys {
            let t: String = redis::cmd("TYPE").arg(&k).query(c).expect("type");
            let v = match t.as_str() {
                "string" => {
                    let v: Vec<u8> = redis::cmd("GET").arg(&k).query(c).expect("get");
                    format!("{v:?}")
                }
                "list" => {
                    let v: Vec<Vec<u8>> = redis::cmd("LRANGE")
                        .arg(&k)
                        .arg(0)
                        .arg(-1)
                        .query(c)
                        .expect("lrange");
                    format!("{v:?}")
                }
                "set" => {
                    let mut v: Vec<Vec<u8>> =
                        redis::cmd("SMEMBERS").arg(&k).query(c).expect("smembers");
                    v.sort();
                    format!("{v:?}")
                }
                "zset" => {
                    let v: Vec<Vec<u8>> = redis::cmd("ZRANGE")
                        .arg(&k)
                        .arg(0)
                        .arg(-1)
                        .arg("WITHSCORES")
                        .query(c)
                        .expect("zrange");
                    format!("{v:?}")
                }
                "hash" => {
                    let mut v: Vec<(Vec<u8>, Vec<u8>)> =
                        redis::cmd("HGETALL").arg(&k).query(c).expect("hgetall");
                    v.sort();
                    format!("{v:?}")
                }
                "stream" => {
                    // Everything but the radix tree's shape.
                    let v: Vec<redis::Value> = redis::cmd("XINFO")
                        .arg("STREAM")
                        .arg(&k)
                        .arg("FULL")
                        .query(c)
                        .expect("xinfo");
                    let mut out = String::new();
                    for pair in v.chunks(2) {
                        let key = format!("{:?}", pair[0]);
                        if !key.contains("radix-tree") {
                            out.push_str(&format!("{key}={:?} ", pair.get(1)));
                        }
                    }
                    out
                }
                other => other.to_string(),
            };
            let ttl: i64 = redis::cmd("TTL").arg(&k).query(c).expect("ttl");
            let ttl = if ttl > 0 && ttl <= 1000 {
                "ttl"
            } else {
                &ttl.to_string()
            };
            out.insert(
                format!("{db}/{}", String::from_utf8_lossy(&k)),
                format!("{t} {ttl} {v}"),
            );
        }
    }
    let _: () = redis::cmd("SELECT").arg(0).query(c).expect("select");
    out
}

/// Rostrum in `dir` with redis-server style `--name value` settings
/// (passed as `--config name=value`). Dropping it removes `dir`.
fn rostrum_in(dir: &Path, extra: &[&str]) -> TestServer {
    let mut args: Vec<String> = vec!["--dir".into(), dir.to_str().expect("utf-8 temp dir").into()];
    for p in extra.chunks(2) {
        args.push("--config".into());
        args.push(format!("{}={}", p[0].trim_start_matches("--"), p[1]));
    }
    let args: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
    TestServer::start_in(dir.to_path_buf(), &args)
}

/// Stops a server with SIGKILL and takes its `dump.rdb` into a new
/// directory (dropping the server removes its own).
fn take_dump(mut node: TestServer, tag: &str) -> PathBuf {
    node.kill();
    let to = temp_dir(tag);
    std::fs::copy(node.dir.join("dump.rdb"), to.join("dump.rdb")).expect("dump.rdb written");
    to
}

fn check_rdb(path: &Path) {
    let out = Command::new("redis-check-rdb")
        .arg(path)
        .output()
        .expect("redis-check-rdb");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("RDB looks OK"),
        "{text}"
    );
}

#[test]
fn redis_dump_rdb_loads_into_rostrum() {
    if !have_redis() {
        return;
    }
    for limits in [&[][..], LOW] {
        let rdir = temp_dir("rdb-from-redis");
        let redis = redis_in(&rdir, limits).expect("redis-server starts");
        let mut rc = redis.conn();
        populate(&mut rc);
        let expected = contents(&mut rc);
        assert_eq!(expected.len(), 3 * 17);
        let lib = "#!lua name=rdblib\nredis.register_function('rdbfn', function(keys, args) return 'from-rdb' end)";
        let _: String = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg(lib)
            .query(&mut rc)
            .expect("function load");
        let _: () = redis::cmd("SAVE").query(&mut rc).expect("redis SAVE");
        drop(redis);
        let ours = temp_dir("rdb-into-rostrum");
        std::fs::copy(rdir.join("dump.rdb"), ours.join("dump.rdb")).expect("copy");
        let node = rostrum_in(&ours, limits);
        let mut c = node.conn();
        assert_eq!(contents(&mut c), expected, "limits {limits:?}");
        let info = common::info(&mut c, "persistence");
        assert_eq!(info["rdb_last_load_keys_loaded"], (3 * 17).to_string());
        let r: String = redis::cmd("FCALL")
            .arg("rdbfn")
            .arg(0)
            .query(&mut c)
            .expect("fcall");
        assert_eq!(r, "from-rdb", "the file's function library is loaded");
        let _ = std::fs::remove_dir_all(&rdir);
    }
}

#[test]
fn rostrum_rdb_passes_redis_check_rdb_and_loads_into_redis() {
    if !have_redis() {
        return;
    }
    for (limits, compression) in [(&[][..], "yes"), (LOW, "no")] {
        let ours = temp_dir("rdb-ours");
        let node = rostrum_in(&ours, limits);
        let mut c = node.conn();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("rdbcompression")
            .arg(compression)
            .query(&mut c)
            .expect("config");
        populate(&mut c);
        let expected = contents(&mut c);
        let lib = "#!lua name=ourlib\nredis.register_function('ourfn', function(keys, args) return 'from-rostrum' end)";
        let _: String = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg(lib)
            .query(&mut c)
            .expect("function load");
        let _: () = redis::cmd("SAVE").query(&mut c).expect("SAVE");
        drop(c);
        let rdir = take_dump(node, "rdb-ours-redis");
        check_rdb(&rdir.join("dump.rdb"));
        let redis = redis_in(&rdir, limits).expect("redis-server loads Rostrum's file");
        let mut rc = redis.conn();
        assert_eq!(contents(&mut rc), expected, "limits {limits:?}");
        let r: String = redis::cmd("FCALL")
            .arg("ourfn")
            .arg(0)
            .query(&mut rc)
            .expect("fcall in redis");
        assert_eq!(r, "from-rostrum");
        // And Rostrum loads its own file back.
        let again = temp_dir("rdb-ours-again");
        std::fs::copy(rdir.join("dump.rdb"), again.join("dump.rdb")).expect("copy");
        let node = rostrum_in(&again, limits);
        assert_eq!(contents(&mut node.conn()), expected);
        let _ = std::fs::remove_dir_all(&rdir);
    }
}

#[test]
fn dump_restore_both_ways() {
    if !have_redis() {
        return;
    }
    let rdir = temp_dir("rdb-dump-redis");
    let redis = redis_in(&rdir, &[]).expect("redis-server");
    let mut rc = redis.conn();
    let node = TestServer::start(&[]);
    let mut c = node.conn();
    populate(&mut rc);
    let expected = contents(&mut rc);
    // Redis -> Rostrum, then Rostrum -> a flushed Redis.
    for (from, to) in [(0, 1), (1, 0)] {
        let (src, dst): (&mut redis::Connection, &mut redis::Connection) = if from == 0 {
            (&mut rc, &mut c)
        } else {
            (&mut c, &mut rc)
        };
        let _: () = redis::cmd("FLUSHALL").query(dst).expect("flushall");
        for db in DBS {
            let _: () = redis::cmd("SELECT").arg(db).query(src).expect("select");
            let _: () = redis::cmd("SELECT").arg(db).query(dst).expect("select");
            let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(src).expect("keys");
            for k in keys {
                let payload: Vec<u8> = redis::cmd("DUMP").arg(&k).query(src).expect("dump");
                let pttl: i64 = redis::cmd("PTTL").arg(&k).query(src).expect("pttl");
                let _: () = redis::cmd("RESTORE")
                    .arg(&k)
                    .arg(pttl.max(0))
                    .arg(&payload)
                    .query(dst)
                    .unwrap_or_else(|e| panic!("RESTORE {}: {e}", String::from_utf8_lossy(&k)));
            }
        }
        let _: () = redis::cmd("SELECT").arg(0).query(src).expect("select");
        let _: () = redis::cmd("SELECT").arg(0).query(dst).expect("select");
        assert_eq!(contents(dst), expected, "direction {from} -> {to}");
    }
}

#[test]
fn a_leaderboard_survives_a_restart_and_redis_refuses_it_by_type() {
    let dir = temp_dir("rdb-lb");
    let node = rostrum_in(&dir, &[]);
    let mut c = node.conn();
    let _: () = redis::cmd("LB.CREATE")
        .arg("board")
        .arg("ORDER")
        .arg("ASC")
        .arg("CAPACITY")
        .arg(100)
        .query(&mut c)
        .expect("lb.create");
    for i in 0..50 {
        let _: redis::Value = redis::cmd("LB.SUBMIT")
            .arg("board")
            .arg(format!("p{i}"))
            .arg(i * 10)
            .arg("META")
            .arg(format!("m{i}"))
            .arg("ID")
            .arg(format!("e{i}"))
            .query(&mut c)
            .expect("lb.submit");
    }
    let top: redis::Value = redis::cmd("LB.TOP")
        .arg("board")
        .arg(50)
        .arg("WITHSUBSCORE")
        .arg("WITHTIME")
        .arg("WITHMETA")
        .query(&mut c)
        .expect("range");
    let payload: Vec<u8> = redis::cmd("DUMP").arg("board").query(&mut c).expect("dump");
    let _: () = redis::cmd("SAVE").query(&mut c).expect("save");
    drop(c);
    let again = take_dump(node, "rdb-lb-again");
    let node = rostrum_in(&again, &[]);
    let mut c = node.conn();
    let after: redis::Value = redis::cmd("LB.TOP")
        .arg("board")
        .arg(50)
        .arg("WITHSUBSCORE")
        .arg("WITHTIME")
        .arg("WITHMETA")
        .query(&mut c)
        .expect("range");
    assert_eq!(after, top);
    let _: () = redis::cmd("RESTORE")
        .arg("copy")
        .arg(0)
        .arg(&payload)
        .query(&mut c)
        .expect("restore");
    let copied: redis::Value = redis::cmd("LB.TOP")
        .arg("copy")
        .arg(50)
        .arg("WITHSUBSCORE")
        .arg("WITHTIME")
        .arg("WITHMETA")
        .query(&mut c)
        .expect("range");
    assert_eq!(copied, top);
    if !have_redis() {
        return;
    }
    let out = Command::new("redis-check-rdb")
        .arg(again.join("dump.rdb"))
        .output()
        .expect("check");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("200"), "Redis names the type id: {text}");
}

/// Starts Rostrum on `dir` expecting it to refuse to start; returns what it
/// wrote.
fn refused_start(dir: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_rostrum"))
        .args(["--port", &free_port().to_string(), "--dir"])
        .arg(dir)
        .stdin(Stdio::null())
        .output()
        .expect("spawn rostrum");
    assert!(!out.status.success(), "rostrum started on a bad file");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn truncated_and_corrupted_files_are_refused_naming_the_offset() {
    let dir = temp_dir("rdb-bad");
    let node = rostrum_in(&dir, &[]);
    let mut c = node.conn();
    populate(&mut c);
    let _: () = redis::cmd("SAVE").query(&mut c).expect("save");
    drop(c);
    let saved = take_dump(node, "rdb-bad-1");
    let good = std::fs::read(saved.join("dump.rdb")).expect("read");
    let bad = temp_dir("rdb-bad-2");
    let file = bad.join("dump.rdb");
    std::fs::write(&file, &good[..good.len() / 2]).expect("write");
    let text = refused_start(&bad);
    assert!(text.contains("at offset"), "{text}");
    // Cut in a value, the cut is seen as the end of the data or as a count
    // that the bytes left cannot hold (checked before reading them).
    assert!(
        text.contains("unexpected end") || text.contains("more than the data left holds"),
        "{text}"
    );
    let mut flipped = good.clone();
    let at = good.len() / 3;
    flipped[at] ^= 0x5a;
    std::fs::write(&file, &flipped).expect("write");
    let text = refused_start(&bad);
    assert!(text.contains("at offset"), "{text}");
    // An unknown value type names the key.
    let mut unknown = Vec::new();
    unknown.extend_from_slice(b"REDIS0010\xfe\x00\x63\x03key\x02hi\xff");
    unknown.extend_from_slice(&0u64.to_le_bytes());
    std::fs::write(&file, &unknown).expect("write");
    let text = refused_start(&bad);
    assert!(
        text.contains("key 'key'") && text.contains("type 99"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&bad);
}

#[test]
fn sigkill_during_bgsave_leaves_the_previous_file_loadable() {
    let dir = temp_dir("rdb-kill");
    let node = rostrum_in(&dir, &[]);
    let mut c = node.conn();
    let _: () = redis::cmd("SET")
        .arg("first")
        .arg("1")
        .query(&mut c)
        .expect("set");
    let _: () = redis::cmd("SAVE").query(&mut c).expect("save");
    let before = std::fs::read(dir.join("dump.rdb")).expect("first file");
    // Enough data that the background save takes a while.
    for chunk in 0..40 {
        let members: Vec<String> = (0..5000)
            .flat_map(|i| [i.to_string(), format!("m{chunk}:{i}")])
            .collect();
        let _: i64 = redis::cmd("ZADD")
            .arg(format!("z{chunk}"))
            .arg(&members)
            .query(&mut c)
            .expect("zadd");
    }
    let _: String = redis::cmd("BGSAVE").query(&mut c).expect("bgsave");
    std::thread::sleep(Duration::from_millis(5));
    let again = take_dump(node, "rdb-kill-again");
    let after = std::fs::read(again.join("dump.rdb")).expect("file still there");
    // Either the old file, untouched, or (if the save won the race) a whole new one.
    let node = rostrum_in(&again, &[]);
    let mut c = node.conn();
    let size: i64 = redis::cmd("DBSIZE").query(&mut c).expect("dbsize");
    if after == before {
        assert_eq!(size, 1);
    } else {
        assert_eq!(size, 41);
    }
    let first: String = redis::cmd("GET").arg("first").query(&mut c).expect("get");
    assert_eq!(first, "1");
}

#[test]
fn save_points_bgsave_lastsave_and_info() {
    let dir = temp_dir("rdb-points");
    let node = rostrum_in(&dir, &["--save", "1 3"]);
    let mut c = node.conn();
    let last0: i64 = redis::cmd("LASTSAVE").query(&mut c).expect("lastsave");
    for i in 0..3 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut c)
            .expect("set");
    }
    let info = common::info(&mut c, "persistence");
    assert_eq!(info["rdb_changes_since_last_save"], "3");
    // The save point (3 changes, 1 second) fires within about 2 seconds.
    let deadline = Instant::now() + Duration::from_secs(6);
    loop {
        let info = common::info(&mut c, "persistence");
        if info["rdb_saves"] == "1" && info["rdb_bgsave_in_progress"] == "0" {
            assert_eq!(info["rdb_changes_since_last_save"], "0");
            assert_eq!(info["rdb_last_bgsave_status"], "ok");
            break;
        }
        assert!(Instant::now() < deadline, "no save point save: {info:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(dir.join("dump.rdb").exists());
    let last1: i64 = redis::cmd("LASTSAVE").query(&mut c).expect("lastsave");
    assert!(last1 >= last0);
    let r: String = redis::cmd("BGSAVE").query(&mut c).expect("bgsave");
    assert_eq!(r, "Background saving started");
    // A save that can't create its temp file fails, and writes are refused.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("save")
        .arg("")
        .query(&mut c)
        .expect("config");
    wait_no_save(&mut c);
    let blocker: PathBuf = dir.join(format!("temp-{}.rdb", node.child.id()));
    std::fs::create_dir_all(&blocker).expect("mkdir");
    let e = redis::cmd("SAVE")
        .query::<()>(&mut c)
        .expect_err("save fails");
    assert_eq!(e.code(), Some("ERR"));
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("save")
        .arg("100 100")
        .query(&mut c)
        .expect("config");
    let e = redis::cmd("SET")
        .arg("x")
        .arg("1")
        .query::<()>(&mut c)
        .expect_err("MISCONF");
    assert_eq!(e.code(), Some("MISCONF"));
    let info = common::info(&mut c, "persistence");
    assert_eq!(info["rdb_last_bgsave_status"], "err");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("stop-writes-on-bgsave-error")
        .arg("no")
        .query(&mut c)
        .expect("config");
    let _: () = redis::cmd("SET")
        .arg("x")
        .arg("1")
        .query(&mut c)
        .expect("write allowed again");
    std::fs::remove_dir_all(&blocker).expect("rmdir");
    let _: () = redis::cmd("SAVE").query(&mut c).expect("save works again");
    let info = common::info(&mut c, "persistence");
    assert_eq!(info["rdb_last_bgsave_status"], "ok");
}

fn wait_no_save(c: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while common::info(c, "persistence")["rdb_bgsave_in_progress"] != "0" {
        assert!(Instant::now() < deadline, "BGSAVE never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn shutdown_saves_unless_nosave() {
    let dir = temp_dir("rdb-shutdown");
    let node = rostrum_in(&dir, &["--save", "3600 1"]);
    let mut c = node.conn();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut c)
        .expect("set");
    let _ = redis::cmd("SHUTDOWN").query::<()>(&mut c);
    let mut node = node;
    let _ = node.child.wait();
    assert!(
        dir.join("dump.rdb").exists(),
        "SHUTDOWN with save points saves"
    );
    let again = take_dump(node, "rdb-shutdown-2");
    let node = rostrum_in(&again, &[]);
    let mut c = node.conn();
    let v: String = redis::cmd("GET").arg("k").query(&mut c).expect("get");
    assert_eq!(v, "v");
    let _: () = redis::cmd("SET")
        .arg("k2")
        .arg("v")
        .query(&mut c)
        .expect("set");
    let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<()>(&mut c);
    let mut node = node;
    let _ = node.child.wait();
    let last = take_dump(node, "rdb-shutdown-3");
    let mut node = rostrum_in(&last, &["--save", "3600 1"]);
    let mut c = node.conn();
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).expect("dbsize");
    assert_eq!(n, 1, "NOSAVE left the file as it was");
    // SIGTERM with save points saves too.
    let _: () = redis::cmd("SET")
        .arg("k3")
        .arg("v")
        .query(&mut c)
        .expect("set");
    node.terminate();
    let after = take_dump(node, "rdb-shutdown-4");
    let node = rostrum_in(&after, &[]);
    let n: i64 = redis::cmd("DBSIZE")
        .query(&mut node.conn())
        .expect("dbsize");
    assert_eq!(n, 2, "SIGTERM saved");
}

#[test]
fn migrate_both_ways_with_copy_replace_auth_and_keys() {
    if !have_redis() {
        return;
    }
    let rdir = temp_dir("rdb-migrate");
    let redis = redis_in(&rdir, &["--requirepass", "pw"]).expect("redis-server");
    let mut rc = redis::Client::open(format!("redis://:pw@127.0.0.1:{}/", redis.port))
        .expect("client")
        .get_connection_with_timeout(Duration::from_secs(5))
        .expect("connect");
    let node = TestServer::start(&[]);
    let mut c = node.conn();
    populate(&mut c);
    let expected = contents(&mut c);
    let port = redis.port.to_string();
    let migrate = |c: &mut redis::Connection, db: i64, extra: &[&str], keys: &[Vec<u8>]| {
        redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(&port)
            .arg("")
            .arg(db)
            .arg(5000)
            .arg(extra)
            .arg("KEYS")
            .arg(keys)
            .query::<String>(c)
    };
    for db in DBS {
        let _: () = redis::cmd("SELECT").arg(db).query(&mut c).expect("select");
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut c).expect("keys");
        // Without AUTH the target refuses; nothing is removed here.
        let e = migrate(&mut c, db, &[], &keys).expect_err("NOAUTH");
        assert!(
            e.to_string().contains("Target instance replied with error"),
            "{e}"
        );
        // COPY keeps the keys here; a second COPY hits BUSYKEY; REPLACE moves them.
        assert_eq!(
            migrate(&mut c, db, &["COPY", "AUTH", "pw"], &keys).expect("copy"),
            "OK"
        );
        let e = migrate(&mut c, db, &["COPY", "AUTH2", "default", "pw"], &keys).expect_err("busy");
        assert!(e.to_string().contains("BUSYKEY"), "{e}");
        assert_eq!(
            migrate(&mut c, db, &["REPLACE", "AUTH", "pw"], &keys).expect("move"),
            "OK"
        );
        let left: i64 = redis::cmd("DBSIZE").query(&mut c).expect("dbsize");
        assert_eq!(left, 0);
        assert_eq!(
            migrate(&mut c, db, &["AUTH", "pw"], &keys).expect("nokey"),
            "NOKEY"
        );
    }
    let _: () = redis::cmd("SELECT").arg(0).query(&mut c).expect("select");
    assert_eq!(contents(&mut rc), expected);
    // And back: redis-server migrates one key to Rostrum.
    let r: String = redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(node.port)
        .arg("d0:biglist")
        .arg(0)
        .arg(5000)
        .query(&mut rc)
        .expect("migrate to rostrum");
    assert_eq!(r, "OK");
    let n: i64 = redis::cmd("LLEN")
        .arg("d0:biglist")
        .query(&mut c)
        .expect("llen");
    assert_eq!(n, 1500);
    // A closed port.
    let e = redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(free_port())
        .arg("d0:biglist")
        .arg(0)
        .arg(500)
        .query::<String>(&mut c)
        .expect_err("IOERR");
    assert_eq!(e.code(), Some("IOERR"));
}
