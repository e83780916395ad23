//! Redis's own tools against Rostrum: redis-cli in argv mode, with commands
//! on stdin and in `--pipe` mass insertion, and redis-benchmark. Expected
//! outputs are what the tools print against redis-server 7.0.15.
//!
//! A tool missing from PATH skips its test with a notice, unless the
//! environment variable CI is set, in which case the test fails.
mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::TestServer;

/// The tool's path, or `None` (after a notice) when it is absent outside CI.
fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
            panic!("{name} is not in PATH (CI is set, so this is a failure)");
        }
        println!("skipping: {name} is not in PATH");
    }
    found
}

/// Runs `cmd` with `stdin`, killing it if it runs longer than `limit`.
fn run(cmd: &mut Command, stdin: &[u8], limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tool");
    let mut input = child.stdin.take().expect("stdin");
    let stdin = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = feeder.join();
    child.wait_with_output().expect("output")
}

/// `redis-cli -p PORT args...` (stdout is a pipe, so replies print raw).
fn cli(cli: &PathBuf, srv: &TestServer, args: &[&str]) -> String {
    let out = run(
        Command::new(cli)
            .arg("-p")
            .arg(srv.port.to_string())
            .args(args),
        b"",
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn redis_cli_argv_mode() {
    let Some(path) = tool("redis-cli") else {
        return;
    };
    let srv = TestServer::start(&[]);
    let c = |args: &[&str]| cli(&path, &srv, args);
    assert_eq!(c(&["PING"]), "PONG\n");
    assert_eq!(c(&["SET", "foo", "bar"]), "OK\n");
    assert_eq!(c(&["GET", "foo"]), "bar\n");
    assert_eq!(c(&["GET", "nokey"]), "\n");
    assert_eq!(c(&["ECHO", "a b"]), "a b\n");
    assert_eq!(c(&["EXISTS", "foo", "foo", "nokey"]), "2\n");
    assert_eq!(
        c(&["NOSUCH", "x"]),
        "ERR unknown command 'NOSUCH', with args beginning with: 'x' \n\n"
    );
    assert_eq!(c(&["--no-raw", "GET", "foo"]), "\"bar\"\n");
    assert_eq!(c(&["--no-raw", "GET", "nokey"]), "(nil)\n");
    assert_eq!(
        c(&["--no-raw", "NOSUCH"]),
        "(error) ERR unknown command 'NOSUCH', with args beginning with: \n"
    );
    // RESP3: redis-cli sends HELLO 3 first.
    assert_eq!(c(&["-3", "PING"]), "PONG\n");
    assert_eq!(c(&["-3", "GET", "foo"]), "bar\n");
    assert_eq!(c(&["DEL", "foo"]), "1\n");
}

#[test]
fn redis_cli_commands_on_stdin() {
    let Some(path) = tool("redis-cli") else {
        return;
    };
    let srv = TestServer::start(&[]);
    let lines = b"SET a 1\nGET a\nECHO \"x y\"\nNOSUCH\nDEL a\nEXISTS a\nGET a\n";
    let out = run(
        Command::new(&path).arg("-p").arg(srv.port.to_string()),
        lines,
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "OK\n1\nx y\nERR unknown command 'NOSUCH', with args beginning with: \n\n1\n0\n\n"
    );
}

#[test]
fn redis_cli_pipe_mass_insertion() {
    let Some(path) = tool("redis-cli") else {
        return;
    };
    let srv = TestServer::start(&[]);
    const N: usize = 100_000;
    let mut input = Vec::with_capacity(N * 40);
    for i in 0..N {
        let key = format!("key:{i}");
        let value = i.to_string();
        input.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n",
                key.len(),
                value.len()
            )
            .as_bytes(),
        );
    }
    let out = run(
        Command::new(&path)
            .arg("-p")
            .arg(srv.port.to_string())
            .arg("--pipe"),
        &input,
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains(&format!("errors: 0, replies: {N}")),
        "{stdout}"
    );
    let mut conn = srv.conn();
    let keys: usize = redis::cmd("DBSIZE").query(&mut conn).expect("DBSIZE");
    assert_eq!(keys, N);
    let v: String = redis::cmd("GET")
        .arg("key:99999")
        .query(&mut conn)
        .expect("GET");
    assert_eq!(v, "99999");
}

/// Runs redis-benchmark against `srv` with `args` and `--csv`, checks that
/// it exits cleanly with nothing but its table on either stream (as against
/// Redis), and returns each test's name and requests per second.
fn benchmark(srv: &TestServer, path: &std::path::Path, args: &[&str]) -> Vec<(String, f64)> {
    let port = srv.port.to_string();
    let mut cmd = Command::new(path);
    cmd.args(["-p", &port]).args(args).arg("--csv");
    let out = run(&mut cmd, b"", Duration::from_secs(600));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {:?}\n{stdout}\n{stderr}",
        out.status
    );
    for line in stdout.lines().chain(stderr.lines()) {
        let lower = line.to_ascii_lowercase();
        assert!(
            !lower.contains("err") && !lower.contains("warning"),
            "redis-benchmark complained: {line}"
        );
    }
    // CSV: "test","rps",... after a header line.
    stdout
        .lines()
        .skip(1)
        .map(|row| {
            let mut fields = row.split("\",\"");
            let name = fields
                .next()
                .unwrap_or("")
                .trim_start_matches('"')
                .to_string();
            let rps: f64 = fields
                .next()
                .and_then(|f| f.trim_matches('"').parse().ok())
                .unwrap_or_else(|| panic!("bad row {row}"));
            assert!(rps > 0.0, "{row}");
            (name, rps)
        })
        .collect()
}

#[test]
fn redis_benchmark_runs_clean() {
    let Some(path) = tool("redis-benchmark") else {
        return;
    };
    let srv = TestServer::start(&[]);
    let rows = benchmark(
        &srv,
        &path,
        &["-t", "ping,set,get,incr,mset", "-n", "20000"],
    );
    let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "PING_INLINE",
            "PING_MBULK",
            "SET",
            "GET",
            "INCR",
            "MSET (10 keys)"
        ]
    );
}

/// Every test redis-benchmark runs by default (no `-t`), as Redis 7.0's
/// redis-benchmark lists them.
const DEFAULT_BENCHMARK_TESTS: &[&str] = &[
    "PING_INLINE",
    "PING_MBULK",
    "SET",
    "GET",
    "INCR",
    "LPUSH",
    "RPUSH",
    "LPOP",
    "RPOP",
    "SADD",
    "HSET",
    "SPOP",
    "ZADD",
    "ZPOPMIN",
    "LPUSH (needed to benchmark LRANGE)",
    "LRANGE_100 (first 100 elements)",
    "LRANGE_300 (first 300 elements)",
    "LRANGE_500 (first 500 elements)",
    "LRANGE_600 (first 600 elements)",
    "MSET (10 keys)",
];

#[test]
fn redis_benchmark_runs_every_default_test() {
    let Some(path) = tool("redis-benchmark") else {
        return;
    };
    let srv = TestServer::start(&[]);
    let rows = benchmark(&srv, &path, &["-n", "100000", "-q"]);
    let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, DEFAULT_BENCHMARK_TESTS);
    // The data the run left: its lists, hashes, sets and sorted set.
    let mut conn = srv.conn();
    for (key, kind) in [
        ("mylist", "list"),
        ("myhash", "hash"),
        ("myset", "set"),
        ("myzset", "zset"),
    ] {
        let t: String = redis::cmd("TYPE").arg(key).query(&mut conn).expect("TYPE");
        assert!(t == kind || t == "none", "{key}: {t}");
    }
    let n: i64 = redis::cmd("LLEN")
        .arg("mylist")
        .query(&mut conn)
        .expect("LLEN");
    assert!(n > 0, "LRANGE's list is gone");
}

/// `redis-cli --ldb --eval` sends SCRIPT DEBUG, ignores its reply and sends
/// the script: Rostrum has no debugger, so the script must not run (its
/// write is not committed), and a plain EVAL afterwards runs as usual.
#[test]
fn redis_cli_ldb_stops_without_running_the_script() {
    let Some(path) = tool("redis-cli") else {
        return;
    };
    let srv = TestServer::start(&[]);
    let script = srv.dir.join("debug_me.lua");
    std::fs::write(&script, "return redis.call('set', KEYS[1], 'written')\n").expect("script");
    let script = script.to_str().expect("utf-8 path");
    for mode in ["--ldb", "--ldb-sync-mode"] {
        let out = run(
            Command::new(&path)
                .arg("-p")
                .arg(srv.port.to_string())
                .args([mode, "--eval", script, "k"]),
            b"quit\n",
            Duration::from_secs(20),
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("The script was not run"), "{mode}: {text}");
        assert_eq!(cli(&path, &srv, &["EXISTS", "k"]), "0\n", "{mode}");
    }
    // Without --ldb the same script runs.
    let out = cli(&path, &srv, &["--eval", script, "k"]);
    assert_eq!(out, "OK\n");
    assert_eq!(cli(&path, &srv, &["GET", "k"]), "written\n");
}
