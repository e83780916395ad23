//! LB.WATCH / LB.UNWATCH through the `redis` crate, in RESP2 (subscribe
//! mode) and RESP3 (pushes): a scripted sequence of submits (entries
//! entering, leaving, swapping places, ties, a change that cancels itself
//! within one interval) gives a snapshot then exactly the net changes;
//! 1,000 watchers of one board all receive every message; a watcher that
//! never reads is cut off at its output limit while another keeps up.
mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{roundtrip, TestServer};
use redis::Value;

/// One message: kind, key, version, and (place, entry or removal) items.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Msg {
    kind: String,
    key: String,
    version: i64,
    items: Vec<(i64, Option<(String, i64)>)>,
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => panic!("not a string: {other:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// Reads a snapshot or diff frame, RESP2 array or RESP3 push alike.
fn msg(v: Value) -> Msg {
    let (kind, rest) = match v {
        Value::Array(mut a) => {
            let k = text(&a.remove(0));
            (k, a)
        }
        Value::Push { kind, data } => (kind.to_string(), data),
        other => panic!("not a message: {other:?}"),
    };
    assert_eq!(rest.len(), 3, "{kind}: {rest:?}");
    let items = match &rest[2] {
        Value::Array(items) => items
            .iter()
            .map(|it| match it {
                Value::Array(p) if p.len() == 3 => (int(&p[0]), Some((text(&p[1]), int(&p[2])))),
                Value::Array(p) if p.len() == 2 && p[1] == Value::Nil => (int(&p[0]), None),
                other => panic!("not an item: {other:?}"),
            })
            .collect(),
        other => panic!("not items: {other:?}"),
    };
    Msg {
        kind: kind.to_lowercase(),
        key: text(&rest[0]),
        version: int(&rest[1]),
        items,
    }
}

fn resp3_conn(srv: &TestServer) -> redis::Connection {
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", srv.port)).unwrap();
    client
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap()
}

fn run(c: &mut redis::Connection, args: &[&str]) -> Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

/// Runs `steps` atomically (MULTI/EXEC), so that they land in one interval.
fn step(c: &mut redis::Connection, steps: &[&[&str]]) {
    let mut p = redis::pipe();
    p.atomic();
    for s in steps {
        let mut cmd = redis::cmd(s[0]);
        for a in &s[1..] {
            cmd.arg(*a);
        }
        p.add_command(cmd).ignore();
    }
    let _: () = p.query(c).unwrap();
}

fn e(place: i64, m: &str, s: i64) -> (i64, Option<(String, i64)>) {
    (place, Some((m.to_string(), s)))
}

fn gone(place: i64) -> (i64, Option<(String, i64)>) {
    (place, None)
}

/// The scripted sequence, watched by `w` (already connected in its
/// protocol); `w` receives with a read timeout.
fn scripted(srv: &TestServer, w: &mut redis::Connection) {
    let mut c = srv.conn();
    run(&mut c, &["DEL", "race"]);
    run(
        &mut c,
        &["LB.CREATE", "race", "POLICY", "SET", "TIEBREAK", "EARLIEST"],
    );
    run(&mut c, &["LB.SUBMIT", "race", "a", "10"]);
    run(&mut c, &["LB.SUBMIT", "race", "b", "20"]);
    w.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let snap = msg(run(w, &["LB.WATCH", "race", "3", "INTERVAL", "20"]));
    assert_eq!(
        snap,
        Msg {
            kind: "lb.snapshot".into(),
            key: "race".into(),
            version: 1,
            items: vec![e(1, "b", 20), e(2, "a", 10)],
        }
    );
    let mut next = || msg(w.recv_response().expect("a diff within 3 s"));
    // c enters between them.
    step(&mut c, &[&["LB.SUBMIT", "race", "c", "15"]]);
    let d = next();
    assert_eq!((d.kind.as_str(), d.version), ("lb.diff", 2));
    assert_eq!(d.items, vec![e(2, "c", 15), e(3, "a", 10)]);
    // a jumps to the top: every place moves.
    step(&mut c, &[&["LB.SUBMIT", "race", "a", "30"]]);
    assert_eq!(
        next().items,
        vec![e(1, "a", 30), e(2, "b", 20), e(3, "c", 15)]
    );
    // Within one interval: x enters and leaves again, d stays below the
    // top 3. Net difference: nothing, so no message (the next one is
    // version 4).
    step(
        &mut c,
        &[
            &["LB.SUBMIT", "race", "x", "99"],
            &["LB.SUBMIT", "race", "d", "5"],
            &["LB.REM", "race", "x"],
        ],
    );
    // A tie: d reaches b's 20 later than b, so it ranks after it and c
    // leaves the top 3.
    step(&mut c, &[&["LB.SUBMIT", "race", "d", "20"]]);
    let d = next();
    assert_eq!(d.version, 4, "the self-cancelling step sent nothing");
    assert_eq!(d.items, vec![e(3, "d", 20)]);
    // Two changes in one interval coalesce: a leaves and b drops below d,
    // so c comes back at place 3.
    step(
        &mut c,
        &[&["LB.REM", "race", "a"], &["LB.SUBMIT", "race", "b", "19"]],
    );
    let d = next();
    assert_eq!(d.version, 5);
    assert_eq!(d.items, vec![e(1, "d", 20), e(2, "b", 19), e(3, "c", 15)]);
    // The board goes away: every place is removed.
    step(&mut c, &[&["DEL", "race"]]);
    let d = next();
    assert_eq!(d.version, 6);
    assert_eq!(d.items, vec![gone(1), gone(2), gone(3)]);
    // And comes back.
    step(&mut c, &[&["LB.SUBMIT", "race", "z", "1"]]);
    assert_eq!(next().items, vec![e(1, "z", 1)]);
}

#[test]
fn resp2_watcher_sees_snapshot_then_net_changes_in_subscribe_mode() {
    let srv = TestServer::start(&[]);
    let mut w = srv.conn();
    scripted(&srv, &mut w);
    // Subscribe mode: other commands are refused, PING answers as there.
    let err = redis::cmd("GET")
        .arg("k")
        .query::<Value>(&mut w)
        .unwrap_err();
    assert!(err.to_string().contains("Can't execute 'get'"), "{err}");
    let pong = run(&mut w, &["PING"]);
    assert_eq!(
        pong,
        Value::Array(vec![
            Value::BulkString(b"pong".to_vec()),
            Value::BulkString(b"".to_vec())
        ])
    );
    let bye = run(&mut w, &["LB.UNWATCH"]);
    assert_eq!(
        bye,
        Value::Array(vec![
            Value::BulkString(b"lb.unwatch".to_vec()),
            Value::Array(vec![Value::BulkString(b"race".to_vec())]),
            Value::Int(0)
        ])
    );
    // Out of subscribe mode again.
    assert_eq!(run(&mut w, &["GET", "k"]), Value::Nil);
}

#[test]
fn resp3_watcher_gets_pushes_and_keeps_a_normal_connection() {
    let srv = TestServer::start(&[]);
    let mut w = resp3_conn(&srv);
    scripted(&srv, &mut w);
    assert_eq!(run(&mut w, &["GET", "k"]), Value::Nil);
    // LB.UNWATCH of a key not watched answers with the count left.
    let r = run(&mut w, &["LB.UNWATCH", "nope"]);
    assert_eq!(
        int(&match r {
            Value::Array(a) | Value::Push { data: a, .. } => a[a.len() - 1].clone(),
            other => panic!("{other:?}"),
        }),
        1
    );
}

#[test]
fn watch_errors_and_replacing_a_watch() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    run(&mut c, &["SET", "s", "v"]);
    let err = |c: &mut redis::Connection, args: &[&str]| {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query::<Value>(c).unwrap_err().to_string()
    };
    assert!(err(&mut c, &["LB.WATCH", "s", "3"]).contains("WRONGTYPE"));
    assert!(err(&mut c, &["LB.WATCH", "b", "0"]).contains("n must be between 1 and 1000"));
    assert!(err(&mut c, &["LB.WATCH", "b", "3", "INTERVAL", "5"]).contains("at least 10"));
    assert!(err(&mut c, &["LB.WATCH", "b", "3", "NOPE"]).contains("unknown option 'NOPE'"));
    assert!(err(&mut c, &["LB.WATCH", "b"]).contains("wrong number of arguments"));
    // A key that holds nothing is watched as an empty board.
    let mut w = srv.conn();
    w.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    assert_eq!(msg(run(&mut w, &["LB.WATCH", "b", "2"])).items, vec![]);
    // Watching it again replaces the watch (n 1 now).
    let s = msg(run(&mut w, &["LB.WATCH", "b", "1", "INTERVAL", "10"]));
    assert_eq!((s.version, s.items.len()), (1, 0));
    run(&mut c, &["LB.SUBMIT", "b", "p", "1"]);
    run(&mut c, &["LB.SUBMIT", "b", "q", "2"]);
    std::thread::sleep(Duration::from_millis(50));
    let d = msg(w.recv_response().unwrap());
    assert_eq!(d.items, vec![e(1, "q", 2)], "only the top 1");
    // A script may not watch.
    assert!(err(
        &mut c,
        &["EVAL", "return redis.call('lb.watch','b','1')", "0"]
    )
    .contains("not allowed from script"));
}

#[test]
fn a_thousand_watchers_all_receive_every_message() {
    const WATCHERS: usize = 1000;
    const STEPS: i64 = 30;
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    run(&mut c, &["LB.CREATE", "big", "POLICY", "SET"]);
    let mut ws: Vec<redis::Connection> = (0..WATCHERS)
        .map(|i| {
            let mut w = if i % 2 == 0 {
                srv.conn()
            } else {
                resp3_conn(&srv)
            };
            w.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let s = msg(run(&mut w, &["LB.WATCH", "big", "5", "INTERVAL", "10"]));
            assert_eq!(s.version, 1);
            w
        })
        .collect();
    // Each step changes place 1; steps are 20 ms apart, so each gives a diff.
    for i in 0..STEPS {
        run(
            &mut c,
            &[
                "LB.SUBMIT",
                "big",
                &format!("m{}", i % 7),
                &(1000 + i).to_string(),
            ],
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(50));
    let top: Vec<Value> = redis::cmd("LB.TOP")
        .arg("big")
        .arg(5)
        .query(&mut c)
        .unwrap();
    let want: Vec<(String, i64)> = top
        .iter()
        .map(|v| match v {
            Value::Array(a) => (text(&a[1]), int(&a[2])),
            other => panic!("{other:?}"),
        })
        .collect();
    let started = Instant::now();
    let mut last_version = None;
    for w in ws.iter_mut() {
        // Apply every message in order; versions must have no gap.
        let mut board: Vec<Option<(String, i64)>> = vec![None; 5];
        let mut version = 1;
        while board.iter().flatten().cloned().collect::<Vec<_>>() != want {
            let d = msg(w.recv_response().expect("every message"));
            assert_eq!(d.version, version + 1, "no message is skipped");
            version = d.version;
            for (p, entry) in d.items {
                board[(p - 1) as usize] = entry;
            }
        }
        assert!(
            version >= STEPS / 2,
            "steps coalesce, but not that much: {version}"
        );
        match last_version {
            None => last_version = Some(version),
            Some(v) => assert_eq!(v, version, "every watcher got the same messages"),
        }
    }
    assert!(started.elapsed() < Duration::from_secs(30));
    let info = common::info(&mut c, "clients");
    assert_eq!(info["connected_clients"], (WATCHERS + 1).to_string());
}

#[test]
fn a_watcher_that_never_reads_is_cut_off_while_another_keeps_up() {
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::Arc;
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("pubsub 2mb 0 0")
        .query(&mut c)
        .unwrap();
    // 1,000 entries with long names: moving the last to the top changes
    // every place, about 500 KB a diff.
    run(&mut c, &["LB.CREATE", "wide", "POLICY", "SET"]);
    let name = |i: i64| format!("{i:0>480}");
    let mut p = redis::pipe();
    for i in 0..1000 {
        p.cmd("LB.SUBMIT").arg("wide").arg(name(i)).arg(i).ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    let mut slow = srv.raw();
    let id = roundtrip(&mut slow, b"CLIENT ID\r\n", 4);
    let slow_id = String::from_utf8_lossy(&id[1..id.len() - 2]).to_string();
    slow.write_all(b"LB.WATCH wide 1000 INTERVAL 10\r\n")
        .unwrap();
    let mut fast = srv.conn();
    fast.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let snap = msg(run(
        &mut fast,
        &["LB.WATCH", "wide", "1000", "INTERVAL", "10"],
    ));
    assert_eq!(snap.items.len(), 1000);
    let seen = Arc::new(AtomicI64::new(1));
    let seen_by_reader = seen.clone();
    let reader = std::thread::spawn(move || {
        let mut version = 1;
        loop {
            let d = msg(fast
                .recv_response()
                .expect("the fast watcher keeps receiving"));
            assert_eq!(d.version, version + 1, "the fast watcher missed nothing");
            version = d.version;
            seen_by_reader.store(version, Ordering::Release);
            if d.items
                .iter()
                .any(|(p, e)| *p == 1 && e.as_ref().is_some_and(|e| e.1 == 1_000_000_000))
            {
                return version;
            }
        }
    });
    let slow_is_connected = |c: &mut redis::Connection| {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(c).unwrap();
        list.lines()
            .any(|l| l.starts_with(&format!("id={slow_id} ")))
    };
    // Each step waits for the fast watcher's diff, so that each is one
    // message of ~500 KB to the slow one; the kernel's socket buffers take
    // a few MB before the server queues any.
    let mut steps = 0i64;
    while slow_is_connected(&mut c) {
        assert!(
            steps < 400,
            "the slow watcher is still connected after {steps} diffs"
        );
        run(
            &mut c,
            &[
                "LB.SUBMIT",
                "wide",
                &name(steps),
                &(10_000 + steps).to_string(),
            ],
        );
        steps += 1;
        let deadline = Instant::now() + Duration::from_secs(10);
        while seen.load(Ordering::Acquire) < steps + 1 {
            assert!(Instant::now() < deadline, "the fast watcher fell behind");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    // The end marker: a new first place.
    run(&mut c, &["LB.SUBMIT", "wide", "end", "1000000000"]);
    let last = reader.join().expect("reader");
    assert!(last > steps);
    // The slow one's socket ends after what the kernel held for it.
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match slow.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => panic!("the slow watcher's socket did not end: {e}"),
        }
    }
}

/// Sleeps until just after a multiple of `ms` since the epoch (where an
/// `EVERY ms` board rolls over), so that what follows has most of a
/// period before the next boundary.
fn just_after_boundary(ms: u128) {
    let since = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            % ms
    };
    while !(50..400).contains(&since()) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A season rollover (RESET EVERY) and LB.RESET each send the watcher a
/// snapshot of the new, empty period (not a diff removing every place);
/// the diffs that follow apply to it.
fn rollover(srv: &TestServer, w: &mut redis::Connection) {
    let mut c = srv.conn();
    run(&mut c, &["DEL", "season"]);
    just_after_boundary(3000);
    run(&mut c, &["LB.CREATE", "season", "RESET", "EVERY", "3000"]);
    run(&mut c, &["LB.SUBMIT", "season", "a", "10"]);
    run(&mut c, &["LB.SUBMIT", "season", "b", "5"]);
    w.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let snap = msg(run(w, &["LB.WATCH", "season", "3", "INTERVAL", "20"]));
    assert_eq!(
        (snap.kind.as_str(), snap.version, snap.items),
        ("lb.snapshot", 1, vec![e(1, "a", 10), e(2, "b", 5)])
    );
    let mut next = || msg(w.recv_response().expect("a message within 5 s"));
    run(&mut c, &["LB.SUBMIT", "season", "c", "7"]);
    let d = next();
    assert_eq!(
        (d.kind.as_str(), d.version, d.items),
        ("lb.diff", 2, vec![e(2, "c", 7), e(3, "b", 5)])
    );
    // The boundary passes (the server's timer rolls the board): the new
    // period, empty, as a snapshot.
    let s = next();
    assert_eq!(
        (s.kind.as_str(), s.key.as_str(), s.version, s.items),
        ("lb.snapshot", "season", 3, vec![])
    );
    run(&mut c, &["LB.SUBMIT", "season", "d", "1"]);
    let d = next();
    assert_eq!((d.kind.as_str(), d.version), ("lb.diff", 4));
    assert_eq!(d.items, vec![e(1, "d", 1)]);
    // LB.RESET ends the period now: another snapshot.
    run(&mut c, &["LB.RESET", "season"]);
    let s = next();
    assert_eq!(
        (s.kind.as_str(), s.version, s.items),
        ("lb.snapshot", 5, vec![])
    );
    // A board without seasons reset by LB.RESET gets one: a snapshot too.
    run(&mut c, &["DEL", "plain"]);
    run(&mut c, &["LB.SUBMIT", "plain", "p", "3"]);
    let mut w2 = srv.conn();
    w2.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let snap = msg(run(&mut w2, &["LB.WATCH", "plain", "2", "INTERVAL", "20"]));
    assert_eq!(snap.items, vec![e(1, "p", 3)]);
    run(&mut c, &["LB.RESET", "plain"]);
    let s = msg(w2.recv_response().expect("a snapshot within 5 s"));
    assert_eq!(
        (s.kind.as_str(), s.version, s.items),
        ("lb.snapshot", 2, vec![])
    );
}

#[test]
fn resp2_watcher_gets_a_snapshot_of_each_new_period() {
    let srv = TestServer::start(&[]);
    let mut w = srv.conn();
    rollover(&srv, &mut w);
}

#[test]
fn resp3_watcher_gets_a_snapshot_of_each_new_period() {
    let srv = TestServer::start(&[]);
    let mut w = resp3_conn(&srv);
    rollover(&srv, &mut w);
}
