//! Pub/Sub through the `redis` crate and raw sockets: subscribe, receive,
//! patterns, unsubscribe, messages from MULTI/EXEC and scripts, RESP3
//! pushes on a normal connection, cleanup on disconnect, a subscriber that
//! never reads cut off at its output limit while the others keep
//! receiving, and PUBLISH kept out of the AOF.
mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{read_at_least, roundtrip, temp_dir, TestServer};

fn publish(c: &mut redis::Connection, channel: &str, msg: &[u8]) -> i64 {
    redis::cmd("PUBLISH")
        .arg(channel)
        .arg(msg)
        .query(c)
        .expect("PUBLISH")
}

fn numsub(c: &mut redis::Connection, channel: &str) -> i64 {
    let v: Vec<redis::Value> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(c)
        .expect("PUBSUB NUMSUB");
    match v.get(1) {
        Some(redis::Value::Int(n)) => *n,
        other => panic!("NUMSUB answered {other:?}"),
    }
}

/// Polls `f` until it is true (at most 5 s).
fn eventually(mut f: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("timed out waiting until {what}");
}

#[test]
fn subscribe_receive_patterns_and_unsubscribe() {
    let srv = TestServer::start(&[]);
    let mut sub_conn = srv.conn();
    let mut p = srv.conn();
    let mut sub = sub_conn.as_pubsub();
    sub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sub.subscribe("news").unwrap();
    sub.psubscribe("n*").unwrap();
    assert_eq!(publish(&mut p, "news", b"hello"), 2);
    let m = sub.get_message().unwrap();
    assert_eq!(
        (m.get_channel_name(), m.get_payload_bytes()),
        ("news", &b"hello"[..])
    );
    assert!(!m.from_pattern());
    let m = sub.get_message().unwrap();
    assert!(m.from_pattern());
    assert_eq!(m.get_pattern::<String>().unwrap(), "n*");
    assert_eq!(m.get_payload_bytes(), b"hello");
    // Binary payloads come through untouched.
    let bin: Vec<u8> = (0..=255).collect();
    assert_eq!(publish(&mut p, "nope", &bin), 1);
    assert_eq!(sub.get_message().unwrap().get_payload_bytes(), &bin[..]);
    sub.unsubscribe("news").unwrap();
    assert_eq!(publish(&mut p, "news", b"x"), 1, "only the pattern is left");
    assert_eq!(sub.get_message().unwrap().get_channel_name(), "news");
    sub.punsubscribe("n*").unwrap();
    assert_eq!(publish(&mut p, "news", b"x"), 0);
    let info = common::info(&mut p, "stats");
    assert_eq!(info["pubsub_channels"], "0");
    assert_eq!(info["pubsub_patterns"], "0");
}

#[test]
fn messages_from_multi_and_scripts_are_delivered() {
    let srv = TestServer::start(&[]);
    let mut sub_conn = srv.conn();
    let mut p = srv.conn();
    let mut sub = sub_conn.as_pubsub();
    sub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sub.subscribe("room").unwrap();
    let counts: (i64, i64) = redis::pipe()
        .atomic()
        .cmd("PUBLISH")
        .arg("room")
        .arg("one")
        .cmd("PUBLISH")
        .arg("room")
        .arg("two")
        .query(&mut p)
        .unwrap();
    assert_eq!(counts, (1, 1));
    let n: i64 = redis::cmd("EVAL")
        .arg("return redis.call('publish', KEYS[1], ARGV[1])")
        .arg(1)
        .arg("room")
        .arg("three")
        .query(&mut p)
        .unwrap();
    assert_eq!(n, 1);
    let got: Vec<String> = (0..3)
        .map(|_| sub.get_message().unwrap().get_payload().unwrap())
        .collect();
    assert_eq!(got, ["one", "two", "three"]);
}

#[test]
fn subscriber_state_shows_in_client_list_and_goes_with_the_client() {
    let srv = TestServer::start(&[]);
    let mut p = srv.conn();
    {
        let mut sub_conn = srv.conn();
        let mut sub = sub_conn.as_pubsub();
        sub.subscribe(&["a", "b"]).unwrap();
        sub.psubscribe("p*").unwrap();
        // (The crate returns from SUBSCRIBE a b at its first confirmation.)
        eventually(
            || {
                let list: String = redis::cmd("CLIENT")
                    .arg("LIST")
                    .arg("TYPE")
                    .arg("pubsub")
                    .query(&mut p)
                    .unwrap();
                list.lines().count() == 1
                    && list.contains("flags=P ")
                    && list.contains(" sub=2 psub=1 ssub=0 ")
            },
            "CLIENT LIST shows the subscriptions",
        );
        assert_eq!(numsub(&mut p, "a"), 1);
        let info = common::info(&mut p, "stats");
        assert_eq!(info["pubsub_channels"], "2");
        assert_eq!(info["pubsub_patterns"], "1");
    }
    // The connection is gone: so are its subscriptions.
    eventually(|| numsub(&mut p, "a") == 0, "the subscriber is removed");
    eventually(
        || publish(&mut p, "pa", b"x") == 0,
        "its pattern is removed",
    );
}

#[test]
fn resp3_pushes_arrive_on_a_normal_connection() {
    let srv = TestServer::start(&[]);
    let mut s = srv.raw();
    let hello = roundtrip(&mut s, b"HELLO 3\r\n", 10);
    assert!(hello.starts_with(b"%7"));
    let r = roundtrip(&mut s, b"SUBSCRIBE ch\r\n", 30);
    assert_eq!(r, b">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n");
    // Still a normal connection: any command runs.
    assert_eq!(roundtrip(&mut s, b"SET k v\r\n", 5), b"+OK\r\n");
    let mut p = srv.conn();
    assert_eq!(publish(&mut p, "ch", b"m"), 1);
    let want = b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n";
    assert_eq!(read_at_least(&mut s, want.len()), want);
    // RESET leaves the channel.
    assert_eq!(roundtrip(&mut s, b"RESET\r\n", 8), b"+RESET\r\n");
    assert_eq!(publish(&mut p, "ch", b"m"), 0);
}

#[test]
fn a_subscriber_that_never_reads_is_cut_off_while_others_keep_receiving() {
    let srv = TestServer::start(&[]);
    let mut p = srv.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("pubsub 512kb 0 0")
        .query(&mut p)
        .unwrap();
    // The slow one subscribes and then never reads again.
    let mut slow = srv.raw();
    let r = roundtrip(&mut slow, b"SUBSCRIBE big\r\n", 31);
    assert!(r.starts_with(b"*3\r\n$9\r\nsubscribe"));
    // The fast one reads everything, in a thread.
    let mut fast = srv.raw();
    let r = roundtrip(&mut fast, b"SUBSCRIBE big\r\n", 31);
    assert!(r.starts_with(b"*3\r\n$9\r\nsubscribe"));
    let payload = vec![b'x'; 64 * 1024];
    let frame_len = {
        let mut f =
            format!("*3\r\n$7\r\nmessage\r\n$3\r\nbig\r\n${}\r\n", payload.len()).into_bytes();
        f.extend_from_slice(&payload);
        f.extend_from_slice(b"\r\n");
        f.len()
    };
    const MESSAGES: usize = 400;
    // Bytes the fast one has read: the publisher stays at most a few
    // messages ahead of it, so that it never nears its own limit however
    // busy the machine is.
    let read = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let read_by_fast = read.clone();
    let reader = std::thread::spawn(move || {
        fast.set_read_timeout(Some(Duration::from_secs(20))).ok();
        let mut total = 0usize;
        let mut buf = vec![0u8; 256 * 1024];
        while total < MESSAGES * frame_len {
            match fast.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
            read_by_fast.store(total, std::sync::atomic::Ordering::Release);
        }
        // Handed back, so that it stays subscribed.
        (total / frame_len, fast)
    });
    let mut receivers = Vec::new();
    for i in 0..MESSAGES {
        let deadline = Instant::now() + Duration::from_secs(20);
        while read.load(std::sync::atomic::Ordering::Acquire) + 4 * frame_len < i * frame_len
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_micros(200));
        }
        receivers.push(publish(&mut p, "big", &payload));
    }
    let (received, _fast) = reader.join().unwrap();
    assert_eq!(received, MESSAGES, "the fast subscriber got all");
    assert_eq!(receivers[0], 2);
    assert_eq!(*receivers.last().unwrap(), 1, "the slow one was dropped");
    assert_eq!(numsub(&mut p, "big"), 1);
    // Its connection is closed: after what the kernel had buffered, EOF.
    slow.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let mut buf = vec![0u8; 1 << 20];
    let closed = loop {
        match slow.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(_) => break false,
        }
    };
    assert!(closed, "the slow subscriber was disconnected");
    let addr = format!("addr={} ", slow.local_addr().unwrap());
    eventually(
        || {
            let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut p).unwrap();
            !list.contains(&addr)
        },
        "the slow subscriber leaves CLIENT LIST",
    );
}

#[test]
fn resp2_subscribe_mode_refuses_other_commands() {
    let srv = TestServer::start(&[]);
    let mut s = srv.raw();
    roundtrip(&mut s, b"SUBSCRIBE a\r\n", 29);
    let r = roundtrip(&mut s, b"GET k\r\n", 20);
    assert_eq!(
        r,
        &b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"[..]
    );
    assert_eq!(
        roundtrip(&mut s, b"PING\r\n", 20),
        b"*2\r\n$4\r\npong\r\n$0\r\n\r\n"
    );
    s.write_all(b"QUIT\r\n").unwrap();
    assert_eq!(read_at_least(&mut s, 100), b"+OK\r\n");
    let mut p = srv.conn();
    eventually(|| numsub(&mut p, "a") == 0, "QUIT left the channel");
}

#[test]
fn publish_is_not_written_to_the_aof_and_loading_is_unaffected() {
    let dir = temp_dir("pubsub-aof");
    {
        let mut srv = TestServer::start_with_aof(&dir);
        let mut c = srv.conn();
        let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
        publish(&mut c, "ch", b"not persisted");
        let _: i64 = redis::cmd("EVAL")
            .arg("redis.call('set', 'k2', 'v2'); return redis.call('publish', 'ch', 'x')")
            .arg(0)
            .query(&mut c)
            .unwrap();
        let _: () = redis::pipe()
            .atomic()
            .cmd("PUBLISH")
            .arg("ch")
            .arg("y")
            .ignore()
            .cmd("SET")
            .arg("k3")
            .arg("v3")
            .ignore()
            .query(&mut c)
            .unwrap();
        srv.terminate();
    }
    let aof = common::aof_bytes(&dir);
    let text = String::from_utf8_lossy(&aof).to_ascii_lowercase();
    assert!(!text.contains("publish"), "{text}");
    assert!(text.contains("k3"));
    let srv = TestServer::start_in(dir.clone(), &["--appendonly", "yes"]);
    let mut c = srv.conn();
    let v: Vec<String> = redis::cmd("MGET")
        .arg("k")
        .arg("k2")
        .arg("k3")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, ["v", "v2", "v3"]);
}

#[test]
fn a_subscriber_over_the_soft_limit_for_its_seconds_is_cut_off() {
    let srv = TestServer::start(&[]);
    let mut p = srv.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("pubsub 0 256kb 1")
        .query(&mut p)
        .unwrap();
    let mut slow = srv.raw();
    roundtrip(&mut slow, b"SUBSCRIBE soft\r\n", 32);
    let payload = vec![b'y'; 64 * 1024];
    let started = Instant::now();
    let mut over_since = None;
    // Past what the kernel buffers, the queue stays over 256kb: the client
    // goes once that has lasted more than a second (not at once: no hard
    // limit).
    while publish(&mut p, "soft", &payload) == 1 {
        if over_since.is_none() && numsub(&mut p, "soft") == 1 {
            let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut p).unwrap();
            let omem = list
                .lines()
                .find(|l| l.contains("sub=1"))
                .and_then(|l| l.split(" omem=").nth(1))
                .and_then(|v| v.split(' ').next()?.parse::<u64>().ok())
                .unwrap_or(0);
            if omem >= 256 * 1024 {
                over_since = Some(Instant::now());
            }
        }
        assert!(started.elapsed() < Duration::from_secs(20), "never cut off");
        std::thread::sleep(Duration::from_millis(5));
    }
    let over = over_since.expect("CLIENT LIST showed the queue over the soft limit");
    assert!(
        over.elapsed() >= Duration::from_secs(1),
        "cut off too early"
    );
    assert_eq!(numsub(&mut p, "soft"), 0);
}
