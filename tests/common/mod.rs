//! Shared test support: start a Rostrum server on a free loopback port and
//! stop it when the handle is dropped.
#![allow(dead_code)]

pub mod certs;
pub mod redis_server;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// INFO's `field:value` lines (of `section`) by field.
pub fn info(c: &mut redis::Connection, section: &str) -> HashMap<String, String> {
    try_info(c, section).expect("INFO")
}

/// As [`info`], or the error when the connection fails.
pub fn try_info(
    c: &mut redis::Connection,
    section: &str,
) -> redis::RedisResult<HashMap<String, String>> {
    let text: String = redis::cmd("INFO").arg(section).query(c)?;
    Ok(text
        .split("\r\n")
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

/// The binary the tests start: this build's, or the one named by
/// `ROSTRUM_TEST_BIN` (to show that a test fails on an older build).
pub fn server_binary() -> PathBuf {
    std::env::var_os("ROSTRUM_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rostrum")))
}

/// A running server process, killed on drop.
pub struct TestServer {
    pub child: Child,
    pub port: u16,
    pub dir: PathBuf,
}

/// A port that was free a moment ago on 127.0.0.1.
/// The AOF's files under `dir` in load order: the base then the incrs
/// named by `appendonlydir/appendonly.aof.manifest` (Redis 7.0's layout).
#[allow(dead_code)]
pub fn aof_files(dir: &Path) -> Vec<PathBuf> {
    let adir = dir.join("appendonlydir");
    let text = std::fs::read_to_string(adir.join("appendonly.aof.manifest")).unwrap_or_default();
    let mut base = Vec::new();
    let mut incrs = Vec::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() < 6 || w[0] != "file" {
            continue;
        }
        let path = adir.join(w[1]);
        match w.get(5) {
            Some(&"b") => base.push(path),
            Some(&"i") => incrs.push(path),
            _ => {}
        }
    }
    base.extend(incrs);
    base
}

/// Every AOF file's bytes under `dir`, in load order (for a test looking
/// for the commands that were logged).
#[allow(dead_code)]
pub fn aof_bytes(dir: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for f in aof_files(dir) {
        out.extend(std::fs::read(f).unwrap_or_default());
    }
    out
}

/// The total size of the AOF's files under `dir`.
#[allow(dead_code)]
pub fn aof_size(dir: &Path) -> u64 {
    aof_files(dir)
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum()
}

pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
}

/// A fresh temporary directory for one test.
pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "rostrum-test-{}-{}-{}",
        tag,
        std::process::id(),
        free_port()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

impl TestServer {
    /// Starts `rostrum` with extra arguments, waiting until it answers PING.
    pub fn start(extra: &[&str]) -> TestServer {
        let dir = temp_dir("srv");
        Self::start_in(dir, extra)
    }

    /// Starts `rostrum` in `dir` (its working directory).
    pub fn start_in(dir: PathBuf, extra: &[&str]) -> TestServer {
        for _attempt in 0..5 {
            let port = free_port();
            let mut cmd = Command::new(server_binary());
            // A config file goes first, as redis-server reads it.
            let (file, extra) = match extra.split_first() {
                Some((f, rest)) if !f.starts_with("--") => (Some(*f), rest),
                _ => (None, extra),
            };
            cmd.args(file);
            cmd.arg("--port")
                .arg(port.to_string())
                .arg("--loglevel")
                .arg("warning")
                .args(extra);
            cmd.current_dir(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let mut child = cmd.spawn().expect("spawn rostrum");
            if wait_ready(port, &mut child) {
                return TestServer {
                    child,
                    port,
                    dir: dir.clone(),
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("rostrum did not start");
    }

    /// `redis://127.0.0.1:port/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A synchronous `redis` crate connection.
    pub fn conn(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).expect("client");
        client
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect")
    }

    /// A raw TCP connection with a read timeout.
    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5))).ok();
        s
    }

    /// Stops the server with SIGKILL and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A server with the AOF on (`everysec`) in `dir`.
    /// The base file is written as commands (`aof-use-rdb-preamble no`), so
    /// that tests can read what a rewrite wrote ([`aof_bytes`]).
    pub fn start_with_aof(dir: &std::path::Path) -> TestServer {
        let dir = dir.to_str().expect("temp dir path is UTF-8");
        TestServer::start(&[
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--aof-use-rdb-preamble",
            "no",
            "--dir",
            dir,
        ])
    }

    /// SIGTERM, as a service manager stops a server: it flushes the AOF and
    /// must exit cleanly within 10 s.
    pub fn terminate(&mut self) {
        terminate(&mut self.child);
    }
}

/// Sends SIGTERM to a Rostrum process and waits (at most 10 s) for it to
/// exit, which it must do cleanly.
pub fn terminate(child: &mut Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -TERM failed");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            assert!(status.success(), "rostrum exited with {status} on SIGTERM");
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("rostrum did not stop on SIGTERM");
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Polls until something answers PING on `port` (at most 10 s).
pub fn wait_ready(port: u16, child: &mut Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(Duration::from_millis(500))).ok();
            if s.write_all(b"PING\r\n").is_ok() {
                let mut line = String::new();
                let mut r = BufReader::new(&mut s);
                if r.read_line(&mut line).is_ok()
                    && (line.starts_with("+PONG") || line.starts_with("-NOAUTH"))
                {
                    return true;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Sends raw bytes and reads until `expect_len` bytes arrived or the
/// connection closed / timed out. Returns what was read.
pub fn roundtrip(s: &mut TcpStream, bytes: &[u8], expect_len: usize) -> Vec<u8> {
    s.write_all(bytes).expect("write");
    read_at_least(s, expect_len)
}

/// Reads until `n` bytes arrived, EOF or timeout.
pub fn read_at_least(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while out.len() < n {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => out.extend_from_slice(&buf[..k]),
            Err(_) => break,
        }
    }
    out
}

// Commands in a compact text form (tests/leaderboard.rs, tests/seasons.rs).

/// A command from its words.
pub fn cmd(args: &[&str]) -> redis::Cmd {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd
}

/// A reply in a compact text form: `[1 alice 100]`, `nil`, `1.5`.
pub fn show(v: &redis::Value) -> String {
    match v {
        redis::Value::Nil => "nil".into(),
        redis::Value::Int(n) => n.to_string(),
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Okay => "OK".into(),
        redis::Value::Double(d) => d.to_string(),
        redis::Value::Array(a) | redis::Value::Set(a) => {
            let parts: Vec<String> = a.iter().map(show).collect();
            format!("[{}]", parts.join(" "))
        }
        redis::Value::Map(m) => {
            let parts: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}={}", show(k), show(v)))
                .collect();
            format!("{{{}}}", parts.join(" "))
        }
        other => format!("{other:?}"),
    }
}

/// Runs a command and shows its reply.
pub fn q(c: &mut redis::Connection, args: &[&str]) -> String {
    let v: redis::Value = cmd(args)
        .query(c)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"));
    show(&v)
}

/// The error line of a command expected to fail.
pub fn err(c: &mut redis::Connection, args: &[&str]) -> String {
    match cmd(args).query::<redis::Value>(c) {
        Ok(v) => panic!("{args:?} should fail, got {v:?}"),
        Err(e) => e.to_string(),
    }
}

/// Waits until the replica's link is up and its offset is the primary's.
pub fn wait_synced(primary: &mut redis::Connection, replica: &mut redis::Connection) {
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
