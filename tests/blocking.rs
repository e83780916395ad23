//! Blocking commands on a shared server: waiters served first come, first
//! served; nothing handed to a client that has gone; a key that changes
//! type leaves its waiters blocked; CLIENT UNBLOCK.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{info, TestServer};

fn blocked_clients(c: &mut redis::Connection) -> usize {
    info(c, "clients")["blocked_clients"].parse().unwrap()
}

/// Waits (at most 10 s) until `n` clients are blocked.
fn wait_blocked(c: &mut redis::Connection, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while blocked_clients(c) != n {
        assert!(
            Instant::now() < deadline,
            "never {n} blocked clients ({})",
            blocked_clients(c)
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits (at most 10 s) until the server's ends of the connections from
/// local ports `from` to server port `port` have all received their
/// peer's FIN (no longer ESTABLISHED in /proc/net/tcp): a close is only
/// something the server can know of once the kernel has delivered it, and
/// on a loaded machine loopback packets of one socket may be delivered
/// after those another socket sent later.
fn wait_fins_delivered(port: u16, from: &[u16]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let local = format!(":{port:04X}");
    loop {
        let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
        let open = table.lines().skip(1).any(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            f.len() > 3
                && f[1].ends_with(&local)
                && f[3] == "01"
                && from.iter().any(|p| f[2].ends_with(&format!(":{p:04X}")))
        });
        if !open {
            return;
        }
        assert!(Instant::now() < deadline, "FINs never delivered");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A RESP request for `args`.
fn request(args: &[&str]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    v
}

/// Reads one reply made of `lines` RESP lines (enough for the flat
/// replies these tests expect), with a bound on the wait.
fn read_reply(s: &mut TcpStream, lines: usize) -> String {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while got.iter().filter(|&&b| b == b'\n').count() < lines {
        match s.read(&mut byte) {
            Ok(1) => got.push(byte[0]),
            other => panic!(
                "reply cut short ({other:?}): {:?}",
                String::from_utf8_lossy(&got)
            ),
        }
    }
    String::from_utf8(got).unwrap()
}

/// `count` clients block on `key` one after the other with `cmd`; then
/// `fill` gives the key `count` elements at once; client i gets the i-th.
fn served_in_order(cmd: &[&str], fill: &[&str], expect: &[&str]) {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let mut waiters = Vec::new();
    for i in 0..expect.len() {
        let mut s = srv.raw();
        s.write_all(&request(cmd)).unwrap();
        wait_blocked(&mut c, i + 1);
        waiters.push(s);
    }
    let _: () = redis::cmd(fill[0]).arg(&fill[1..]).query(&mut c).unwrap();
    for (i, (s, want)) in waiters.iter_mut().zip(expect).enumerate() {
        let lines = want.matches('\n').count();
        assert_eq!(&read_reply(s, lines), want, "waiter {i}");
    }
}

#[test]
fn bzpopmin_waiters_served_in_arrival_order() {
    let fill = [
        "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
    ];
    let expect: Vec<String> = ["a", "b", "c", "d", "e"]
        .iter()
        .zip(1..)
        .map(|(m, s)| format!("*3\r\n$1\r\nz\r\n$1\r\n{m}\r\n$1\r\n{s}\r\n"))
        .collect();
    let expect: Vec<&str> = expect.iter().map(|s| s.as_str()).collect();
    served_in_order(&["BZPOPMIN", "z", "0"], &fill, &expect);
}

#[test]
fn blpop_waiters_served_in_arrival_order() {
    let fill = ["RPUSH", "l", "a", "b", "c", "d", "e"];
    let expect: Vec<String> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|m| format!("*2\r\n$1\r\nl\r\n$1\r\n{m}\r\n"))
        .collect();
    let expect: Vec<&str> = expect.iter().map(|s| s.as_str()).collect();
    served_in_order(&["BLPOP", "l", "0"], &fill, &expect);
}

/// Rounds of waiters of which some hang up before the producer pushes:
/// every element pushed is either received by a client that is still
/// there or still in the key. (The hang-ups come before the push, so a
/// server that gives one of them an element has handed it to a client it
/// could know was gone.)
/// Three workers: the gone and live waiters and the pusher are spread over
/// them, as on a machine with more cores (the default is one less than the
/// cores).
fn nothing_to_the_gone(block: &str, push: &str, key: &str, remaining: &str) {
    let srv = TestServer::start(&["--worker-threads", "3"]);
    let mut c = srv.conn();
    let mut pushed = 0usize;
    let mut received = 0usize;
    let mut left = 0usize;
    let mut seq = 0usize;
    for round in 0..30 {
        let mut live = Vec::new();
        let mut gone = Vec::new();
        for i in 0..8 {
            let mut s = srv.raw();
            s.write_all(&request(&[block, key, "0"])).unwrap();
            wait_blocked(&mut c, i + 1);
            // The first in line hang up: they would be served first.
            if i < 3 + round % 3 {
                gone.push(s);
            } else {
                live.push(s);
            }
        }
        let ports: Vec<u16> = gone
            .iter()
            .map(|s| s.local_addr().unwrap().port())
            .collect();
        drop(gone);
        wait_fins_delivered(srv.port, &ports);
        let n = 6;
        let mut p = redis::pipe();
        for _ in 0..n {
            seq += 1;
            if push == "ZADD" {
                p.cmd("ZADD").arg(key).arg(seq).arg(format!("e{seq}"));
            } else {
                p.cmd(push).arg(key).arg(format!("e{seq}"));
            }
            p.ignore();
        }
        let _: () = p.query(&mut c).unwrap();
        pushed += n;
        // The live waiters take what there is, in order. There are at most
        // 5 of them for 6 elements, so each gets one whoever else is served:
        // the timeout only bounds a failing run (a short one would count a
        // reply late on a loaded machine as lost).
        assert!(live.len() <= n);
        for mut s in live {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 256];
            if let Ok(k) = s.read(&mut buf) {
                if k > 0 && buf[0] == b'*' {
                    received += 1;
                }
            }
        }
        wait_blocked(&mut c, 0);
        // What is left is counted, and the next round starts empty.
        let n: usize = redis::cmd(remaining).arg(key).query(&mut c).unwrap();
        left += n;
        let _: () = redis::cmd("DEL").arg(key).query(&mut c).unwrap();
    }
    assert_eq!(
        received + left,
        pushed,
        "{} elements went to clients that had gone",
        pushed - received - left
    );
}

#[test]
fn bzpopmin_gives_nothing_to_clients_that_left() {
    nothing_to_the_gone("BZPOPMIN", "ZADD", "z", "ZCARD");
}

#[test]
fn blpop_gives_nothing_to_clients_that_left() {
    nothing_to_the_gone("BLPOP", "RPUSH", "l", "LLEN");
}

/// `MULTI; ZADD k 1 a; DEL k; SET k x; EXEC` does not wake a blocked
/// BZPOPMIN with WRONGTYPE (nor a BLPOP): it stays blocked and takes what
/// the key holds once it is its type again (Redis 7.0).
#[test]
fn type_change_in_multi_keeps_waiters_blocked() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let cases: [(&[&str], &[&str], &[&str]); 2] = [
        (
            &["BZPOPMIN", "k", "0"],
            &["ZADD", "k", "1", "a"],
            &["ZADD", "k", "2", "b"],
        ),
        (
            &["BLPOP", "k", "0"],
            &["RPUSH", "k", "a"],
            &["RPUSH", "k", "b"],
        ),
    ];
    for (block, add, again) in cases {
        let mut s = srv.raw();
        s.write_all(&request(block)).unwrap();
        wait_blocked(&mut c, 1);
        let _: () = redis::pipe()
            .atomic()
            .cmd(add[0])
            .arg(&add[1..])
            .ignore()
            .cmd("DEL")
            .arg("k")
            .ignore()
            .cmd("SET")
            .arg("k")
            .arg("x")
            .ignore()
            .query(&mut c)
            .unwrap();
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut buf = [0u8; 256];
        match s.read(&mut buf) {
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            other => panic!(
                "{}: woken with {:?} ({other:?})",
                block[0],
                String::from_utf8_lossy(&buf)
            ),
        }
        assert_eq!(blocked_clients(&mut c), 1);
        let _: () = redis::cmd("DEL").arg("k").query(&mut c).unwrap();
        let _: () = redis::cmd(again[0]).arg(&again[1..]).query(&mut c).unwrap();
        let want = if block[0] == "BLPOP" {
            "*2\r\n$1\r\nk\r\n$1\r\nb\r\n"
        } else {
            "*3\r\n$1\r\nk\r\n$1\r\nb\r\n$1\r\n2\r\n"
        };
        assert_eq!(read_reply(&mut s, want.matches('\n').count()), want);
        wait_blocked(&mut c, 0);
    }
}

/// CLIENT UNBLOCK ends a wait as a timeout (the default) or with the
/// UNBLOCKED error; a client that is not blocked is not touched (0).
#[test]
fn client_unblock() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let mut s = srv.raw();
    s.write_all(&request(&["CLIENT", "ID"])).unwrap();
    let id_line = read_reply(&mut s, 1);
    let id = id_line.trim_start_matches(':').trim().to_string();
    let n: i64 = redis::cmd("CLIENT")
        .arg("UNBLOCK")
        .arg(&id)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 0, "not blocked");

    let cases: [(&[&str], &str, &str); 4] = [
        (&["BZPOPMIN", "z", "0"], "", "*-1\r\n"),
        (&["BLPOP", "l", "0"], "TIMEOUT", "*-1\r\n"),
        (
            &["BLMOVE", "l", "m", "LEFT", "RIGHT", "0"],
            "timeout",
            "*-1\r\n",
        ),
        (
            &["BZMPOP", "0", "1", "z", "MIN"],
            "ERROR",
            "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n",
        ),
    ];
    for (cmd, how, want) in cases {
        s.write_all(&request(cmd)).unwrap();
        wait_blocked(&mut c, 1);
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("ID")
            .arg(&id)
            .query(&mut c)
            .unwrap();
        assert!(list.contains(" flags=b "), "{list}");
        let mut u = redis::cmd("CLIENT");
        u.arg("UNBLOCK").arg(&id);
        if !how.is_empty() {
            u.arg(how);
        }
        let n: i64 = u.query(&mut c).unwrap();
        assert_eq!(n, 1, "{cmd:?}");
        assert_eq!(read_reply(&mut s, 1), want, "{cmd:?} {how}");
        wait_blocked(&mut c, 0);
        // Unblocked, it runs its next command as usual.
        s.write_all(&request(&["PING"])).unwrap();
        assert_eq!(read_reply(&mut s, 1), "+PONG\r\n");
    }
    let errors = info(&mut c, "errorstats");
    assert_eq!(
        errors.get("errorstat_UNBLOCKED").map(String::as_str),
        Some("count=1")
    );
}

/// Waiters for another type do not hold up the line: a BLPOP behind a
/// BZPOPMIN on the same key takes what an RPUSH gives it, and the BZPOPMIN
/// stays blocked until the key holds a sorted set (Redis 7.0).
#[test]
fn waiters_for_another_type_do_not_hold_the_line() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let mut z = srv.raw();
    z.write_all(&request(&["BZPOPMIN", "k", "0"])).unwrap();
    wait_blocked(&mut c, 1);
    let mut l = srv.raw();
    l.write_all(&request(&["BLPOP", "k", "0"])).unwrap();
    wait_blocked(&mut c, 2);
    let _: () = redis::cmd("RPUSH").arg("k").arg("a").query(&mut c).unwrap();
    assert_eq!(read_reply(&mut l, 5), "*2\r\n$1\r\nk\r\n$1\r\na\r\n");
    wait_blocked(&mut c, 1);
    let _: () = redis::cmd("ZADD")
        .arg("k")
        .arg(1)
        .arg("m")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        read_reply(&mut z, 7),
        "*3\r\n$1\r\nk\r\n$1\r\nm\r\n$1\r\n1\r\n"
    );
}

/// A pipeline `push` + `pop` from one client while another is blocked on
/// the key: as in Redis, the blocked client is served right after the
/// push (it gets the element) and the pipeline's pop finds nothing.
fn served_between_pipelined_commands(block: &[&str], push: &[&str], pop: &[&str], want: &str) {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    for _round in 0..20 {
        let mut b = srv.raw();
        b.write_all(&request(block)).unwrap();
        wait_blocked(&mut c, 1);
        let mut p = redis::pipe();
        p.cmd(push[0]).arg(&push[1..]).ignore();
        p.cmd(pop[0]).arg(&pop[1..]);
        let (popped,): (redis::Value,) = p.query(&mut c).unwrap();
        assert!(
            matches!(popped, redis::Value::Nil) || popped == redis::Value::Array(vec![]),
            "the pipeline's {} took what the blocked client was owed: {popped:?}",
            pop[0]
        );
        let lines = want.matches('\n').count();
        assert_eq!(
            read_reply(&mut b, lines),
            want,
            "the blocked client's reply"
        );
        let _: () = redis::cmd("DEL").arg(block[1]).query(&mut c).unwrap();
    }
}

#[test]
fn a_pipelined_lpop_after_lpush_leaves_the_element_to_the_blocked_client() {
    served_between_pipelined_commands(
        &["BLPOP", "l", "0"],
        &["LPUSH", "l", "a"],
        &["LPOP", "l"],
        "*2\r\n$1\r\nl\r\n$1\r\na\r\n",
    );
}

#[test]
fn a_pipelined_zpopmin_after_zadd_leaves_the_member_to_the_blocked_client() {
    served_between_pipelined_commands(
        &["BZPOPMIN", "z", "0"],
        &["ZADD", "z", "1", "m"],
        &["ZPOPMIN", "z"],
        "*3\r\n$1\r\nz\r\n$1\r\nm\r\n$1\r\n1\r\n",
    );
}

#[test]
fn a_pipelined_xreadgroup_after_xadd_leaves_the_entry_to_the_blocked_consumer() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = redis::cmd("XGROUP")
        .arg(&["CREATE", "s", "g", "$", "MKSTREAM"])
        .query(&mut c)
        .unwrap();
    let mut b = srv.raw();
    b.write_all(&request(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "blocked",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ]))
    .unwrap();
    wait_blocked(&mut c, 1);
    let mut p = redis::pipe();
    p.cmd("XADD").arg(&["s", "1-1", "f", "v"]).ignore();
    p.cmd("XREADGROUP")
        .arg(&["GROUP", "g", "other", "STREAMS", "s", ">"]);
    let (read,): (redis::Value,) = p.query(&mut c).unwrap();
    assert_eq!(read, redis::Value::Nil, "the entry went to the pipeline");
    let reply = read_reply(&mut b, 10);
    assert!(reply.contains("1-1"), "{reply:?}");
}

/// Consumers of one group blocked on a stream with XREADGROUP `>` get
/// the new entries in the order they blocked, one XADD each; a consumer of
/// another group and a plain XREAD get every entry.
#[test]
fn xreadgroup_waiters_served_in_arrival_order() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    for g in ["g", "h"] {
        let _: () = redis::cmd("XGROUP")
            .arg(&["CREATE", "s", g, "$", "MKSTREAM"])
            .query(&mut c)
            .unwrap();
    }
    let mut waiters = Vec::new();
    for i in 0..4 {
        let mut s = srv.raw();
        let consumer = format!("c{i}");
        s.write_all(&request(&[
            "XREADGROUP",
            "GROUP",
            "g",
            &consumer,
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ]))
        .unwrap();
        wait_blocked(&mut c, i + 1);
        waiters.push(s);
    }
    let mut other = srv.raw();
    other
        .write_all(&request(&[
            "XREADGROUP",
            "GROUP",
            "h",
            "x",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ]))
        .unwrap();
    wait_blocked(&mut c, 5);
    for (i, s) in waiters.iter_mut().enumerate() {
        let id = format!("{}-1", i + 1);
        let _: String = redis::cmd("XADD")
            .arg(&["s", &id, "f", "v"])
            .query(&mut c)
            .unwrap();
        let reply = read_reply(s, 10);
        assert!(reply.contains(&id), "consumer {i} got {reply:?}, not {id}");
        if i == 0 {
            assert!(
                read_reply(&mut other, 10).contains("1-1"),
                "group h gets the entry too"
            );
        }
    }
    wait_blocked(&mut c, 0);
    // Each entry is pending for the consumer that received it.
    for i in 0..4 {
        let pending: Vec<redis::Value> = redis::cmd("XPENDING")
            .arg(&["s", "g", "-", "+", "10", &format!("c{i}")])
            .query(&mut c)
            .unwrap();
        assert_eq!(pending.len(), 1, "c{i}");
    }
}

/// XREADGROUP waiters that hang up before the XADD: the entries go to the
/// pending lists of consumers still there, never to one that left.
#[test]
fn xreadgroup_gives_nothing_to_clients_that_left() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = redis::cmd("XGROUP")
        .arg(&["CREATE", "s", "g", "$", "MKSTREAM"])
        .query(&mut c)
        .unwrap();
    for round in 0..10 {
        let mut live = Vec::new();
        let mut gone = Vec::new();
        for i in 0..6 {
            let mut s = srv.raw();
            let consumer = if i < 3 {
                format!("gone{round}-{i}")
            } else {
                format!("live{round}-{i}")
            };
            s.write_all(&request(&[
                "XREADGROUP",
                "GROUP",
                "g",
                &consumer,
                "BLOCK",
                "0",
                "STREAMS",
                "s",
                ">",
            ]))
            .unwrap();
            wait_blocked(&mut c, i + 1);
            if i < 3 {
                gone.push(s);
            } else {
                live.push(s);
            }
        }
        let ports: Vec<u16> = gone
            .iter()
            .map(|s| s.local_addr().unwrap().port())
            .collect();
        drop(gone);
        wait_fins_delivered(srv.port, &ports);
        let _: String = redis::cmd("XADD")
            .arg(&["s", "*", "f", "v"])
            .query(&mut c)
            .unwrap();
        let reply = read_reply(&mut live[0], 10);
        assert!(reply.contains('-'), "{reply:?}");
        drop(live);
        wait_blocked(&mut c, 0);
    }
    let consumers: Vec<Vec<redis::Value>> = redis::cmd("XINFO")
        .arg(&["CONSUMERS", "s", "g"])
        .query(&mut c)
        .unwrap();
    for info in consumers {
        let name = match &info[1] {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            other => format!("{other:?}"),
        };
        assert!(
            !name.starts_with("gone"),
            "an entry went to {name}, who had left"
        );
    }
}
