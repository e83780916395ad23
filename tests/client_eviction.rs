//! `maxmemory-clients` (Redis 7.0 client eviction) through real clients:
//! the client whose buffers hold most is closed, the others stay; CLIENT
//! NO-EVICT protects a client; a percentage of `maxmemory`; INFO
//! `evicted_clients` and `mem_clients_normal`; and client buffers count
//! against `maxmemory` (keys are evicted for a big query buffer).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{info, q, TestServer};

const MB: usize = 1024 * 1024;

fn stat(c: &mut redis::Connection, section: &str, name: &str) -> u64 {
    info(c, section)
        .get(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("INFO {name}"))
}

/// Sends the header of a SET whose value is far bigger than what follows,
/// then `bytes` of it: the server holds them in the client's read buffer.
fn big_partial_bulk(s: &mut TcpStream, bytes: usize) {
    s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000000\r\n")
        .expect("header");
    let chunk = vec![b'x'; 64 * 1024];
    let mut sent = 0;
    while sent < bytes {
        // The server may close it meanwhile: that is what is tested.
        if s.write_all(&chunk).is_err() {
            return;
        }
        sent += chunk.len();
    }
}

/// Whether the server closed `s` (a read returns end of file or a reset)
/// within 5 seconds.
fn closed(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(100))).ok();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buf = [0u8; 256];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return true,
        }
    }
    false
}

/// A connection the limit leaves alone (CLIENT NO-EVICT), to look on.
fn observer(s: &TestServer) -> redis::Connection {
    let mut c = s.conn();
    assert_eq!(q(&mut c, &["CLIENT", "NO-EVICT", "on"]), "OK");
    c
}

fn ping(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

#[test]
fn the_biggest_client_is_evicted_the_others_stay() {
    let s = TestServer::start(&["--maxmemory-clients", "1mb"]);
    let mut c = observer(&s);
    assert_eq!(
        q(&mut c, &["CONFIG", "GET", "maxmemory-clients"]),
        "[maxmemory-clients 1048576]"
    );
    let mut idle: Vec<TcpStream> = (0..3).map(|_| s.raw()).collect();
    for i in idle.iter_mut() {
        assert!(ping(i));
    }
    let mut big = s.raw();
    big_partial_bulk(&mut big, 2 * MB);
    assert!(closed(&mut big), "the client holding 2 MB is closed");
    for i in idle.iter_mut() {
        assert!(ping(i), "small clients stay");
    }
    assert_eq!(stat(&mut c, "stats", "evicted_clients"), 1);
    // Its buffers no longer count.
    assert!(stat(&mut c, "memory", "mem_clients_normal") < MB as u64);
}

#[test]
fn a_client_with_no_evict_stays() {
    let s = TestServer::start(&["--maxmemory-clients", "1mb"]);
    let mut c = observer(&s);
    let mut big = s.raw();
    big.write_all(b"CLIENT NO-EVICT on\r\n").expect("write");
    let mut ok = [0u8; 5];
    big.read_exact(&mut ok).expect("+OK");
    assert_eq!(&ok, b"+OK\r\n");
    big_partial_bulk(&mut big, 2 * MB);
    assert!(!closed(&mut big), "a NO-EVICT client is not closed");
    assert_eq!(stat(&mut c, "stats", "evicted_clients"), 0);
    assert!(stat(&mut c, "memory", "mem_clients_normal") >= 2 * MB as u64);
    // The protected clients alone are past the limit: as in Redis, any
    // other client goes as soon as it is counted.
    let mut other = s.raw();
    big_partial_bulk(&mut other, 64 * 1024);
    assert!(
        closed(&mut other),
        "an evictable client past the limit is closed"
    );
    assert_eq!(stat(&mut c, "stats", "evicted_clients"), 1);
    assert!(!closed(&mut big), "the NO-EVICT client is still there");
}

#[test]
fn a_client_not_reading_its_replies_is_evicted() {
    let s = TestServer::start(&["--maxmemory-clients", "1mb"]);
    let mut c = observer(&s);
    let value = vec![b'v'; 2 * MB];
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&value[..])
        .query(&mut c)
        .expect("SET");
    let mut reader = s.raw();
    // GETs of 2 MB, never read: a reply waits in its buffers.
    let mut pipeline = Vec::new();
    for _ in 0..4 {
        pipeline.extend_from_slice(b"GET big\r\n");
    }
    reader.write_all(&pipeline).expect("write");
    let deadline = Instant::now() + Duration::from_secs(5);
    while stat(&mut c, "stats", "evicted_clients") == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(stat(&mut c, "stats", "evicted_clients"), 1);
    assert_eq!(q(&mut c, &["PING"]), "PONG");
}

#[test]
fn a_percentage_of_maxmemory() {
    let s = TestServer::start(&[]);
    let mut c = observer(&s);
    // 10% of 20 MB: 2 MB.
    q(&mut c, &["CONFIG", "SET", "maxmemory", "20mb"]);
    q(&mut c, &["CONFIG", "SET", "maxmemory-clients", "10%"]);
    assert_eq!(
        q(&mut c, &["CONFIG", "GET", "maxmemory-clients"]),
        "[maxmemory-clients 10%]"
    );
    let mut small = s.raw();
    big_partial_bulk(&mut small, 256 * 1024);
    assert!(!closed(&mut small), "under 2 MB: stays");
    let mut big = s.raw();
    big_partial_bulk(&mut big, 4 * MB);
    assert!(closed(&mut big), "past 10% of maxmemory: closed");
    assert!(!closed(&mut small), "the smaller client stays");
    // No limit once it is 0 again.
    q(&mut c, &["CONFIG", "SET", "maxmemory-clients", "0"]);
    let mut again = s.raw();
    big_partial_bulk(&mut again, 4 * MB);
    assert!(!closed(&mut again));
    assert_eq!(stat(&mut c, "stats", "evicted_clients"), 1);
}

#[test]
fn client_buffers_count_against_maxmemory() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let base = stat(&mut c, "memory", "used_memory");
    q(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    );
    q(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            &(base + 8 * MB as u64).to_string(),
        ],
    );
    // About 5 MB of keys: under the limit, nothing evicted.
    let value = vec![b'v'; 1000];
    for chunk in 0..10 {
        let mut p = redis::pipe();
        for i in 0..500 {
            p.cmd("SET")
                .arg(format!("k{}", chunk * 500 + i))
                .arg(&value[..])
                .ignore();
        }
        let _: () = p.query(&mut c).expect("SET");
    }
    assert_eq!(stat(&mut c, "stats", "evicted_keys"), 0);
    // 3 MB held by one client's read buffer take memory past the limit:
    // the next write evicts keys for it, as in Redis.
    let mut big = s.raw();
    big_partial_bulk(&mut big, 3 * MB);
    std::thread::sleep(Duration::from_millis(100));
    assert!(stat(&mut c, "memory", "mem_clients_normal") >= 3 * MB as u64);
    let _: () = redis::cmd("SET")
        .arg("one-more")
        .arg("v")
        .query(&mut c)
        .expect("SET");
    assert!(
        stat(&mut c, "stats", "evicted_keys") > 0,
        "keys evicted for the client's buffer"
    );
}
