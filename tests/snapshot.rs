//! The point-in-time snapshot under writes, through a real client: a big
//! sorted set (walked in steps, with copy-before-write per member) changed
//! by a writer all through BGSAVE and BGREWRITEAOF. The RDB file must hold
//! the set exactly as it was after some prefix of the writer's steps (each
//! step is one atomic script that moves a member, removes one and adds a
//! marker, so the markers present tell which prefix); the rewritten AOF,
//! replayed, must give the set after every step. The same for a big
//! leaderboard (entries walked in steps, copy-before-write per entry), big
//! hashes, sets, lists and streams, and a million small keys (each shard's
//! key table walked in steps, copy-before-write per key).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{temp_dir, TestServer};

const MEMBERS: u64 = 120_000;

const STEP: &str = "redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2]) \
                    redis.call('ZREM', KEYS[1], ARGV[3]) \
                    redis.call('ZADD', KEYS[1], ARGV[4], ARGV[5])";

/// The arguments of step `i`: a member moved to a score with many ties
/// (so it crosses the walk's cursor either way), a member removed, and the
/// marker `w<i>`.
fn step_args(i: u64) -> (f64, String, String, f64, String) {
    let moved = format!("m{}", (i * 7919) % MEMBERS);
    let removed = format!("m{}", (i * 104_729 + 13) % MEMBERS);
    (
        (i % 11) as f64 - 5.0,
        moved,
        removed,
        i as f64,
        format!("w{i}"),
    )
}

fn initial() -> BTreeMap<String, f64> {
    (0..MEMBERS)
        .map(|i| (format!("m{i}"), (i % 7) as f64))
        .collect()
}

fn apply(model: &mut BTreeMap<String, f64>, i: u64) {
    let (s, moved, removed, ws, w) = step_args(i);
    model.insert(moved, s);
    model.remove(&removed);
    model.insert(w, ws);
}

fn start(dir: &Path, aof: bool) -> TestServer {
    let d = dir.to_str().expect("utf-8 temp dir");
    let mut args = vec!["--dir", d, "--save", ""];
    if aof {
        args.extend(["--appendonly", "yes", "--appendfsync", "everysec"]);
    }
    TestServer::start_in(dir.to_path_buf(), &args)
}

fn fill(c: &mut redis::Connection) {
    let mut pipe = redis::pipe();
    for chunk in (0..MEMBERS).collect::<Vec<_>>().chunks(1000) {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg("board");
        for i in chunk {
            cmd.arg((i % 7) as f64).arg(format!("m{i}"));
        }
        pipe.add_command(cmd).ignore();
    }
    let _: () = pipe.query(c).expect("fill");
}

fn read_set(c: &mut redis::Connection) -> BTreeMap<String, f64> {
    let v: Vec<(String, f64)> = redis::cmd("ZRANGE")
        .arg("board")
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(c)
        .expect("zrange");
    v.into_iter().collect()
}

/// Waits until `flag` in INFO persistence reads 0.
fn wait_done(c: &mut redis::Connection, flag: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while common::info(c, "persistence")[flag] != "0" {
        assert!(Instant::now() < deadline, "{flag} never ended");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `step(connection, i)` for i = 0, 1, ... from another connection,
/// lets it run 50 steps, runs `command` while it writes, and stops it 50
/// steps after the snapshot (`flag` in INFO persistence) ends; returns
/// how many steps ran.
fn snapshot_under_writes(
    node: &TestServer,
    command: &str,
    flag: &str,
    step: impl Fn(&mut redis::Connection, u64) + Send + 'static,
) -> u64 {
    let mut c = node.conn();
    let (stop, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let mut wc = node.conn();
    let (st, dn) = (stop.clone(), done.clone());
    let w = std::thread::spawn(move || {
        let mut i = 0;
        while !st.load(Ordering::Acquire) {
            step(&mut wc, i);
            i += 1;
            dn.store(i, Ordering::Release);
        }
        i
    });
    while done.load(Ordering::Acquire) < 50 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let _: redis::Value = redis::cmd(command).query(&mut c).expect("snapshot");
    let info = common::info(&mut c, "persistence");
    assert!(info.contains_key("current_cow_size"));
    wait_done(&mut c, flag);
    let after = done.load(Ordering::Acquire);
    while done.load(Ordering::Acquire) < after + 50 {
        std::thread::sleep(Duration::from_millis(1));
    }
    stop.store(true, Ordering::Release);
    w.join().expect("writer")
}

/// After a BGSAVE: checks it went well, kills `node` and starts a server
/// on a copy of the dump.rdb it wrote in `dir` (the copy's folder is
/// returned for removal).
fn load_dump(mut node: TestServer, dir: &Path) -> (TestServer, PathBuf) {
    let info = common::info(&mut node.conn(), "persistence");
    assert_eq!(info["rdb_last_bgsave_status"], "ok");
    assert!(info["rdb_last_cow_size"].parse::<u64>().is_ok());
    node.kill();
    let to = temp_dir("snap-load");
    std::fs::copy(dir.join("dump.rdb"), to.join("dump.rdb")).expect("dump.rdb written");
    (start(&to, false), to)
}

/// After a BGREWRITEAOF: checks it went well, stops `node` once the
/// appended writes reached the file, and starts a server on its AOF.
fn restart_on_aof(mut node: TestServer, dir: &Path) -> TestServer {
    let info = common::info(&mut node.conn(), "persistence");
    assert_eq!(info["aof_last_bgrewrite_status"], "ok");
    // The appended writes reach the file within the writer's next turn.
    std::thread::sleep(Duration::from_millis(300));
    node.terminate();
    start(dir, true)
}

/// Step `i` of the sorted set's writer.
fn zset_step(c: &mut redis::Connection, i: u64) {
    let (s, moved, removed, ws, w) = step_args(i);
    let _: () = redis::cmd("EVAL")
        .arg(STEP)
        .arg(1)
        .arg("board")
        .arg(s)
        .arg(moved)
        .arg(removed)
        .arg(ws)
        .arg(w)
        .query(c)
        .expect("step");
}

#[test]
fn bgsave_under_writes_is_one_point_in_time() {
    let dir = temp_dir("snap-rdb");
    let node = start(&dir, false);
    fill(&mut node.conn());
    let steps = snapshot_under_writes(&node, "BGSAVE", "rdb_bgsave_in_progress", zset_step);
    let (loaded_node, to) = load_dump(node, &dir);
    let loaded = read_set(&mut loaded_node.conn());
    let prefix = loaded.keys().filter(|k| k.starts_with('w')).count() as u64;
    assert!(prefix <= steps, "{prefix} markers of {steps} steps");
    assert!(prefix < steps, "the save ended before the writer did");
    let mut model = initial();
    for i in 0..prefix {
        apply(&mut model, i);
    }
    assert_eq!(loaded.len(), model.len());
    assert!(
        loaded == model,
        "the file is not the set after {prefix} steps"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&to);
}

#[test]
fn rewrite_under_writes_replays_to_the_final_set() {
    let dir = temp_dir("snap-aof");
    let node = start(&dir, true);
    let mut c = node.conn();
    fill(&mut c);
    let steps = snapshot_under_writes(&node, "BGREWRITEAOF", "aof_rewrite_in_progress", zset_step);
    let before = read_set(&mut c);
    let mut model = initial();
    for i in 0..steps {
        apply(&mut model, i);
    }
    assert!(before == model, "the live set is not the model");
    let again = restart_on_aof(node, &dir);
    let after = read_set(&mut again.conn());
    assert_eq!(after.len(), model.len());
    assert!(
        after == model,
        "the rewritten AOF does not replay to the set"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ----- a big leaderboard (walked in steps, copy-before-write per entry) ----

const BOARD_STEP: &str = "redis.call('LB.SUBMIT', KEYS[1], ARGV[2], ARGV[1], 'SUBSCORE', ARGV[6]) \
                          redis.call('LB.REM', KEYS[1], ARGV[3]) \
                          redis.call('LB.SUBMIT', KEYS[1], ARGV[5], ARGV[4], 'META', ARGV[5])";

/// (score, subscore) by member.
type Board = BTreeMap<String, (i64, i64)>;

fn board_initial() -> Board {
    (0..MEMBERS)
        .map(|i| (format!("m{i}"), ((i % 7) as i64, (i % 3) as i64)))
        .collect()
}

fn board_apply(model: &mut Board, i: u64) {
    let (s, moved, removed, ws, w) = step_args(i);
    model.insert(moved, (s as i64, (i % 2) as i64));
    model.remove(&removed);
    model.insert(w, (ws as i64, 0));
}

fn board_fill(c: &mut redis::Connection) {
    let _: redis::Value = redis::cmd("LB.CREATE")
        .arg("lb")
        .arg("POLICY")
        .arg("SET")
        .query(c)
        .expect("create");
    for chunk in (0..MEMBERS).collect::<Vec<_>>().chunks(5000) {
        let mut pipe = redis::pipe();
        for i in chunk {
            let mut cmd = redis::cmd("LB.SUBMIT");
            cmd.arg("lb")
                .arg(format!("m{i}"))
                .arg(i % 7)
                .arg("SUBSCORE")
                .arg(i % 3);
            if i.is_multiple_of(5) {
                cmd.arg("META").arg(format!("meta{i}"));
            }
            pipe.add_command(cmd).ignore();
        }
        let _: () = pipe.query(c).expect("fill");
    }
}

/// Every entry: (member, score, subscore, time, metadata), best first.
fn board_entries(c: &mut redis::Connection) -> Vec<(String, i64, i64, u64, Option<String>)> {
    let v: Vec<(u64, String, i64, i64, u64, Option<String>)> = redis::cmd("LB.TOP")
        .arg("lb")
        .arg(10 * MEMBERS)
        .arg("WITHSUBSCORE")
        .arg("WITHTIME")
        .arg("WITHMETA")
        .query(c)
        .expect("lb.top");
    v.into_iter()
        .map(|(_, m, s, ss, t, meta)| (m, s, ss, t, meta))
        .collect()
}

fn board_read(c: &mut redis::Connection) -> Board {
    board_entries(c)
        .into_iter()
        .map(|(m, s, ss, _, _)| (m, (s, ss)))
        .collect()
}

/// Step `i` of the board's writer.
fn board_step(c: &mut redis::Connection, i: u64) {
    let (s, moved, removed, ws, w) = step_args(i);
    let _: redis::Value = redis::cmd("EVAL")
        .arg(BOARD_STEP)
        .arg(1)
        .arg("lb")
        .arg(s as i64)
        .arg(moved)
        .arg(removed)
        .arg(ws as i64)
        .arg(w)
        .arg(i % 2)
        .query(c)
        .expect("step");
}

/// Writes keep going through BGSAVE of a big board (the walk takes the
/// shard lock one step at a time), and the file holds the board exactly
/// as it was after some prefix of the writer's steps.
#[test]
fn bgsave_of_a_board_under_writes_is_one_point_in_time() {
    let dir = temp_dir("snap-lb-rdb");
    let node = start(&dir, false);
    board_fill(&mut node.conn());
    let steps = snapshot_under_writes(&node, "BGSAVE", "rdb_bgsave_in_progress", board_step);
    let (loaded_node, to) = load_dump(node, &dir);
    let mut lc = loaded_node.conn();
    let loaded = board_read(&mut lc);
    let prefix = loaded.keys().filter(|k| k.starts_with('w')).count() as u64;
    assert!(prefix < steps, "{prefix} markers of {steps} steps");
    let mut model = board_initial();
    for i in 0..prefix {
        board_apply(&mut model, i);
    }
    assert_eq!(loaded.len(), model.len());
    assert!(
        loaded == model,
        "the file is not the board after {prefix} steps"
    );
    // Metadata went with the entries, the walked ones and the saved ones.
    for (m, _, _, _, meta) in board_entries(&mut lc) {
        if let Some(i) = m.strip_prefix('m').and_then(|i| i.parse::<u64>().ok()) {
            assert_eq!(meta, i.is_multiple_of(5).then(|| format!("meta{i}")), "{m}");
        } else {
            assert_eq!(meta.as_deref(), Some(m.as_str()));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&to);
}

/// The rewritten AOF of a big board written to all through the rewrite
/// replays to the board, entry for entry (times and metadata included).
#[test]
fn rewrite_of_a_board_under_writes_replays_to_the_final_board() {
    let dir = temp_dir("snap-lb-aof");
    let node = start(&dir, true);
    let mut c = node.conn();
    board_fill(&mut c);
    let steps = snapshot_under_writes(&node, "BGREWRITEAOF", "aof_rewrite_in_progress", board_step);
    let mut model = board_initial();
    for i in 0..steps {
        board_apply(&mut model, i);
    }
    assert!(
        board_read(&mut c) == model,
        "the live board is not the model"
    );
    let before = board_entries(&mut c);
    let again = restart_on_aof(node, &dir);
    let after = board_entries(&mut again.conn());
    assert_eq!(after.len(), before.len());
    assert!(
        after == before,
        "the rewritten AOF does not replay to the board"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ----- big hashes, sets, lists and streams (arena walks, shared nodes) ----

const N: u64 = 20_000;

/// One atomic step over the four keys: a hash field changed (to a value of
/// another length) and one removed, a set member removed, a list element
/// pushed at the front and one popped at the back, a stream entry deleted;
/// each key also gets the marker `w<i>`.
const MIXED_STEP: &str = "\
    redis.call('HSET', 'h', ARGV[2], ARGV[1]) \
    redis.call('HDEL', 'h', ARGV[3]) \
    redis.call('HSET', 'h', ARGV[1], '1') \
    redis.call('SREM', 's', ARGV[3]) \
    redis.call('SADD', 's', ARGV[1]) \
    redis.call('LPUSH', 'l', ARGV[1]) \
    redis.call('RPOP', 'l') \
    redis.call('XDEL', 'x', ARGV[4]) \
    redis.call('XADD', 'x', ARGV[5], 'f', ARGV[1])";

/// The four keys as a client reads them.
#[derive(Debug, PartialEq, Default)]
struct Mixed {
    h: BTreeMap<String, String>,
    s: std::collections::BTreeSet<String>,
    l: std::collections::VecDeque<String>,
    x: Vec<(String, String)>,
}

fn mixed_args(i: u64) -> [String; 5] {
    [
        format!("w{i}"),
        format!("f{}", (i * 7919) % N),
        format!("f{}", (i * 104_729 + 13) % N),
        format!("{}-0", (i * 31 + 5) % N + 1),
        format!("{}-0", N + 1 + i),
    ]
}

fn mixed_initial() -> Mixed {
    let mut m = Mixed::default();
    for i in 0..N {
        m.h.insert(format!("f{i}"), format!("v{}", i % 10));
        m.s.insert(format!("f{i}"));
        m.l.push_back(format!("f{i}"));
        m.x.push((format!("{}-0", i + 1), format!("f{i}")));
    }
    m
}

fn mixed_apply(m: &mut Mixed, i: u64) {
    let [w, moved, removed, del, add] = mixed_args(i);
    m.h.insert(moved, w.clone());
    m.h.remove(&removed);
    m.h.insert(w.clone(), "1".into());
    m.s.remove(&removed);
    m.s.insert(w.clone());
    m.l.push_front(w.clone());
    m.l.pop_back();
    m.x.retain(|(id, _)| *id != del);
    m.x.push((add, w));
}

fn mixed_fill(c: &mut redis::Connection) {
    let m = mixed_initial();
    let mut pipe = redis::pipe();
    let fields: Vec<(&String, &String)> = m.h.iter().collect();
    for chunk in fields.chunks(1000) {
        let mut cmd = redis::cmd("HSET");
        cmd.arg("h");
        for (f, v) in chunk {
            cmd.arg(f.as_str()).arg(v.as_str());
        }
        pipe.add_command(cmd).ignore();
    }
    let members: Vec<&String> = m.s.iter().collect();
    for chunk in members.chunks(1000) {
        pipe.add_command(redis::cmd("SADD").arg("s").arg(chunk).clone())
            .ignore();
    }
    let elems: Vec<&String> = m.l.iter().collect();
    for chunk in elems.chunks(1000) {
        pipe.add_command(redis::cmd("RPUSH").arg("l").arg(chunk).clone())
            .ignore();
    }
    for (id, f) in &m.x {
        pipe.add_command(redis::cmd("XADD").arg("x").arg(id).arg("f").arg(f).clone())
            .ignore();
    }
    let _: () = pipe.query(c).expect("fill");
}

fn mixed_read(c: &mut redis::Connection) -> Mixed {
    let h: BTreeMap<String, String> = redis::cmd("HGETALL").arg("h").query(c).expect("h");
    let s: std::collections::BTreeSet<String> =
        redis::cmd("SMEMBERS").arg("s").query(c).expect("s");
    let l: Vec<String> = redis::cmd("LRANGE")
        .arg("l")
        .arg(0)
        .arg(-1)
        .query(c)
        .expect("l");
    let l = l.into();
    let raw: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
        .arg("x")
        .arg("-")
        .arg("+")
        .query(c)
        .expect("x");
    let x = raw
        .into_iter()
        .map(|(id, f)| (id, f.get(1).cloned().unwrap_or_default()))
        .collect();
    Mixed { h, s, l, x }
}

/// Step `i` of the four keys' writer.
fn mixed_step(c: &mut redis::Connection, i: u64) {
    let a = mixed_args(i);
    let _: () = redis::cmd("EVAL")
        .arg(MIXED_STEP)
        .arg(0)
        .arg(&a[..])
        .query(c)
        .expect("step");
}

#[test]
fn bgsave_of_big_hash_set_list_stream_under_writes_is_one_point_in_time() {
    let dir = temp_dir("snap-mixed-rdb");
    let node = start(&dir, false);
    mixed_fill(&mut node.conn());
    let steps = snapshot_under_writes(&node, "BGSAVE", "rdb_bgsave_in_progress", mixed_step);
    let (loaded_node, to) = load_dump(node, &dir);
    let loaded = mixed_read(&mut loaded_node.conn());
    let prefix = loaded.s.iter().filter(|k| k.starts_with('w')).count() as u64;
    assert!(prefix < steps, "{prefix} markers of {steps} steps");
    let mut model = mixed_initial();
    for i in 0..prefix {
        mixed_apply(&mut model, i);
    }
    // Every key is the model after the same prefix: one point in time.
    assert!(
        loaded.h == model.h,
        "the hash is not the one after {prefix} steps"
    );
    assert!(
        loaded.s == model.s,
        "the set is not the one after {prefix} steps"
    );
    assert!(
        loaded.l == model.l,
        "the list is not the one after {prefix} steps"
    );
    assert!(
        loaded.x == model.x,
        "the stream is not the one after {prefix} steps"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&to);
}

#[test]
fn rewrite_of_big_hash_set_list_stream_under_writes_replays_to_the_final_value() {
    let dir = temp_dir("snap-mixed-aof");
    let node = start(&dir, true);
    let mut c = node.conn();
    mixed_fill(&mut c);
    let steps = snapshot_under_writes(&node, "BGREWRITEAOF", "aof_rewrite_in_progress", mixed_step);
    let mut model = mixed_initial();
    for i in 0..steps {
        mixed_apply(&mut model, i);
    }
    assert!(
        mixed_read(&mut c) == model,
        "the live keys are not the model"
    );
    let again = restart_on_aof(node, &dir);
    let after = mixed_read(&mut again.conn());
    assert!(after.h == model.h, "the hash does not replay");
    assert!(after.s == model.s, "the set does not replay");
    assert!(after.l == model.l, "the list does not replay");
    assert!(after.x == model.x, "the stream does not replay");
    let _ = std::fs::remove_dir_all(&dir);
}

// ----- many small keys (a shard's keys captured in steps) ----

/// Small string keys at the start; every tenth has an expiry.
const SMALL_KEYS: u64 = 1_000_000;

/// An expiry far ahead (unix ms), distinct per key.
fn far_expiry(i: u64) -> u64 {
    4_000_000_000_000 + i
}

/// One atomic step over small keys in many shards: an overwrite (which
/// drops the key's expiry), a DEL, a RENAME to a new key, a new key, an
/// expiry set in the past (the key goes at once, as an expiry does), an
/// expiry changed, and the marker `w` = i.
const SMALL_STEP: &str = "\
    redis.call('SET', ARGV[1], ARGV[2]) \
    redis.call('DEL', ARGV[3]) \
    if redis.call('EXISTS', ARGV[4]) == 1 then redis.call('RENAME', ARGV[4], ARGV[5]) end \
    redis.call('SET', ARGV[6], ARGV[2]) \
    redis.call('PEXPIREAT', ARGV[7], 1) \
    redis.call('PEXPIREAT', ARGV[8], ARGV[9]) \
    redis.call('SET', 'w', ARGV[10])";

fn small_args(i: u64) -> [String; 10] {
    let k = |m: u64| format!("k{}", (i.wrapping_mul(m) + m) % SMALL_KEYS);
    [
        k(7919),
        format!("x{i}"),
        k(104_729),
        k(15_485_863),
        format!("r{i}"),
        format!("n{i}"),
        k(32_452_843),
        k(49_979_687),
        far_expiry(SMALL_KEYS + i).to_string(),
        i.to_string(),
    ]
}

/// key → (value, expiry in unix ms).
type Small = BTreeMap<String, (String, Option<u64>)>;

fn small_initial() -> Small {
    (0..SMALL_KEYS)
        .map(|i| {
            let at = i.is_multiple_of(10).then(|| far_expiry(i));
            (format!("k{i}"), (format!("v{i}"), at))
        })
        .collect()
}

fn small_apply(m: &mut Small, i: u64) {
    let [set, x, del, from, to, new, gone, later, at, w] = small_args(i);
    m.insert(set, (x.clone(), None));
    m.remove(&del);
    if let Some(v) = m.remove(&from) {
        m.insert(to, v);
    }
    m.insert(new, (x, None));
    m.remove(&gone);
    if let Some(v) = m.get_mut(&later) {
        v.1 = at.parse().ok();
    }
    m.insert("w".into(), (w, None));
}

fn small_fill(c: &mut redis::Connection, m: &Small) {
    let keys: Vec<(&String, &(String, Option<u64>))> = m.iter().collect();
    for chunk in keys.chunks(50_000) {
        let mut pipe = redis::pipe();
        for part in chunk.chunks(1000) {
            let mut cmd = redis::cmd("MSET");
            for (k, (v, _)) in part {
                cmd.arg(k.as_str()).arg(v.as_str());
            }
            pipe.add_command(cmd).ignore();
        }
        for (k, (_, at)) in chunk {
            if let Some(at) = at {
                pipe.add_command(redis::cmd("PEXPIREAT").arg(k.as_str()).arg(*at).clone())
                    .ignore();
            }
        }
        let _: () = pipe.query(c).expect("fill");
    }
}

/// Every key of `m` as the server holds it, and the server's key count.
fn small_read(c: &mut redis::Connection, m: &Small) -> (Small, u64) {
    let keys: Vec<&String> = m.keys().collect();
    let mut out = Small::new();
    for chunk in keys.chunks(10_000) {
        let values: Vec<Option<String>> = redis::cmd("MGET").arg(chunk).query(c).expect("mget");
        let mut pipe = redis::pipe();
        for k in chunk {
            pipe.add_command(redis::cmd("PEXPIRETIME").arg(k.as_str()).clone());
        }
        let ats: Vec<i64> = pipe.query(c).expect("pexpiretime");
        for ((k, v), at) in chunk.iter().zip(values).zip(ats) {
            if let Some(v) = v {
                out.insert(k.to_string(), (v, u64::try_from(at).ok()));
            }
        }
    }
    let n: u64 = redis::cmd("DBSIZE").query(c).expect("dbsize");
    (out, n)
}

/// A million small keys, written to all through BGSAVE (overwrites,
/// deletes, renames, new keys, expiries): the file passes redis-check-rdb
/// and holds every key exactly as it was after the prefix of steps its
/// marker tells, so each shard's keys were captured at one point in time
/// though the walk took them a few hundred at a time.
#[test]
fn bgsave_of_a_million_small_keys_under_writes_is_one_point_in_time() {
    let dir = temp_dir("snap-small-rdb");
    let node = start(&dir, false);
    let initial = small_initial();
    small_fill(&mut node.conn(), &initial);
    let steps = snapshot_under_writes(&node, "BGSAVE", "rdb_bgsave_in_progress", |c, i| {
        let _: () = redis::cmd("EVAL")
            .arg(SMALL_STEP)
            .arg(0)
            .arg(&small_args(i)[..])
            .query(c)
            .expect("step");
    });
    let have_check = std::process::Command::new("redis-check-rdb")
        .arg(dir.join("dump.rdb"))
        .output();
    match have_check {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && text.contains("RDB looks OK"),
                "{text}"
            );
        }
        Err(_) => assert!(
            std::env::var_os("CI").is_none_or(|v| v.is_empty()),
            "redis-check-rdb not installed, and CI is set"
        ),
    }
    let (loaded_node, to) = load_dump(node, &dir);
    let mut c = loaded_node.conn();
    let marker: Option<u64> = redis::cmd("GET").arg("w").query(&mut c).expect("w");
    let prefix = marker.map_or(0, |w| w + 1);
    assert!(prefix < steps, "{prefix} steps of {steps} in the file");
    let mut model = initial;
    for i in 0..prefix {
        small_apply(&mut model, i);
    }
    let (loaded, dbsize) = small_read(&mut c, &model);
    assert_eq!(dbsize, model.len() as u64, "keys after {prefix} steps");
    let wrong: Vec<_> = model
        .iter()
        .filter(|(k, v)| loaded.get(*k) != Some(*v))
        .take(5)
        .collect();
    assert!(
        wrong.is_empty(),
        "after {prefix} steps, these differ: {wrong:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&to);
}

/// The slots a shard's key walk must skip (keys added or changed ahead of
/// it) are memory the snapshot holds: new keys written all through a
/// BGSAVE of small keys show in INFO persistence's `current_cow_size`
/// while it runs and in `rdb_last_cow_size` after (each part's set of
/// slots to skip, a usize and a control byte a slot; before they were
/// counted, these keys' saves held a few step buffers at most).
#[test]
fn bgsave_counts_the_slots_its_key_walk_skips_as_held() {
    let dir = temp_dir("snap-skip-held");
    let node = start(&dir, false);
    let mut c = node.conn();
    let initial: Small = (0..SMALL_KEYS)
        .map(|i| (format!("k{i}"), (format!("v{i}"), None)))
        .collect();
    small_fill(&mut c, &initial);
    let _: redis::Value = redis::cmd("BGSAVE").query(&mut c).expect("bgsave");
    let mut seen = 0u64;
    let mut fresh = 0u64;
    while common::info(&mut c, "persistence")["rdb_bgsave_in_progress"] == "1" {
        let mut pipe = redis::pipe();
        for _ in 0..20 {
            let mut cmd = redis::cmd("MSET");
            for _ in 0..1000 {
                cmd.arg(format!("new{fresh}")).arg("x");
                fresh += 1;
            }
            pipe.add_command(cmd).ignore();
        }
        let _: () = pipe.query(&mut c).expect("new keys");
        let info = common::info(&mut c, "persistence");
        if info["rdb_bgsave_in_progress"] == "1" {
            seen = seen.max(info["current_cow_size"].parse().expect("cow size"));
        }
    }
    let info = common::info(&mut c, "persistence");
    assert_eq!(info["rdb_last_bgsave_status"], "ok");
    let peak: u64 = info["rdb_last_cow_size"].parse().expect("last cow size");
    eprintln!("{fresh} new keys; current_cow_size up to {seen}, rdb_last_cow_size {peak}");
    assert!(fresh >= 20_000, "the save ended before a batch of new keys");
    // 20,000 new keys spread over 64 shards mark 20,000 slots: at least
    // 9 bytes each while their parts are not walked yet.
    assert!(seen >= 64 * 1024, "current_cow_size up to {seen}");
    assert!(peak >= seen, "rdb_last_cow_size {peak} under {seen}");
    drop(c);
    drop(node);
    let _ = std::fs::remove_dir_all(&dir);
}
