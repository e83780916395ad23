//! Lists through a real client: blocking pops woken by another client's
//! push, by MULTI/EXEC and by a script; blocked clients served in the order
//! they blocked; timeouts; what the AOF logs for blocking pops and a restart
//! (and a rewrite) that brings lists back; LINDEX in the middle of a
//! 1,000,000-element list.
mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{info, read_at_least, TestServer};
use redis::{Connection, Value};

fn cmd(args: &[&str]) -> redis::Cmd {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c
}

fn q<T: redis::FromRedisValue>(c: &mut Connection, args: &[&str]) -> T {
    cmd(args)
        .query(c)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

fn strings(c: &mut Connection, args: &[&str]) -> Vec<String> {
    q(c, args)
}

/// Waits until the server counts `n` blocked clients.
fn wait_blocked(c: &mut Connection, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let blocked: usize = info(c, "clients")
            .get("blocked_clients")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if blocked == n {
            return;
        }
        assert!(Instant::now() < deadline, "{blocked} blocked, want {n}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// Starts `args` on a new connection in a thread; returns its reply once
/// joined.
fn spawn_blocked(srv: &TestServer, args: &[&str]) -> thread::JoinHandle<Value> {
    let mut waiter = srv.conn();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    thread::spawn(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cmd(&args).query(&mut waiter).expect("blocking command")
    })
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn pair(key: &str, element: &str) -> Value {
    Value::Array(vec![bulk(key), bulk(element)])
}

#[test]
fn blocking_pops_are_woken_by_pushes_from_clients_transactions_and_scripts() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();

    // Another client's RPUSH wakes a BLPOP on several keys.
    let h = spawn_blocked(&srv, &["BLPOP", "a", "b", "10"]);
    wait_blocked(&mut c, 1);
    q::<i64>(&mut c, &["RPUSH", "b", "x", "y"]);
    assert_eq!(h.join().expect("waiter"), pair("b", "x"));
    assert_eq!(strings(&mut c, &["LRANGE", "b", "0", "-1"]), ["y"]);

    // A MULTI/EXEC that pushes wakes a BRPOP.
    let h = spawn_blocked(&srv, &["BRPOP", "m", "10"]);
    wait_blocked(&mut c, 1);
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("SET")
        .arg("unrelated")
        .arg("1")
        .cmd("LPUSH")
        .arg("m")
        .arg("1")
        .arg("2");
    let _: Value = pipe.query(&mut c).expect("EXEC");
    assert_eq!(h.join().expect("waiter"), pair("m", "1"));
    assert_eq!(strings(&mut c, &["LRANGE", "m", "0", "-1"]), ["2"]);

    // A script that pushes wakes a BLMOVE, which moves the element.
    let h = spawn_blocked(&srv, &["BLMOVE", "s", "d", "LEFT", "RIGHT", "10"]);
    wait_blocked(&mut c, 1);
    let _: Value = q(
        &mut c,
        &["EVAL", "return redis.call('RPUSH', KEYS[1], 'v')", "1", "s"],
    );
    assert_eq!(h.join().expect("waiter"), bulk("v"));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "s"]), 0);
    assert_eq!(strings(&mut c, &["LRANGE", "d", "0", "-1"]), ["v"]);

    // BLMPOP takes a count; BRPOPLPUSH moves the last element.
    let h = spawn_blocked(
        &srv,
        &["BLMPOP", "10", "2", "e", "f", "RIGHT", "COUNT", "2"],
    );
    wait_blocked(&mut c, 1);
    q::<i64>(&mut c, &["RPUSH", "f", "1", "2", "3"]);
    let want = Value::Array(vec![bulk("f"), Value::Array(vec![bulk("3"), bulk("2")])]);
    assert_eq!(h.join().expect("waiter"), want);
    let h = spawn_blocked(&srv, &["BRPOPLPUSH", "g", "f", "10"]);
    wait_blocked(&mut c, 1);
    q::<i64>(&mut c, &["LPUSH", "g", "z"]);
    assert_eq!(h.join().expect("waiter"), bulk("z"));
    assert_eq!(strings(&mut c, &["LRANGE", "f", "0", "-1"]), ["z", "1"]);

    // A push onto a key of another database wakes nobody.
    let h = spawn_blocked(&srv, &["BLPOP", "db", "0.3"]);
    wait_blocked(&mut c, 1);
    q::<()>(&mut c, &["SELECT", "1"]);
    q::<i64>(&mut c, &["RPUSH", "db", "x"]);
    q::<()>(&mut c, &["SELECT", "0"]);
    assert_eq!(h.join().expect("waiter"), Value::Nil);
    wait_blocked(&mut c, 0);
}

#[test]
fn blocked_clients_are_served_in_the_order_they_blocked() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    // One push of three elements: each waiter gets one, first come first.
    let mut waiters = Vec::new();
    for n in 1..=3 {
        waiters.push(spawn_blocked(&srv, &["BLPOP", "q", "10"]));
        wait_blocked(&mut c, n);
    }
    q::<i64>(&mut c, &["RPUSH", "q", "1", "2", "3"]);
    let got: Vec<Value> = waiters
        .into_iter()
        .map(|h| h.join().expect("waiter"))
        .collect();
    assert_eq!(got, [pair("q", "1"), pair("q", "2"), pair("q", "3")]);

    // One element at a time: the first waiter gets it, the others keep
    // waiting in their order.
    let mut waiters = Vec::new();
    for n in 1..=3 {
        waiters.push(spawn_blocked(&srv, &["BRPOP", "q", "10"]));
        wait_blocked(&mut c, n);
    }
    for (i, h) in waiters.into_iter().enumerate() {
        let element = format!("e{i}");
        q::<i64>(&mut c, &["LPUSH", "q", &element]);
        assert_eq!(h.join().expect("waiter"), pair("q", &element));
        wait_blocked(&mut c, 2 - i);
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "q"]), 0);

    // A first waiter that times out lets the next one take what arrives.
    let first = spawn_blocked(&srv, &["BLPOP", "t", "0.2"]);
    wait_blocked(&mut c, 1);
    let second = spawn_blocked(&srv, &["BLPOP", "t", "10"]);
    wait_blocked(&mut c, 2);
    assert_eq!(first.join().expect("first"), Value::Nil);
    q::<i64>(&mut c, &["RPUSH", "t", "late"]);
    assert_eq!(second.join().expect("second"), pair("t", "late"));
}

#[test]
fn timeouts_and_transactions_answer_null() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let start = Instant::now();
    let got: Value = q(&mut c, &["BLPOP", "none", "0.2"]);
    assert_eq!(got, Value::Nil);
    assert!(start.elapsed() >= Duration::from_millis(190));
    let got: Value = q(&mut c, &["BLMOVE", "none", "d", "LEFT", "LEFT", "0.05"]);
    assert_eq!(got, Value::Nil);

    // Inside MULTI, nothing blocks: null array, or a null bulk for BLMOVE.
    let mut s = srv.raw();
    let mut send = |args: &[&str], want: &str| {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n{}\r\n", a.len(), a).as_bytes());
        }
        std::io::Write::write_all(&mut s, &out).expect("write");
        let got = read_at_least(&mut s, want.len());
        assert_eq!(String::from_utf8_lossy(&got), want, "{args:?}");
    };
    send(&["MULTI"], "+OK\r\n");
    send(&["BLPOP", "none", "0"], "+QUEUED\r\n");
    send(&["BLMOVE", "none", "d", "LEFT", "LEFT", "0"], "+QUEUED\r\n");
    send(&["EXEC"], "*2\r\n*-1\r\n$-1\r\n");
    // Scripts may not call BLPOP (noscript, as in Redis 7.0), but BLMPOP
    // answers at once.
    let err = cmd(&["EVAL", "return redis.call('BLPOP', 'none', 0)", "0"])
        .query::<Value>(&mut c)
        .expect_err("BLPOP in a script");
    assert!(err.to_string().contains("not allowed"), "{err}");
    let got: Value = q(
        &mut c,
        &[
            "EVAL",
            "return redis.call('BLMPOP', 0, 1, 'none', 'LEFT')",
            "0",
        ],
    );
    assert_eq!(got, Value::Nil);
    assert_eq!(info(&mut c, "clients")["blocked_clients"], "0");
}

#[test]
fn the_aof_logs_blocking_pops_as_plain_ones_and_restores_lists() {
    let dir = common::temp_dir("lists-aof");
    let mut srv = TestServer::start_with_aof(&dir);
    let mut c = srv.conn();
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c", "d", "e", "f"]);
    let _: Value = q(&mut c, &["BLPOP", "l", "0"]);
    let _: Value = q(&mut c, &["BRPOP", "l", "0"]);
    let _: Value = q(&mut c, &["BLMOVE", "l", "m", "LEFT", "RIGHT", "0"]);
    let _: Value = q(&mut c, &["BRPOPLPUSH", "l", "m", "0"]);
    let _: Value = q(&mut c, &["BLMPOP", "0", "1", "l", "LEFT", "COUNT", "5"]);
    q::<i64>(&mut c, &["RPUSH", "big", "0"]);
    for i in 1..200 {
        q::<i64>(&mut c, &["RPUSH", "big", &i.to_string()]);
    }
    q::<()>(&mut c, &["LSET", "big", "100", "hundred"]);
    q::<i64>(&mut c, &["LREM", "big", "0", "7"]);
    // The waiter served after blocking is logged as a plain pop too.
    let h = spawn_blocked(&srv, &["BLPOP", "w", "10"]);
    wait_blocked(&mut c, 1);
    q::<i64>(&mut c, &["RPUSH", "w", "1", "2"]);
    assert_eq!(h.join().expect("waiter"), pair("w", "1"));
    let before_m = strings(&mut c, &["LRANGE", "m", "0", "-1"]);
    let before_big = strings(&mut c, &["LRANGE", "big", "0", "-1"]);
    assert_eq!(before_m, ["e", "b"]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "l"]), 0);
    srv.terminate();

    let text = String::from_utf8_lossy(&common::aof_bytes(&dir)).to_ascii_uppercase();
    for blocking in ["BLPOP", "BRPOP", "BLMOVE", "BRPOPLPUSH", "BLMPOP"] {
        assert!(!text.contains(blocking), "{blocking} in the AOF");
    }
    for plain in ["LPOP", "RPOP", "LMOVE", "RPOPLPUSH"] {
        assert!(text.contains(plain), "{plain} not in the AOF");
    }

    let check = |c: &mut Connection| {
        assert_eq!(strings(c, &["LRANGE", "m", "0", "-1"]), before_m);
        assert_eq!(strings(c, &["LRANGE", "big", "0", "-1"]), before_big);
        assert_eq!(strings(c, &["LRANGE", "w", "0", "-1"]), ["2"]);
        assert_eq!(q::<i64>(c, &["EXISTS", "l"]), 0);
        assert_eq!(q::<String>(c, &["TYPE", "big"]), "list");
    };
    let mut srv = TestServer::start_with_aof(&dir);
    let mut c = srv.conn();
    check(&mut c);
    // A rewrite writes the lists as RPUSH batches; they come back the same.
    let _: Value = q(&mut c, &["BGREWRITEAOF"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while info(&mut c, "persistence")["aof_rewrite_in_progress"] != "0"
        || info(&mut c, "persistence")["aof_rewrite_scheduled"] != "0"
    {
        assert!(Instant::now() < deadline, "rewrite did not finish");
        thread::sleep(Duration::from_millis(20));
    }
    thread::sleep(Duration::from_millis(100));
    srv.terminate();
    let text = String::from_utf8_lossy(&common::aof_bytes(&dir)).into_owned();
    assert!(text.contains("RPUSH"), "rewritten file has no RPUSH");
    assert!(!text.contains("LPOP"), "rewritten file still has the pops");
    let srv = TestServer::start_with_aof(&dir);
    let mut c = srv.conn();
    check(&mut c);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lindex_in_the_middle_of_a_million_elements_is_fast() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    const N: usize = 1_000_000;
    const BATCH: usize = 10_000;
    for start in (0..N).step_by(BATCH) {
        let mut push = redis::cmd("RPUSH");
        push.arg("big");
        for i in start..start + BATCH {
            push.arg(format!("element:{i}"));
        }
        let _: i64 = push.query(&mut c).expect("RPUSH");
    }
    assert_eq!(q::<i64>(&mut c, &["LLEN", "big"]), N as i64);
    // Warm up, then time LINDEX at the middle against LINDEX at the head.
    let _: String = q(&mut c, &["LINDEX", "big", "500000"]);
    let time = |c: &mut Connection, index: &str| {
        let start = Instant::now();
        for _ in 0..50 {
            let _: String = q(c, &["LINDEX", "big", index]);
        }
        start.elapsed() / 50
    };
    let head = time(&mut c, "0");
    let middle = time(&mut c, "500000");
    assert_eq!(
        q::<String>(&mut c, &["LINDEX", "big", "500000"]),
        "element:500000"
    );
    assert_eq!(
        q::<String>(&mut c, &["LINDEX", "big", "-500001"]),
        "element:499999"
    );
    // A walk of a million entries takes milliseconds; the node counts and
    // marks take microseconds.
    assert!(
        middle < head * 10 + Duration::from_millis(2),
        "LINDEX middle {middle:?}, head {head:?}"
    );
    assert_eq!(
        strings(&mut c, &["LRANGE", "big", "499999", "500001"]),
        ["element:499999", "element:500000", "element:500001"]
    );
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "big"]),
        "quicklist"
    );
    let bytes: i64 = q(&mut c, &["MEMORY", "USAGE", "big"]);
    assert!(
        (N as i64..16 * N as i64).contains(&bytes),
        "MEMORY USAGE {bytes}"
    );
}
