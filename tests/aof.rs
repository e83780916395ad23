//! The append-only file: crash safety under each fsync policy, rewrite under
//! load, truncated and corrupt files, check-aof, disk errors, turning the
//! AOF on at run time, and compatibility with Debian's redis-server and
//! redis-check-aof (skipped when they are not installed).
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{free_port, temp_dir, wait_ready};

/// A temporary directory removed at the end of the test.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        Dir(temp_dir(tag))
    }
    /// The incr file the server appends to (Redis 7.0's layout: the last
    /// one its manifest names).
    fn aof(&self) -> PathBuf {
        common::aof_files(&self.0)
            .pop()
            .unwrap_or_else(|| self.0.join("appendonlydir/none"))
    }
    /// The manifest.
    fn manifest(&self) -> PathBuf {
        self.0.join("appendonlydir/appendonly.aof.manifest")
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A rostrum process with the AOF on in `dir`; SIGKILLed on drop, the
/// directory kept (it outlives restarts).
struct Node {
    child: Child,
    port: u16,
}

fn spawn(dir: &Path, extra: &[&str], env: &[(&str, &Path)], stderr: Stdio) -> (Child, u16) {
    let port = free_port();
    let mut cmd = Command::new(common::server_binary());
    cmd.arg("--port")
        .arg(port.to_string())
        .arg("--loglevel")
        .arg("warning")
        .arg("--dir")
        .arg(dir)
        .arg("--appendonly")
        .arg("yes")
        .args(extra)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    for (k, v) in env {
        cmd.env(k, v);
    }
    (cmd.spawn().expect("spawn rostrum"), port)
}

impl Node {
    fn start(dir: &Path, extra: &[&str]) -> Node {
        Self::start_env(dir, extra, &[])
    }

    fn start_env(dir: &Path, extra: &[&str], env: &[(&str, &Path)]) -> Node {
        for _ in 0..5 {
            let (mut child, port) = spawn(dir, extra, env, Stdio::null());
            if wait_ready(port, &mut child) {
                return Node { child, port };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("rostrum did not start");
    }

    fn conn(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .expect("client")
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect")
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM: the server flushes and fsyncs the AOF, then exits.
    fn stop(&mut self) {
        common::terminate(&mut self.child);
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts rostrum expecting it to refuse; returns its stderr.
fn start_fails(dir: &Path, extra: &[&str]) -> String {
    let (mut child, _port) = spawn(dir, extra, &[], Stdio::piped());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            assert!(!status.success(), "rostrum should have refused to start");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("rostrum started on a bad AOF");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let _ = child.wait();
    err
}

fn get(c: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).expect("GET")
}

fn set(c: &mut redis::Connection, key: &str, v: &str) {
    let _: () = redis::cmd("SET").arg(key).arg(v).query(c).expect("SET");
}

fn resp(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

// ---------------------------------------------------------------------------
// Crash tests: a pipelining writer, SIGKILL at a random moment.

const KEYS: usize = 24;

#[derive(Clone, Copy)]
enum Op {
    Set(usize, u64),
    Del(usize),
}

fn op_bytes(op: Op) -> Vec<u8> {
    match op {
        Op::Set(k, v) => resp(&[
            b"SET",
            format!("key:{k}").as_bytes(),
            format!("{v}").as_bytes(),
        ]),
        Op::Del(k) => resp(&[b"DEL", format!("key:{k}").as_bytes()]),
    }
}

fn apply(m: &mut [Option<u64>], op: Op) {
    match op {
        Op::Set(k, v) => m[k] = Some(v),
        Op::Del(k) => m[k] = None,
    }
}

struct CrashRun {
    ops: Vec<Op>,
    /// Ops written to the socket.
    sent: usize,
    /// (when, ops acknowledged by then).
    acks: Vec<(Instant, usize)>,
    killed_at: Instant,
}

/// Pipelines random SET/DEL in batches until the server dies (killed by a
/// timer thread after a random delay).
fn crash_run(node: &Node) -> CrashRun {
    let pid = node.child.id();
    let delay = Duration::from_millis(rand::random_range(300..1500));
    let killed_at = Arc::new(Mutex::new(None));
    let k = killed_at.clone();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(delay);
        *k.lock().unwrap() = Some(Instant::now());
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
    });
    let mut s = TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let mut ops = Vec::new();
    let mut acked = 0;
    let mut acks = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let started = Instant::now();
    'run: while started.elapsed() < Duration::from_secs(10) {
        let mut batch = Vec::new();
        for _ in 0..64 {
            let key = rand::random_range(0..KEYS);
            let op = if rand::random_range(0..8) == 0 {
                Op::Del(key)
            } else {
                Op::Set(key, ops.len() as u64)
            };
            batch.extend_from_slice(&op_bytes(op));
            ops.push(op);
        }
        if s.write_all(&batch).is_err() {
            break;
        }
        // One line per reply (+OK, :0, :1).
        let mut lines = 0;
        while lines < 64 {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break 'run,
                Ok(n) => {
                    let got = buf[..n].iter().filter(|&&b| b == b'\n').count();
                    lines += got;
                    acked += got;
                    acks.push((Instant::now(), acked));
                }
            }
        }
    }
    killer.join().expect("killer");
    let killed_at = killed_at.lock().unwrap().unwrap_or_else(Instant::now);
    CrashRun {
        sent: ops.len(),
        ops,
        acks,
        killed_at,
    }
}

fn read_state(node: &Node) -> Vec<Option<u64>> {
    let mut c = node.conn();
    (0..KEYS)
        .map(|k| get(&mut c, &format!("key:{k}")).map(|v| v.parse().expect("number")))
        .collect()
}

/// The first prefix length >= `from` of the ops whose replay gives `state`.
fn matching_prefix(run: &CrashRun, state: &[Option<u64>], from: usize) -> Option<usize> {
    let mut m = vec![None; KEYS];
    for n in 0..=run.sent {
        if n >= from && m == state {
            return Some(n);
        }
        if let Some(op) = run.ops.get(n) {
            apply(&mut m, *op);
        }
    }
    None
}

#[test]
fn crash_with_fsync_always_keeps_every_acknowledged_write() {
    let dir = Dir::new("aof-always");
    let mut node = Node::start(&dir.0, &["--appendfsync", "always"]);
    let run = crash_run(&node);
    node.kill();
    let acked = run.acks.last().map(|a| a.1).unwrap_or(0);
    assert!(acked > 0, "nothing was acknowledged before the kill");
    let node = Node::start(&dir.0, &["--appendfsync", "always"]);
    let state = read_state(&node);
    let n = matching_prefix(&run, &state, acked);
    assert!(
        n.is_some(),
        "state after restart is not a replay of >= {acked} acknowledged ops (sent {})",
        run.sent
    );
}

#[test]
fn crash_with_fsync_everysec_loses_at_most_about_two_seconds() {
    let dir = Dir::new("aof-everysec");
    let mut node = Node::start(&dir.0, &["--appendfsync", "everysec"]);
    let run = crash_run(&node);
    node.kill();
    // Everything acknowledged 2 s before the kill must be there.
    let floor = run
        .acks
        .iter()
        .filter(|(t, _)| *t + Duration::from_secs(2) <= run.killed_at)
        .map(|a| a.1)
        .max()
        .unwrap_or(0);
    let node = Node::start(&dir.0, &["--appendfsync", "everysec"]);
    let state = read_state(&node);
    let n = matching_prefix(&run, &state, 0);
    let n = n.unwrap_or_else(|| panic!("state after restart is no replay of a prefix"));
    assert!(n >= floor, "lost more than 2 s of writes: {n} < {floor}");
}

/// Counters a kill test increments: INCR on `n:K`, ZINCRBY 1 on member
/// `m:K` of `z`.
const COUNTERS: usize = 8;

fn counter_op(i: usize) -> Vec<u8> {
    let k = i % COUNTERS;
    if i.is_multiple_of(2) {
        resp(&[b"INCR", format!("n:{k}").as_bytes()])
    } else {
        resp(&[b"ZINCRBY", b"z", b"1", format!("m:{k}").as_bytes()])
    }
}

/// The counters as the server has them: INCR ones, then ZINCRBY ones.
fn read_counters(c: &mut redis::Connection) -> Vec<u64> {
    let mut v = Vec::new();
    for k in 0..COUNTERS {
        let n: Option<u64> = redis::cmd("GET").arg(format!("n:{k}")).query(c).unwrap();
        v.push(n.unwrap_or(0));
    }
    for k in 0..COUNTERS {
        let s: Option<f64> = redis::cmd("ZSCORE")
            .arg("z")
            .arg(format!("m:{k}"))
            .query(c)
            .unwrap();
        v.push(s.unwrap_or(0.0) as u64);
    }
    v
}

/// Which counter (index into `read_counters`) op `i` bumps.
fn counter_of(i: usize) -> usize {
    let k = i % COUNTERS;
    if i.is_multiple_of(2) {
        k
    } else {
        COUNTERS + k
    }
}

/// Under `appendfsync everysec` each command's record is written to the
/// file (write(2), not fsync) before its reply goes out, as Redis does: a
/// SIGKILL of the process (not of the machine) at a random moment loses no
/// acknowledged INCR or ZINCRBY, over 10 kills and restarts.
#[test]
fn kill_under_everysec_loses_no_acknowledged_write() {
    let dir = Dir::new("aof-everysec-kill");
    let mut base = vec![0u64; 2 * COUNTERS];
    for round in 0..10 {
        let mut node = Node::start(&dir.0, &["--appendfsync", "everysec"]);
        let pid = node.child.id();
        let delay = Duration::from_millis(rand::random_range(50..400));
        let killer = std::thread::spawn(move || {
            std::thread::sleep(delay);
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        });
        let mut s = TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5))).ok();
        // Replies are counted in lines: INCR's take one, ZINCRBY's two.
        let (mut sent, mut lines) = (0usize, 0usize);
        let mut buf = vec![0u8; 64 * 1024];
        let started = Instant::now();
        'run: while started.elapsed() < Duration::from_secs(5) {
            let mut batch = Vec::new();
            for i in sent..sent + 32 {
                batch.extend_from_slice(&counter_op(i));
            }
            if s.write_all(&batch).is_err() {
                break;
            }
            sent += 32;
            while lines < sent / 32 * 48 {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break 'run,
                    Ok(n) => lines += buf[..n].iter().filter(|&&b| b == b'\n').count(),
                }
            }
        }
        killer.join().expect("killer");
        node.kill();
        let acked_ops = acked_ops(lines);
        assert!(acked_ops > 0, "round {round}: nothing acknowledged");
        let node = Node::start(&dir.0, &["--appendfsync", "everysec"]);
        let mut c = node.conn();
        let now = read_counters(&mut c);
        let mut low = base.clone();
        let mut high = base.clone();
        for i in 0..sent {
            if i < acked_ops {
                low[counter_of(i)] += 1;
            }
            high[counter_of(i)] += 1;
        }
        for k in 0..now.len() {
            assert!(
                now[k] >= low[k] && now[k] <= high[k],
                "round {round}: counter {k} is {} after the kill, acknowledged {} (sent {}): {} acknowledged writes lost",
                now[k],
                low[k] - base[k],
                high[k] - base[k],
                low[k].saturating_sub(now[k])
            );
        }
        base = now;
    }
}

/// Acknowledged ops from reply lines: ops alternate INCR (one line) and
/// ZINCRBY (two lines), starting with INCR in every batch of 32.
fn acked_ops(lines: usize) -> usize {
    let (batches, rest) = (lines / 48, lines % 48);
    let mut ops = batches * 32;
    let mut l = 0;
    while l < rest {
        l += if ops.is_multiple_of(2) { 1 } else { 2 };
        if l <= rest {
            ops += 1;
        }
    }
    ops
}

// ---------------------------------------------------------------------------
// Rewrite under load.

fn writer_loop(port: u16, id: usize, stop: Arc<AtomicBool>, min_ops: usize) -> Vec<Option<u64>> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut last = vec![None; 40];
    let mut buf = vec![0u8; 16 * 1024];
    let mut i = 0u64;
    while (i as usize) < min_ops || !stop.load(Ordering::Relaxed) {
        let mut batch = Vec::new();
        for _ in 0..32 {
            let k = rand::random_range(0..40);
            let key = format!("w{id}:{k}");
            let val = format!("{i}-{}", "x".repeat(24));
            if i % 11 == 10 {
                batch.extend_from_slice(&resp(&[b"DEL", key.as_bytes()]));
                last[k] = None;
            } else {
                batch.extend_from_slice(&resp(&[b"SET", key.as_bytes(), val.as_bytes()]));
                last[k] = Some(i);
            }
            i += 1;
        }
        s.write_all(&batch).expect("write");
        let mut lines = 0;
        while lines < 32 {
            let n = s.read(&mut buf).expect("read");
            assert!(n > 0, "server closed");
            lines += buf[..n].iter().filter(|&&b| b == b'\n').count();
        }
    }
    last
}

#[test]
fn rewrite_under_load_keeps_the_data_and_shrinks_the_file() {
    let dir = Dir::new("aof-rewrite");
    let mut node = Node::start(&dir.0, &["--appendfsync", "always"]);
    let port = node.port;
    // Build a long history of overwrites.
    let stop = Arc::new(AtomicBool::new(true));
    let hs: Vec<_> = (0..3)
        .map(|id| {
            let stop = stop.clone();
            std::thread::spawn(move || writer_loop(port, id, stop, 4000))
        })
        .collect();
    for h in hs {
        h.join().expect("writer");
    }
    let before = common::aof_size(&dir.0);

    // Rewrite twice while writers keep going.
    let stop = Arc::new(AtomicBool::new(false));
    let hs: Vec<_> = (0..3)
        .map(|id| {
            let stop = stop.clone();
            std::thread::spawn(move || writer_loop(port, id, stop, 0))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut c = node.conn();
    let r: String = redis::cmd("BGREWRITEAOF")
        .query(&mut c)
        .expect("bgrewriteaof");
    assert_eq!(r, "Background append only file rewriting started");
    // SAVE waits for the running rewrite, then writes its RDB file.
    let _: () = redis::cmd("SAVE").query(&mut c).expect("save");
    assert!(dir.0.join("dump.rdb").exists());
    stop.store(true, Ordering::Relaxed);
    let models: Vec<Vec<Option<u64>>> = hs.into_iter().map(|h| h.join().expect("writer")).collect();
    let after = common::aof_size(&dir.0);
    assert!(
        after < before,
        "rewritten file {after} not smaller than {before}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_rostrum"))
        .arg("check-aof")
        .arg(dir.manifest())
        .output()
        .expect("check-aof");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    node.kill();
    let node = Node::start(&dir.0, &[]);
    let mut c = node.conn();
    for (id, m) in models.iter().enumerate() {
        for (k, v) in m.iter().enumerate() {
            let got = get(&mut c, &format!("w{id}:{k}"));
            let want = v.map(|i| format!("{i}-{}", "x".repeat(24)));
            assert_eq!(got, want, "w{id}:{k}");
        }
    }
}

#[test]
fn automatic_rewrite_when_the_file_doubles() {
    let dir = Dir::new("aof-auto");
    let node = Node::start(&dir.0, &["--config", "auto-aof-rewrite-min-size=4kb"]);
    let mut c = node.conn();
    for i in 0..400 {
        set(&mut c, "counter", &format!("{i:08}"));
    }
    // The writer thread checks once a second; the history of 400 SETs
    // (about 15 KB) becomes one SET.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // The base (an RDB file of one key) and an empty incr.
        let size = common::aof_size(&dir.0);
        if size > 0 && size < 400 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no automatic rewrite ({size} bytes)"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(get(&mut c, "counter").as_deref(), Some("00000399"));
    let mut node = node;
    node.stop();
    let node = Node::start(&dir.0, &[]);
    assert_eq!(
        get(&mut node.conn(), "counter").as_deref(),
        Some("00000399")
    );
}

// ---------------------------------------------------------------------------
// Damaged files.

/// Writes a few keys through a server, kills it, returns the AOF bytes.
fn make_aof(dir: &Path) -> Vec<u8> {
    let mut node = Node::start(dir, &["--appendfsync", "always"]);
    let mut c = node.conn();
    set(&mut c, "a", "1");
    set(&mut c, "b", "2");
    let _: () = redis::cmd("SELECT").arg(3).query(&mut c).expect("select");
    set(&mut c, "c", "3");
    node.kill();
    std::fs::read(common::aof_files(dir).pop().expect("incr")).expect("aof")
}

#[test]
fn truncated_last_command_is_dropped_and_the_file_repaired() {
    let dir = Dir::new("aof-trunc");
    let good = make_aof(&dir.0);
    let mut bad = good.clone();
    bad.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$1\r\nd\r\n$4\r\n12");
    std::fs::write(dir.aof(), &bad).expect("write");

    let err = start_fails(&dir.0, &["--config", "aof-load-truncated=no"]);
    assert!(err.contains("Unexpected end of file"), "{err}");

    let node = Node::start(&dir.0, &[]);
    let mut c = node.conn();
    assert_eq!(get(&mut c, "a").as_deref(), Some("1"));
    assert_eq!(get(&mut c, "d"), None);
    assert_eq!(std::fs::read(dir.aof()).expect("aof"), good);
    // The repaired file takes new writes.
    set(&mut c, "e", "5");
    let mut node = node;
    node.stop();
    let node = Node::start(&dir.0, &[]);
    let mut c = node.conn();
    assert_eq!(get(&mut c, "e").as_deref(), Some("5"));
}

#[test]
fn unfinished_transaction_at_the_end_is_reverted() {
    let dir = Dir::new("aof-multi");
    let good = make_aof(&dir.0);
    let mut bad = good.clone();
    bad.extend_from_slice(b"*1\r\n$5\r\nMULTI\r\n");
    bad.extend_from_slice(&resp(&[b"SET", b"z", b"9"]));
    std::fs::write(dir.aof(), &bad).expect("write");
    let node = Node::start(&dir.0, &[]);
    let mut c = node.conn();
    assert_eq!(get(&mut c, "z"), None);
    assert_eq!(get(&mut c, "b").as_deref(), Some("2"));
    assert_eq!(std::fs::read(dir.aof()).expect("aof"), good);
}

#[test]
fn corruption_in_the_middle_refuses_to_start_and_check_aof_fixes_it() {
    let dir = Dir::new("aof-corrupt");
    let good = make_aof(&dir.0);
    let mut bad = good.clone();
    bad.extend_from_slice(b"*3\r\n$3\r\nSET\r\nxx\r\n$1\r\nb\r\n");
    bad.extend_from_slice(&resp(&[b"SET", b"f", b"6"]));
    std::fs::write(dir.aof(), &bad).expect("write");

    let err = start_fails(&dir.0, &[]);
    assert!(
        err.contains(&format!("byte offset {}", good.len())),
        "{err}"
    );

    let bin = env!("CARGO_BIN_EXE_rostrum");
    let out = Command::new(bin)
        .arg("check-aof")
        .arg(dir.aof())
        .output()
        .expect("check-aof");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains(&format!("ok_up_to={}", good.len())), "{text}");
    assert!(text.contains("Expected prefix '$', got: 'x'"), "{text}");
    assert!(
        text.contains("is not valid. Use the --fix option"),
        "{text}"
    );

    let mut fix = Command::new(bin)
        .arg("check-aof")
        .arg("--fix")
        .arg(dir.aof())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("check-aof --fix");
    fix.stdin
        .take()
        .expect("stdin")
        .write_all(b"y\n")
        .expect("answer");
    let out = fix.wait_with_output().expect("check-aof --fix");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("Successfully truncated AOF"), "{text}");
    assert_eq!(std::fs::read(dir.aof()).expect("aof"), good);

    let node = Node::start(&dir.0, &[]);
    let mut c = node.conn();
    assert_eq!(get(&mut c, "a").as_deref(), Some("1"));
}

// ---------------------------------------------------------------------------
// Disk errors (test fault switch: the writes fail while the file exists).

#[test]
fn disk_errors_refuse_writes_keep_reads_and_recover() {
    let dir = Dir::new("aof-fault");
    let fault = dir.0.join("fault");
    let mut node = Node::start_env(
        &dir.0,
        &["--appendfsync", "everysec"],
        &[("ROSTRUM_AOF_FAULT_FILE", &fault)],
    );
    let mut c = node.conn();
    set(&mut c, "a", "1");
    std::fs::write(&fault, b"").expect("fault on");
    // A write racing with the failure is applied (and kept in memory) or
    // refused; once the writer has failed, writes are refused.
    let b: redis::RedisResult<()> = redis::cmd("SET").arg("b").arg("2").query(&mut c);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut accepted = Vec::new();
    let (refused, err) = loop {
        let key = format!("c{}", accepted.len());
        let r: redis::RedisResult<()> = redis::cmd("SET").arg(&key).arg("3").query(&mut c);
        match r {
            Ok(()) => accepted.push(key),
            Err(e) => break (key, e),
        }
        assert!(Instant::now() < deadline, "writes never refused");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(err.code(), Some("MISCONF"), "{err:?}");
    assert!(
        err.to_string()
            .contains("Errors writing to the AOF file: No space left on device"),
        "{err}"
    );
    // Reads still work; a refused write inside MULTI aborts the EXEC.
    assert_eq!(get(&mut c, "a").as_deref(), Some("1"));
    let mut raw = TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
    raw.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let got = common::roundtrip(
        &mut raw,
        b"MULTI\r\nSET q 1\r\nEXEC\r\n",
        b"+OK\r\n-MISCONF Errors writing to the AOF file: No space left on device\r\n-EXECABORT Transaction discarded because of previous errors.\r\n".len(),
    );
    assert_eq!(
        String::from_utf8_lossy(&got),
        "+OK\r\n-MISCONF Errors writing to the AOF file: No space left on device\r\n-EXECABORT Transaction discarded because of previous errors.\r\n"
    );

    std::fs::remove_file(&fault).expect("fault off");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r: redis::RedisResult<()> = redis::cmd("SET").arg("d").arg("4").query(&mut c);
        if r.is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "writes never recovered");
        std::thread::sleep(Duration::from_millis(100));
    }
    node.stop();
    let node = Node::start(&dir.0, &[]);
    let mut c = node.conn();
    assert_eq!(get(&mut c, "a").as_deref(), Some("1"));
    assert_eq!(get(&mut c, "b").as_deref(), b.ok().map(|_| "2"));
    for key in &accepted {
        assert_eq!(get(&mut c, key).as_deref(), Some("3"), "{key}");
    }
    assert_eq!(get(&mut c, &refused), None);
    assert_eq!(get(&mut c, "d").as_deref(), Some("4"));
}

#[test]
fn fsync_always_holds_the_reply_until_the_disk_recovers() {
    let dir = Dir::new("aof-fault-always");
    let fault = dir.0.join("fault");
    let mut node = Node::start_env(
        &dir.0,
        &["--appendfsync", "always"],
        &[("ROSTRUM_AOF_FAULT_FILE", &fault)],
    );
    std::fs::write(&fault, b"").expect("fault on");
    let mut raw = TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
    raw.set_read_timeout(Some(Duration::from_millis(700))).ok();
    raw.write_all(&resp(&[b"SET", b"k", b"v"])).expect("write");
    let mut buf = [0u8; 64];
    assert!(
        raw.read(&mut buf).is_err(),
        "a write was acknowledged before reaching the disk"
    );
    std::fs::remove_file(&fault).expect("fault off");
    raw.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let n = raw.read(&mut buf).expect("reply after recovery");
    assert_eq!(&buf[..n], b"+OK\r\n");
    node.kill();
    let node = Node::start(&dir.0, &[]);
    assert_eq!(get(&mut node.conn(), "k").as_deref(), Some("v"));
}

// ---------------------------------------------------------------------------
// Compatibility with Redis's own tools.

#[test]
fn redis_check_aof_accepts_our_file() {
    if !have("redis-check-aof") {
        eprintln!("redis-check-aof not installed: skipped");
        return;
    }
    let dir = Dir::new("aof-rca");
    make_aof(&dir.0);
    for file in [dir.aof(), dir.manifest()] {
        let out = Command::new("redis-check-aof")
            .arg(file)
            .output()
            .expect("redis-check-aof");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("valid"), "{text}");
    }
}

#[test]
fn redis_server_loads_our_file() {
    if !have("redis-server") {
        eprintln!("redis-server not installed: skipped");
        return;
    }
    let dir = Dir::new("aof-redis");
    let mut node = Node::start(&dir.0, &["--appendfsync", "always"]);
    let mut c = node.conn();
    set(&mut c, "plain", "1");
    set(&mut c, "bin", "a\r\nb\0c");
    set(&mut c, "gone", "x");
    let _: i64 = redis::cmd("DEL").arg("gone").query(&mut c).expect("del");
    let _: () = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("t1")
        .arg("x")
        .ignore()
        .cmd("SELECT")
        .arg(5)
        .ignore()
        .cmd("SET")
        .arg("t2")
        .arg("y")
        .ignore()
        .query(&mut c)
        .expect("multi");
    node.kill();

    let redis_dir = Dir::new("aof-redis-copy");
    copy_aof_dir(&dir.0, &redis_dir.0);
    let port = free_port();
    let mut child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "yes",
        ])
        .args(["--dir"])
        .arg(&redis_dir.0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server");
    let ready = wait_ready(port, &mut child);
    let result = std::panic::catch_unwind(|| {
        assert!(ready, "redis-server did not start on our AOF");
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .expect("client")
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect");
        assert_eq!(get(&mut c, "plain").as_deref(), Some("1"));
        assert_eq!(get(&mut c, "bin").as_deref(), Some("a\r\nb\0c"));
        assert_eq!(get(&mut c, "gone"), None);
        assert_eq!(get(&mut c, "t1").as_deref(), Some("x"));
        let _: () = redis::cmd("SELECT").arg(5).query(&mut c).expect("select");
        assert_eq!(get(&mut c, "t2").as_deref(), Some("y"));
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

/// Copies `from`/appendonlydir to `to`/appendonlydir.
fn copy_aof_dir(from: &Path, to: &Path) {
    let (src, dst) = (from.join("appendonlydir"), to.join("appendonlydir"));
    std::fs::create_dir_all(&dst).expect("mkdir");
    for e in std::fs::read_dir(&src).expect("appendonlydir").flatten() {
        std::fs::copy(e.path(), dst.join(e.file_name())).expect("copy");
    }
}

// ---------------------------------------------------------------------------
// In-process: CONFIG SET's hook, and expired keys logged as DELs.

mod in_process {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use rostrum::commands;
    use rostrum::persistence;
    use rostrum::protocol::Reply;
    use rostrum::state::client::{ClientInfo, ClientState};
    use rostrum::state::journal;
    use rostrum::state::{Config, Server};

    fn run(server: &Server, client: &mut ClientState, args: &[&str]) -> String {
        let mut out = Reply::new(false);
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        commands::execute(server, client, &mut out, &a);
        String::from_utf8_lossy(&out.buf).into_owned()
    }

    /// Waits for `needle` in the AOF's files (all of them, or the incr).
    fn wait_for_file(dir: &super::Dir, incr: bool, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let bytes = if incr {
                std::fs::read(dir.aof()).unwrap_or_default()
            } else {
                crate::common::aof_bytes(&dir.0)
            };
            let text = String::from_utf8_lossy(&bytes).into_owned();
            if text.contains(needle) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "{needle} never reached the AOF: {text:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn turning_the_aof_on_at_run_time_writes_a_rewrite_first() {
        let dir = super::Dir::new("aof-runtime");
        let config = Config {
            dir: dir.0.to_string_lossy().into_owned(),
            ..Config::default()
        };
        let server = Server::new(config, None);
        persistence::start(&server).expect("start");
        let mut client = ClientState::new(
            Arc::new(ClientInfo::new(1, String::new(), String::new(), 0)),
            true,
        );
        assert_eq!(
            run(&server, &mut client, &["SET", "before", "1"]),
            "+OK\r\n"
        );
        assert!(!dir.aof().exists());

        server.config.write().appendonly = true;
        journal::on_config_change(&server.aof, &server.config.read()).expect("on");
        // The rewrite holds the data written before the AOF was on.
        wait_for_file(&dir, false, "before");
        run(&server, &mut client, &["SET", "during", "2"]);
        let text = wait_for_file(&dir, true, "during");
        assert!(text.starts_with("*2\r\n$6\r\nSELECT\r\n"), "{text:?}");

        server.config.write().appendonly = false;
        journal::on_config_change(&server.aof, &server.config.read()).expect("off");
        run(&server, &mut client, &["SET", "after", "3"]);
        journal::shutdown_flush(&server.aof);
        let text = String::from_utf8_lossy(&std::fs::read(dir.aof()).expect("aof")).into_owned();
        assert!(!text.contains("after"), "{text:?}");
        let info = journal::info_fields(&server.aof);
        let aof_enabled = info.iter().find(|(k, _)| *k == "aof_enabled");
        assert_eq!(aof_enabled.map(|(_, v)| v.as_str()), Some("0"));
        let rewrites = info.iter().find(|(k, _)| *k == "aof_rewrites");
        assert_eq!(rewrites.map(|(_, v)| v.as_str()), Some("1"));
    }

    #[test]
    fn expired_keys_are_logged_as_del() {
        let dir = super::Dir::new("aof-expired");
        let config = Config {
            dir: dir.0.to_string_lossy().into_owned(),
            appendonly: true,
            ..Config::default()
        };
        let server = Server::new(config, None);
        persistence::start(&server).expect("start");
        let mut client = ClientState::new(
            Arc::new(ClientInfo::new(1, String::new(), String::new(), 0)),
            true,
        );
        run(&server, &mut client, &["SET", "k", "v"]);
        {
            let ks = &server.keyspace;
            let mut g = ks.lock_one(ks.shard_of(b"k"), true);
            let db = &mut g.shard_mut().expect("write lock").dbs[0];
            assert!(db.set_expire(b"k", 1));
        }
        // DEL of an expired key: nothing deleted, but the expiry is logged.
        assert_eq!(run(&server, &mut client, &["DEL", "k"]), ":0\r\n");
        journal::shutdown_flush(&server.aof);
        let text = String::from_utf8_lossy(&std::fs::read(dir.aof()).expect("aof")).into_owned();
        assert!(text.ends_with("*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n"), "{text:?}");
    }
}

/// CONFIG SET appendonly yes at run time writes the data out first, INFO
/// reports it, and a restart brings the data back.
#[test]
fn config_set_appendonly_at_run_time() {
    let dir = Dir::new("cfgset");
    let mut node = Node::start(&dir.0, &["--config", "appendonly=no"]);
    let mut c = node.conn();
    set(&mut c, "before", "1");
    assert!(!dir.aof().exists());
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendonly")
        .arg("yes")
        .query(&mut c)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
        if info.contains("aof_enabled:1")
            && info.contains("aof_rewrite_in_progress:0")
            && dir.aof().exists()
        {
            break;
        }
        assert!(Instant::now() < deadline, "AOF not enabled: {info}");
        std::thread::sleep(Duration::from_millis(50));
    }
    set(&mut c, "after", "2");
    let on: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .query(&mut c)
        .unwrap();
    assert_eq!(on, vec!["appendonly".to_string(), "yes".to_string()]);
    drop(c);
    node.stop();
    let node = Node::start(&dir.0, &[]);
    let mut c = node.conn();
    assert_eq!(get(&mut c, "before").as_deref(), Some("1"));
    assert_eq!(get(&mut c, "after").as_deref(), Some("2"));
}

/// A sparse bitmap (bits near 2^32) is rewritten as a few SETRANGEs, not as a
/// 512 MB SET, and comes back bit for bit.
#[test]
fn rewrite_keeps_sparse_bitmaps_small() {
    let dir = Dir::new("sparse");
    // Commands: an RDB base holds the 512 MB string (LZF-compressed), as
    // Redis's does.
    let mut node = Node::start(&dir.0, &["--aof-use-rdb-preamble", "no"]);
    let mut c = node.conn();
    for off in [5u64, 4_000_000_000, 4_294_967_295] {
        let _: i64 = redis::cmd("SETBIT")
            .arg("votes")
            .arg(off)
            .arg(1)
            .query(&mut c)
            .unwrap();
    }
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
        if info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrites:1") {
            break;
        }
        assert!(Instant::now() < deadline, "rewrite not done: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let size = common::aof_size(&dir.0);
    assert!(size < 1_000_000, "rewritten AOF is {size} bytes");
    drop(c);
    node.kill();
    let node = Node::start(&dir.0, &[]);
    let mut c = node.conn();
    let len: i64 = redis::cmd("STRLEN").arg("votes").query(&mut c).unwrap();
    assert_eq!(len, 536_870_912);
    let count: i64 = redis::cmd("BITCOUNT").arg("votes").query(&mut c).unwrap();
    assert_eq!(count, 3);
    for off in [5u64, 4_000_000_000, 4_294_967_295] {
        let bit: i64 = redis::cmd("GETBIT")
            .arg("votes")
            .arg(off)
            .query(&mut c)
            .unwrap();
        assert_eq!(bit, 1, "bit {off}");
    }
}

/// Pipelined ZADD / ZINCRBY runs on one board are read ahead together
/// (`commands::run`) and then run one at a time: every call must reach the
/// log, so a restart gives the same board.
#[test]
fn pipelined_zadd_runs_are_all_logged() {
    let dir = Dir::new("aof-zadd-runs");
    let mut node = Node::start(&dir.0, &["--appendfsync", "always"]);
    let mut c = node.conn();
    let mut p = redis::pipe();
    for i in 0..300 {
        p.cmd("ZADD")
            .arg("board")
            .arg(i)
            .arg(format!("m{i}"))
            .ignore();
    }
    for i in 0..400 {
        let member = format!("m{}", i * 7 % 350);
        if (i / 20) % 2 == 0 {
            p.cmd("ZADD").arg("board").arg(i * 13 % 1000).arg(&member);
        } else {
            p.cmd("ZINCRBY").arg("board").arg(i % 5).arg(&member);
        }
        if i == 150 {
            p.cmd("ZADD").arg("fresh").arg(1).arg("a");
            p.cmd("ZADD").arg("fresh").arg(2).arg("b");
        }
    }
    let replies: Vec<redis::Value> = p.query(&mut c).expect("pipeline");
    assert_eq!(replies.len(), 402);
    let dump = |c: &mut redis::Connection, key: &str| -> Vec<(String, f64)> {
        redis::cmd("ZRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(c)
            .expect("ZRANGE")
    };
    let before = (dump(&mut c, "board"), dump(&mut c, "fresh"));
    assert!(before.0.len() > 300);
    assert_eq!(before.1.len(), 2);
    node.kill();
    let node = Node::start(&dir.0, &[]);
    let mut c = node.conn();
    assert_eq!((dump(&mut c, "board"), dump(&mut c, "fresh")), before);
}

/// One EVAL of 100,000 ZADDs and one MULTI/EXEC of 100,000 queued ZADDs
/// under `appendonly yes` (each logged as one MULTI/EXEC block, in time
/// linear in its writes): redis-check-aof accepts the file, and a restart
/// replays it to the same data.
#[test]
fn large_script_and_transaction_replay_equal() {
    let dir = Dir::new("aof-large-tx");
    let mut node = Node::start(&dir.0, &["--enable-debug-command", "yes"]);
    let mut c = node.conn();
    let n = 100_000;
    let r: i64 = redis::cmd("EVAL")
        .arg(
            "for i = 1, tonumber(ARGV[1]) do \
             redis.call('zadd', KEYS[1], i, 'm' .. i) end return 1",
        )
        .arg(1)
        .arg("script-board")
        .arg(n)
        .query(&mut c)
        .expect("EVAL");
    assert_eq!(r, 1);
    let mut p = redis::pipe();
    p.atomic();
    for i in 0..n {
        p.cmd("ZADD")
            .arg("multi-board")
            .arg(i)
            .arg(format!("m{i}"))
            .ignore();
    }
    let _: () = p.query(&mut c).expect("MULTI/EXEC");
    let state = |c: &mut redis::Connection| -> (String, i64, i64, Vec<String>) {
        let digest: String = redis::cmd("DEBUG").arg("DIGEST").query(c).expect("digest");
        let card = |c: &mut redis::Connection, k: &str| -> i64 {
            redis::cmd("ZCARD").arg(k).query(c).expect("ZCARD")
        };
        let top: Vec<String> = redis::cmd("ZREVRANGE")
            .arg("multi-board")
            .arg(0)
            .arg(2)
            .query(c)
            .expect("ZREVRANGE");
        (digest, card(c, "script-board"), card(c, "multi-board"), top)
    };
    let before = state(&mut c);
    assert_eq!((before.1, before.2), (n as i64, n as i64));
    node.stop();
    if have("redis-check-aof") {
        let out = Command::new("redis-check-aof")
            .arg(dir.manifest())
            .output()
            .expect("redis-check-aof");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains("valid"), "{text}");
    }
    let node = Node::start(&dir.0, &["--enable-debug-command", "yes"]);
    let mut c = node.conn();
    assert_eq!(state(&mut c), before);
}
