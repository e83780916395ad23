//! Streams through a real client: blocking XREAD / XREADGROUP woken by
//! XADD (and not blocking inside MULTI), streams with groups, consumers and
//! pending entries surviving an AOF restart and a rewrite (XINFO STREAM
//! FULL compared), and the real-time board pipeline of scenario 3:
//! producers, a consumer group applying like/unlike events to a board, a
//! consumer killed mid-batch whose entries are taken over with XAUTOCLAIM,
//! each event counted once, and the board rebuilt from the stream alone.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{temp_dir, TestServer};
use redis::{Connection, Value};

fn q<T: redis::FromRedisValue>(c: &mut Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

#[test]
fn xread_block_is_woken_by_xadd_and_times_out() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: String = q(&mut c, &["XADD", "s", "1-0", "f", "old"]);
    let url = srv.url();
    let waiter = std::thread::spawn(move || {
        let mut w = redis::Client::open(url.as_str())
            .expect("client")
            .get_connection()
            .expect("conn");
        let started = Instant::now();
        let v: Value = q(&mut w, &["XREAD", "BLOCK", "5000", "STREAMS", "s", "$"]);
        (v, started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(200));
    let _: String = q(&mut c, &["XADD", "s", "2-0", "f", "new"]);
    let (v, waited) = waiter.join().expect("waiter");
    assert!(waited < Duration::from_secs(4), "woken late: {waited:?}");
    let text = format!("{v:?}");
    assert!(text.contains("2-0") && !text.contains("1-0"), "{text}");

    // Nothing comes: a null reply after the timeout.
    let started = Instant::now();
    let v: Value = q(&mut c, &["XREAD", "BLOCK", "100", "STREAMS", "s", "$"]);
    assert_eq!(v, Value::Nil);
    assert!(started.elapsed() >= Duration::from_millis(90));

    // Inside MULTI it answers at once, as on timeout.
    let _: String = q(&mut c, &["MULTI"]);
    let _: String = q(&mut c, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    let v: Value = q(&mut c, &["EXEC"]);
    assert_eq!(v, Value::Array(vec![Value::Nil]));
}

#[test]
fn xreadgroup_block_is_woken_and_records_the_delivery() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: String = q(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    let url = srv.url();
    let waiter = std::thread::spawn(move || {
        let mut w = redis::Client::open(url.as_str())
            .expect("client")
            .get_connection()
            .expect("conn");
        let v: Value = q(
            &mut w,
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "alice",
                "BLOCK",
                "5000",
                "STREAMS",
                "s",
                ">",
            ],
        );
        v
    });
    std::thread::sleep(Duration::from_millis(200));
    let _: String = q(&mut c, &["XADD", "s", "5-0", "like", "p1"]);
    let v = waiter.join().expect("waiter");
    assert!(format!("{v:?}").contains("5-0"));
    let pending: Value = q(&mut c, &["XPENDING", "s", "g"]);
    let text = format!("{pending:?}");
    assert!(text.contains("alice") && text.contains("5-0"), "{text}");
}

struct DataDir(PathBuf);

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// XINFO STREAM FULL of `key` with the consumers' seen-time blanked (a
/// reload sets it to the load time, as in Redis).
fn full(c: &mut Connection, key: &str) -> String {
    let v: Value = q(c, &["XINFO", "STREAM", key, "FULL", "COUNT", "0"]);
    let text = format!("{v:?}");
    let marker = "seen-time\"'), int(";
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(p) = rest.find(marker) {
        out.push_str(&rest[..p + marker.len()]);
        rest = &rest[p + marker.len()..];
        rest = &rest[rest.find(')').unwrap_or(0)..];
        out.push_str("SEEN");
    }
    out.push_str(rest);
    assert!(
        !text.contains("seen-time") || out.contains("SEEN"),
        "{text}"
    );
    out
}

fn wait_rewrite(c: &mut Connection) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = q(c, &["INFO", "persistence"]);
        if info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrites:1") {
            return;
        }
        assert!(Instant::now() < deadline, "rewrite did not finish: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Streams with every part a save must keep: trimmed and deleted entries,
/// two groups (one with ENTRIESREAD), consumers with pending entries (one
/// claimed, some NOACK), an idle consumer, an empty stream with a group,
/// and an emptied one whose ids and counters were set by XSETID.
fn fill(c: &mut Connection) {
    for i in 1..=250 {
        let _: String = q(
            c,
            &[
                "XADD",
                "log",
                "*",
                "user",
                &format!("u{}", i % 7),
                "n",
                &i.to_string(),
            ],
        );
    }
    let _: String = q(c, &["XADD", "log", "*", "other", "fields"]);
    let _: i64 = q(c, &["XTRIM", "log", "MAXLEN", "~", "120"]);
    let _: Value = q(c, &["XADD", "log", "MAXLEN", "200", "*", "x", "1"]);
    let ids: Vec<Value> = q(c, &["XRANGE", "log", "-", "+", "COUNT", "3"]);
    let first = match &ids[1] {
        Value::Array(e) => match &e[0] {
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    let _: i64 = q(c, &["XDEL", "log", &first]);
    let _: String = q(c, &["XGROUP", "CREATE", "log", "g1", "0"]);
    let _: String = q(
        c,
        &["XGROUP", "CREATE", "log", "g2", "$", "ENTRIESREAD", "5"],
    );
    let _: Value = q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "alice",
            "COUNT",
            "10",
            "STREAMS",
            "log",
            ">",
        ],
    );
    let _: Value = q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "bob",
            "COUNT",
            "5",
            "STREAMS",
            "log",
            ">",
        ],
    );
    let _: Value = q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "bob",
            "NOACK",
            "COUNT",
            "5",
            "STREAMS",
            "log",
            ">",
        ],
    );
    let _: Value = q(
        c,
        &["XREADGROUP", "GROUP", "g1", "alice", "STREAMS", "log", "0"],
    );
    let _: Value = q(
        c,
        &["XAUTOCLAIM", "log", "g1", "carol", "0", "0", "COUNT", "3"],
    );
    let _: i64 = q(c, &["XGROUP", "CREATECONSUMER", "log", "g2", "idle"]);
    let _: String = q(c, &["XGROUP", "CREATE", "empty", "g", "$", "MKSTREAM"]);
    let _: String = q(c, &["XADD", "gone", "1-1", "a", "b"]);
    let _: i64 = q(c, &["XDEL", "gone", "1-1"]);
    let _: String = q(
        c,
        &[
            "XSETID",
            "gone",
            "9-9",
            "ENTRIESADDED",
            "40",
            "MAXDELETEDID",
            "3-0",
        ],
    );
}

#[test]
fn streams_survive_dump_restore_and_an_rdb_restart() {
    let dir = DataDir(temp_dir("streams-rdb"));
    let d = dir.0.to_str().expect("utf-8 dir");
    let mut srv = TestServer::start(&["--dir", d, "--save", "3600 1"]);
    let mut c = srv.conn();
    fill(&mut c);
    let keys = ["log", "empty", "gone"];
    let before: Vec<String> = keys.iter().map(|k| full(&mut c, k)).collect();
    // DUMP / RESTORE under another name.
    for k in keys {
        let payload: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut c).expect("DUMP");
        let copy = format!("{k}:copy");
        let ok: String = redis::cmd("RESTORE")
            .arg(&copy)
            .arg(0)
            .arg(payload)
            .query(&mut c)
            .expect("RESTORE");
        assert_eq!(ok, "OK");
        assert_eq!(full(&mut c, &copy), full(&mut c, k), "{k} restored");
        let _: i64 = q(&mut c, &["DEL", &copy]);
    }
    // SAVE, then a start from the RDB file alone.
    let _: String = q(&mut c, &["SAVE"]);
    drop(c);
    srv.terminate();
    assert!(dir.0.join("dump.rdb").exists(), "no dump.rdb");
    let srv = TestServer::start(&["--dir", d]);
    let mut c = srv.conn();
    let after: Vec<String> = keys.iter().map(|k| full(&mut c, k)).collect();
    assert_eq!(after, before);
}

#[test]
fn streams_survive_an_aof_restart_and_a_rewrite() {
    let dir = DataDir(temp_dir("streams-aof"));
    let mut srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    fill(&mut c);
    let keys = ["log", "empty", "gone"];
    let before: Vec<String> = keys.iter().map(|k| full(&mut c, k)).collect();
    assert!(before[0].contains("carol") && before[0].contains("alice"));
    drop(c);
    srv.terminate();

    let text = String::from_utf8_lossy(&common::aof_bytes(&dir.0)).into_owned();
    // Generated ids and deliveries are journalled as their effects.
    assert!(!text.contains("\r\n*\r\n"));
    assert!(!text.to_ascii_uppercase().contains("XREADGROUP"));
    assert!(!text.to_ascii_uppercase().contains("XAUTOCLAIM"));

    let srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    let after: Vec<String> = keys.iter().map(|k| full(&mut c, k)).collect();
    assert_eq!(after, before);
    let _: String = q(&mut c, &["BGREWRITEAOF"]);
    wait_rewrite(&mut c);
    drop(c);
    drop(srv);
    let text = String::from_utf8_lossy(&common::aof_bytes(&dir.0)).into_owned();
    assert!(!text.contains("\r\nXDEL\r\n") && !text.contains("\r\nXTRIM\r\n"));
    let srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    let rewritten: Vec<String> = keys.iter().map(|k| full(&mut c, k)).collect();
    assert_eq!(rewritten, before);
}

/// One event of the scenario: its id, the post, +1 or -1.
fn event_fields(v: &Value) -> Vec<(String, HashMap<String, String>)> {
    let mut out = Vec::new();
    let Value::Array(entries) = v else {
        return out;
    };
    for e in entries {
        let Value::Array(pair) = e else { continue };
        let (Some(Value::BulkString(id)), Some(Value::Array(fv))) = (pair.first(), pair.get(1))
        else {
            continue;
        };
        let mut m = HashMap::new();
        for kv in fv.chunks(2) {
            if let [Value::BulkString(k), Value::BulkString(v)] = kv {
                m.insert(
                    String::from_utf8_lossy(k).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                );
            }
        }
        out.push((String::from_utf8_lossy(id).into_owned(), m));
    }
    out
}

/// The entries of an XREADGROUP reply for one stream.
fn group_batch(v: &Value) -> Vec<(String, HashMap<String, String>)> {
    match v {
        Value::Array(streams) => streams
            .iter()
            .flat_map(|s| match s {
                Value::Array(kv) if kv.len() == 2 => event_fields(&kv[1]),
                _ => Vec::new(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Applies an event to the board once: the event id is recorded in a set
/// in the same transaction as the ZINCRBY and the XACK.
fn apply(c: &mut Connection, id: &str, ev: &HashMap<String, String>) {
    let post = &ev["post"];
    let delta = &ev["delta"];
    let _: Value = redis::pipe()
        .atomic()
        .cmd("ZINCRBY")
        .arg("rank:likes")
        .arg(delta)
        .arg(post)
        .cmd("XACK")
        .arg("events")
        .arg("appliers")
        .arg(id)
        .query(c)
        .expect("apply");
}

#[test]
fn scenario_three_board_from_a_consumer_group_with_a_crash() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: String = q(
        &mut c,
        &["XGROUP", "CREATE", "events", "appliers", "0", "MKSTREAM"],
    );
    // Producers: 600 like/unlike events over 20 posts, each with an event id.
    let mut want: BTreeMap<String, i64> = BTreeMap::new();
    for i in 0..600u64 {
        let post = format!("p{}", (i * 7) % 20);
        let delta: i64 = if i % 5 == 4 { -1 } else { 1 };
        *want.entry(post.clone()).or_default() += delta;
        let _: String = q(
            &mut c,
            &[
                "XADD",
                "events",
                "*",
                "event",
                &format!("e{i}"),
                "post",
                &post,
                "delta",
                &delta.to_string(),
            ],
        );
    }
    let mut a = srv.conn();
    let mut b = srv.conn();
    // A takes a batch and dies before applying or acking it.
    let lost: Value = q(
        &mut a,
        &[
            "XREADGROUP",
            "GROUP",
            "appliers",
            "a",
            "COUNT",
            "50",
            "STREAMS",
            "events",
            ">",
        ],
    );
    assert_eq!(group_batch(&lost).len(), 50);
    drop(a);
    // B works through the rest.
    loop {
        let v: Value = q(
            &mut b,
            &[
                "XREADGROUP",
                "GROUP",
                "appliers",
                "b",
                "COUNT",
                "100",
                "STREAMS",
                "events",
                ">",
            ],
        );
        let batch = group_batch(&v);
        if batch.is_empty() {
            break;
        }
        for (id, ev) in &batch {
            apply(&mut b, id, ev);
        }
    }
    // B takes over A's pending entries.
    let mut cursor = "0-0".to_string();
    let mut claimed = 0;
    loop {
        let v: Value = q(
            &mut b,
            &[
                "XAUTOCLAIM",
                "events",
                "appliers",
                "b",
                "0",
                &cursor,
                "COUNT",
                "20",
            ],
        );
        let Value::Array(parts) = v else {
            panic!("{v:?}")
        };
        let batch = event_fields(&parts[1]);
        claimed += batch.len();
        for (id, ev) in &batch {
            apply(&mut b, id, ev);
        }
        cursor = match &parts[0] {
            Value::BulkString(x) => String::from_utf8_lossy(x).into_owned(),
            other => panic!("{other:?}"),
        };
        if cursor == "0-0" {
            break;
        }
    }
    assert_eq!(claimed, 50);
    let pending: Value = q(&mut c, &["XPENDING", "events", "appliers"]);
    assert!(
        matches!(&pending, Value::Array(p) if p[0] == Value::Int(0)),
        "{pending:?}"
    );
    let board: Vec<(String, i64)> = q(&mut c, &["ZRANGE", "rank:likes", "0", "-1", "WITHSCORES"]);
    let got: BTreeMap<String, i64> = board.into_iter().collect();
    assert_eq!(got, want);
    // Rebuild from the stream alone.
    let all: Value = q(&mut c, &["XRANGE", "events", "-", "+"]);
    let mut rebuilt: BTreeMap<String, i64> = BTreeMap::new();
    for (_, ev) in event_fields(&all) {
        *rebuilt.entry(ev["post"].clone()).or_default() +=
            ev["delta"].parse::<i64>().expect("delta");
    }
    assert_eq!(rebuilt, want);
}

/// Waits until `replica`'s link is up and its offset is the primary's.
fn wait_synced(primary: &mut Connection, replica: &mut Connection) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let p = common::info(primary, "replication");
        let r = common::info(replica, "replication");
        let up = r.get("master_link_status").map(String::as_str) == Some("up");
        if up && p.get("master_repl_offset") == r.get("slave_repl_offset") {
            return;
        }
        assert!(Instant::now() < deadline, "not in sync: {p:?} {r:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A Rostrum replica of `primary_port` started in `dir` (from the RDB
/// there, if any, keeping its primary's id and offset).
fn replica_in(dir: PathBuf, primary_port: u16) -> TestServer {
    let conf = dir.join("replica.conf");
    std::fs::write(
        &conf,
        format!("replicaof 127.0.0.1 {primary_port}\nsave \"\"\n"),
    )
    .expect("write replica.conf");
    let conf = conf.to_str().expect("utf-8 path").to_string();
    TestServer::start_in(dir, &[&conf])
}

/// Group reads, claims and acks reach a replica as the commands that
/// reproduce them (the XCLAIMs and XGROUP SETIDs built only while
/// something records them): with the replica connected, and through the
/// backlog while it is down (a partial resync), with no AOF on the primary.
#[test]
fn stream_groups_reach_a_replica_live_and_through_the_backlog() {
    let p = TestServer::start(&["--save", ""]);
    let mut pc = p.conn();
    let mut r = replica_in(temp_dir("streams-replica"), p.port);
    let mut rc = r.conn();
    wait_synced(&mut pc, &mut rc);
    fill(&mut pc);
    wait_synced(&mut pc, &mut rc);
    let keys = ["log", "empty", "gone"];
    for k in keys {
        assert_eq!(full(&mut rc, k), full(&mut pc, k), "{k} on the replica");
    }
    // The replica goes down; the primary's writes wait in its backlog.
    let _: String = q(&mut rc, &["SAVE"]);
    drop(rc);
    r.terminate();
    let _: String = q(&mut pc, &["XADD", "log", "*", "late", "1"]);
    let _: Value = q(
        &mut pc,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "dave",
            "COUNT",
            "4",
            "STREAMS",
            "log",
            ">",
        ],
    );
    let _: Value = q(
        &mut pc,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "bob",
            "COUNT",
            "2",
            "STREAMS",
            "log",
            "0",
        ],
    );
    let _: Value = q(
        &mut pc,
        &["XREADGROUP", "GROUP", "g2", "erin", "STREAMS", "log", ">"],
    );
    let before = common::info(&mut pc, "stats");
    let dir = temp_dir("streams-replica");
    std::fs::copy(r.dir.join("dump.rdb"), dir.join("dump.rdb")).expect("copy dump.rdb");
    drop(r);
    let r = replica_in(dir, p.port);
    let mut rc = r.conn();
    wait_synced(&mut pc, &mut rc);
    let after = common::info(&mut pc, "stats");
    assert_eq!(after["sync_full"], before["sync_full"], "{after:?}");
    for k in keys {
        assert_eq!(full(&mut rc, k), full(&mut pc, k), "{k} after the resync");
    }
}
