//! DEBUG through real clients: the `enable-debug-command` gate (the same
//! line as redis-server 7.0), RELOAD and its options, SET-ACTIVE-EXPIRE,
//! SLEEP, CHANGE-REPL-ID, OBJECT. Replies of the other subcommands are
//! compared byte for byte with redis-server in redis-compat/cases/debug.txt.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::redis_server::RedisServer;
use common::{info, q, TestServer};

/// Sends one command and returns the raw reply (one line or a whole
/// simple reply, read until it stops coming).
fn raw(port: u16, args: &[&str]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).unwrap_or(0);
        buf.extend_from_slice(&chunk[..n]);
        if n == 0 || buf.ends_with(b"\r\n") {
            break;
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// A redis-server 7.0 with `extra` arguments in a folder of its own,
/// killed (by PID) on drop.
fn redis(extra: &[&str]) -> RedisServer {
    RedisServer::start_in_temp("debug-redis", extra)
}

#[test]
fn refused_by_default_with_redis_line() {
    let r = redis(&[]);
    let s = TestServer::start(&[]);
    for args in [
        &["DEBUG", "HELP"][..],
        &["DEBUG", "nosuch"],
        &["DEBUG"],
        &["CONFIG", "GET", "enable-debug-command"],
        &["CONFIG", "SET", "enable-debug-command", "yes"],
    ] {
        let want = raw(r.port, args);
        assert_eq!(raw(s.port, args), want, "{args:?}");
    }
    assert!(raw(s.port, &["DEBUG", "HELP"]).starts_with("-ERR DEBUG command not allowed."));
    // Refused before authentication, as Redis does.
    let s = TestServer::start(&["--requirepass", "pw"]);
    assert!(raw(s.port, &["DEBUG", "DIGEST"]).starts_with("-ERR DEBUG command not allowed."));
}

#[test]
fn local_allows_loopback_and_yes_allows_all() {
    for mode in ["local", "yes"] {
        let s = TestServer::start(&["--enable-debug-command", mode]);
        let mut c = s.conn();
        assert_eq!(
            q(&mut c, &["CONFIG", "GET", "enable-debug-command"]),
            format!("[enable-debug-command {mode}]")
        );
        assert_eq!(
            q(&mut c, &["DEBUG", "DIGEST"]),
            "0000000000000000000000000000000000000000"
        );
    }
}

fn debug_server() -> TestServer {
    TestServer::start(&["--save", "", "--enable-debug-command", "yes"])
}

#[test]
fn reload_saves_flushes_and_loads_back_equal() {
    let s = debug_server();
    let mut c = s.conn();
    q(&mut c, &["SET", "s", "hello"]);
    q(&mut c, &["RPUSH", "l", "a", "b", "3"]);
    q(&mut c, &["SADD", "st", "x", "1"]);
    q(&mut c, &["ZADD", "z", "1.5", "a", "2", "b"]);
    q(&mut c, &["HSET", "h", "f", "v"]);
    q(&mut c, &["XADD", "x", "1-1", "a", "1"]);
    q(&mut c, &["SET", "e", "v", "EX", "1000"]);
    q(&mut c, &["LB.CREATE", "board"]);
    q(&mut c, &["LB.INCR", "board", "alice", "5"]);
    q(&mut c, &["SELECT", "2"]);
    q(&mut c, &["SET", "other", "db"]);
    let before = q(&mut c, &["DEBUG", "DIGEST"]);
    assert_ne!(before, "0000000000000000000000000000000000000000");
    assert_eq!(q(&mut c, &["DEBUG", "RELOAD"]), "OK");
    assert!(s.dir.join("dump.rdb").exists());
    assert_eq!(q(&mut c, &["DEBUG", "DIGEST"]), before);
    assert_eq!(q(&mut c, &["GET", "other"]), "db");
    q(&mut c, &["SELECT", "0"]);
    assert!(q(&mut c, &["LB.SCORE", "board", "alice"]).contains('5'));
    let ttl: i64 = redis::cmd("TTL").arg("e").query(&mut c).unwrap();
    assert!(ttl > 900 && ttl <= 1000, "{ttl}");

    // NOSAVE: the file as it was (without `later`).
    q(&mut c, &["SET", "later", "1"]);
    assert_eq!(q(&mut c, &["DEBUG", "RELOAD", "NOSAVE"]), "OK");
    assert_eq!(q(&mut c, &["EXISTS", "later"]), "0");
    assert_eq!(q(&mut c, &["DEBUG", "DIGEST"]), before);

    // NOFLUSH MERGE: the file's keys win, the others stay.
    q(&mut c, &["SET", "s", "changed"]);
    q(&mut c, &["SET", "extra", "1"]);
    assert_eq!(
        q(&mut c, &["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"]),
        "OK"
    );
    assert_eq!(q(&mut c, &["GET", "s"]), "hello");
    assert_eq!(q(&mut c, &["GET", "extra"]), "1");

    // NOFLUSH without MERGE meeting a key already there: an error and
    // nothing changed (Redis stops the server there).
    q(&mut c, &["SET", "s", "changed"]);
    assert!(raw(s.port, &["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH"])
        .starts_with("-ERR Error trying to load the RDB dump"));
    assert_eq!(q(&mut c, &["GET", "s"]), "changed");

    // A missing file: the data is emptied first, as Redis does.
    std::fs::remove_file(s.dir.join("dump.rdb")).unwrap();
    assert_eq!(
        raw(s.port, &["DEBUG", "RELOAD", "NOSAVE"]),
        "-ERR Error trying to load the RDB dump\r\n"
    );
    assert_eq!(q(&mut c, &["DBSIZE"]), "0");
    assert_eq!(
        raw(s.port, &["DEBUG", "RELOAD", "FOO"]),
        "-ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.\r\n"
    );
}

#[test]
fn set_active_expire_stops_and_restarts_the_expiry_cycle() {
    let s = debug_server();
    let mut c = s.conn();
    assert_eq!(q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "OK");
    q(&mut c, &["SET", "k", "v", "PX", "20"]);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(info(&mut c, "stats")["expired_keys"], "0");
    assert_eq!(q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), "OK");
    let deadline = Instant::now() + Duration::from_secs(10);
    while info(&mut c, "stats")["expired_keys"] != "1" {
        assert!(Instant::now() < deadline, "the key was not expired");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sleep_holds_the_keyspace() {
    let s = debug_server();
    let port = s.port;
    let sleeper = std::thread::spawn(move || raw(port, &["DEBUG", "SLEEP", "0.6"]));
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    let mut c = s.conn();
    q(&mut c, &["GET", "k"]);
    // Only a lower bound: the GET waited for the sleep to end.
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(sleeper.join().unwrap(), "+OK\r\n");
}

#[test]
fn change_repl_id_and_object() {
    let s = debug_server();
    let mut c = s.conn();
    let before = info(&mut c, "replication")["master_replid"].clone();
    assert_eq!(q(&mut c, &["DEBUG", "CHANGE-REPL-ID"]), "OK");
    let after = info(&mut c, "replication");
    assert_ne!(after["master_replid"], before);
    assert_eq!(after["master_replid2"], "0".repeat(40));
    q(&mut c, &["SET", "k", "hello"]);
    let line = q(&mut c, &["DEBUG", "OBJECT", "k"]);
    assert!(line.starts_with("Value at:0x"), "{line}");
    for field in [
        "refcount:1",
        "encoding:embstr",
        "serializedlength:6",
        "lru_seconds_idle:",
    ] {
        assert!(line.contains(field), "{line}");
    }
    assert_eq!(
        raw(s.port, &["DEBUG", "OBJECT", "nokey"]),
        "-ERR no such key\r\n"
    );
}

/// Sends HELLO 3, then `args`; returns what came back for `args` (read
/// until it stops coming for 300 ms).
fn raw3(port: u16, args: &[&str]) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let send = |s: &mut TcpStream, args: &[&str]| {
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s.write_all(req.as_bytes()).unwrap();
    };
    let drain = |s: &mut TcpStream| {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n) = s.read(&mut chunk) {
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        buf
    };
    send(&mut s, &["HELLO", "3"]);
    drain(&mut s);
    send(&mut s, args);
    drain(&mut s)
}

#[test]
fn protocol_push_is_redis_push_then_reply() {
    let r = redis(&["--enable-debug-command", "yes"]);
    let s = debug_server();
    for args in [
        &["DEBUG", "PROTOCOL", "push"][..],
        &["DEBUG", "PROTOCOL", "attrib"],
    ] {
        let want = raw3(r.port, args);
        assert!(!want.is_empty());
        assert_eq!(
            String::from_utf8_lossy(&raw3(s.port, args)),
            String::from_utf8_lossy(&want),
            "{args:?}"
        );
    }
    assert_eq!(
        raw(s.port, &["DEBUG", "PROTOCOL", "push"]),
        raw(r.port, &["DEBUG", "PROTOCOL", "push"])
    );
}
