//! A shared server must not fall over: what a client declares (a huge bulk
//! length) costs memory only as its bytes arrive; the memory client buffers
//! hold is reported by INFO; blocked clients are served in the order they
//! blocked, never after they have gone.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{info, TestServer};

/// The server process's resident memory in bytes (/proc/PID/status VmRSS).
fn rss(srv: &TestServer) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", srv.child.id()))
        .expect("read /proc status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS line");
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("VmRSS value");
    kb * 1024
}

fn mem_clients(c: &mut redis::Connection) -> u64 {
    info(c, "memory")["mem_clients_normal"]
        .parse()
        .expect("mem_clients_normal is a number")
}

/// 150 connections each declare a 536,870,000-byte bulk, send 40 KB of it
/// and idle: the server holds about what arrived (Redis: +7 MB), answers
/// PING at once, reports the buffers in `mem_clients_normal`, and lets the
/// memory go when they close.
#[test]
fn declared_bulk_costs_only_what_arrived() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let before = rss(&srv);
    let held_before = mem_clients(&mut c);
    let header = b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$536870000\r\n";
    let chunk = vec![b'x'; 40 * 1024];
    let mut conns = Vec::new();
    for _ in 0..150 {
        let mut s = srv.raw();
        s.write_all(header).expect("write header");
        s.write_all(&chunk).expect("write chunk");
        conns.push(s);
    }
    // Every byte sent is in the server once CLIENT LIST shows it buffered.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
        let full = list
            .lines()
            .filter(|l| {
                l.split(' ')
                    .find_map(|f| f.strip_prefix("qbuf="))
                    .and_then(|v| v.parse::<usize>().ok())
                    .is_some_and(|q| q >= 40 * 1024)
            })
            .count();
        if full == 150 {
            break;
        }
        assert!(Instant::now() < deadline, "only {full} buffers filled");
        std::thread::sleep(Duration::from_millis(50));
    }
    let grown = rss(&srv).saturating_sub(before);
    eprintln!("RSS grew by {} KB for 150 declared bulks", grown >> 10);
    assert!(
        grown < 100 << 20,
        "150 declared bulks took {} MB of RSS",
        grown >> 20
    );
    let start = Instant::now();
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
    assert!(
        start.elapsed() < Duration::from_millis(500),
        "PING took {:?}",
        start.elapsed()
    );
    // What the buffers hold, at least what arrived and not what was claimed.
    let held = mem_clients(&mut c);
    assert!(held >= 150 * 40 * 1024, "mem_clients_normal {held}");
    assert!(held < 150 * 1024 * 1024, "mem_clients_normal {held}");
    drop(conns);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n: u64 = info(&mut c, "clients")["connected_clients"]
            .parse()
            .unwrap();
        if n == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "{n} clients still connected");
        std::thread::sleep(Duration::from_millis(20));
    }
    let held_after = mem_clients(&mut c);
    assert!(
        held_after <= held_before + 256 * 1024,
        "mem_clients_normal {held_after} after the clients left (was {held_before})"
    );
    // The allocator hands the pages back in its own time.
    let deadline = Instant::now() + Duration::from_secs(30);
    while rss(&srv) > before + (30 << 20) {
        assert!(
            Instant::now() < deadline,
            "RSS stayed at {} MB (was {} MB)",
            rss(&srv) >> 20,
            before >> 20
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A request that declares more than `proto-max-bulk-len` is refused, and
/// one past `client-query-buffer-limit` closes the connection, as before.
#[test]
fn query_limits_still_hold() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("proto-max-bulk-len")
        .arg("1048576")
        .query(&mut c)
        .unwrap();
    let mut s = srv.raw();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n")
        .unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    assert!(
        String::from_utf8_lossy(&reply).starts_with("-ERR Protocol error: invalid bulk length"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("proto-max-bulk-len")
        .arg("536870912")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-query-buffer-limit")
        .arg("1048576")
        .query(&mut c)
        .unwrap();
    let mut s = srv.raw();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5000000\r\n")
        .unwrap();
    let chunk = vec![b'x'; 64 * 1024];
    let mut closed = false;
    for _ in 0..40 {
        if s.write_all(&chunk).is_err() {
            closed = true;
            break;
        }
    }
    if !closed {
        let mut buf = [0u8; 16];
        closed = matches!(s.read(&mut buf), Ok(0) | Err(_));
    }
    assert!(closed, "a client past client-query-buffer-limit stays open");
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}
