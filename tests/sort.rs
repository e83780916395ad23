//! SORT and SORT_RO through a real client: sorting with BY and GET patterns
//! over keys in every shard, STORE waking a BLPOP on the destination (from
//! a client, a transaction and a script), WATCH seeing a STORE, and a
//! stored result that survives an AOF restart (logged as the SORT ...
//! STORE command received). Reply-by-reply agreement with Redis is checked
//! by `redis-compat/cases/sort.txt`.
mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{info, temp_dir, TestServer};
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

/// Removes a test's data directory when dropped.
struct DataDir(std::path::PathBuf);

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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

fn popped(key: &str, element: &str) -> Value {
    Value::Array(vec![
        Value::BulkString(key.as_bytes().to_vec()),
        Value::BulkString(element.as_bytes().to_vec()),
    ])
}

#[test]
fn by_and_get_patterns_read_keys_of_every_shard() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    // Enough players that their keys fall in every shard.
    for i in 0..200 {
        let _: i64 = q(&mut c, &["RPUSH", "board", &i.to_string()]);
        let _: () = q(
            &mut c,
            &["SET", &format!("score:{i}"), &((i * 37) % 200).to_string()],
        );
        let _: i64 = q(
            &mut c,
            &["HSET", &format!("player:{i}"), "name", &format!("p{i}")],
        );
    }
    let mut expected: Vec<u32> = (0..200).collect();
    expected.sort_by_key(|i| std::cmp::Reverse((i * 37) % 200));
    let top: Vec<String> = expected[..3].iter().map(|i| format!("p{i}")).collect();
    let got = strings(
        &mut c,
        &[
            "SORT",
            "board",
            "BY",
            "score:*",
            "DESC",
            "LIMIT",
            "0",
            "3",
            "GET",
            "player:*->name",
        ],
    );
    assert_eq!(got, top);
    let got = strings(
        &mut c,
        &[
            "SORT_RO",
            "board",
            "BY",
            "score:*",
            "DESC",
            "LIMIT",
            "0",
            "3",
            "GET",
            "player:*->name",
        ],
    );
    assert_eq!(got, top);
    // COMMAND GETKEYS names the sorted key and the destination only.
    let keys = strings(
        &mut c,
        &[
            "COMMAND", "GETKEYS", "SORT", "board", "BY", "score:*", "STORE", "dest",
        ],
    );
    assert_eq!(keys, ["board", "dest"]);
}

#[test]
fn store_wakes_blpop_and_touches_watched_keys() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: i64 = q(&mut c, &["RPUSH", "src", "3", "1", "2"]);

    // From a client.
    let h = spawn_blocked(&srv, &["BLPOP", "dest", "10"]);
    wait_blocked(&mut c, 1);
    assert_eq!(q::<i64>(&mut c, &["SORT", "src", "STORE", "dest"]), 3);
    assert_eq!(h.join().expect("BLPOP thread"), popped("dest", "1"));
    assert_eq!(strings(&mut c, &["LRANGE", "dest", "0", "-1"]), ["2", "3"]);

    // From a transaction.
    let h = spawn_blocked(&srv, &["BLPOP", "dest2", "10"]);
    wait_blocked(&mut c, 1);
    let (n,): (i64,) = redis::pipe()
        .atomic()
        .cmd("SORT")
        .arg("src")
        .arg("DESC")
        .arg("STORE")
        .arg("dest2")
        .query(&mut c)
        .expect("MULTI/EXEC");
    assert_eq!(n, 3);
    assert_eq!(h.join().expect("BLPOP thread"), popped("dest2", "3"));

    // From a script.
    let h = spawn_blocked(&srv, &["BLPOP", "dest3", "10"]);
    wait_blocked(&mut c, 1);
    let n: i64 = q(
        &mut c,
        &[
            "EVAL",
            "return redis.call('SORT', KEYS[1], 'LIMIT', '1', '1', 'STORE', KEYS[2])",
            "2",
            "src",
            "dest3",
        ],
    );
    assert_eq!(n, 1);
    assert_eq!(h.join().expect("BLPOP thread"), popped("dest3", "2"));

    // WATCH sees the destination change.
    let mut other = srv.conn();
    let _: () = q(&mut c, &["WATCH", "dest"]);
    assert_eq!(q::<i64>(&mut other, &["SORT", "src", "STORE", "dest"]), 3);
    let r: Value = redis::pipe()
        .atomic()
        .cmd("GET")
        .arg("x")
        .query(&mut c)
        .expect("EXEC");
    assert_eq!(r, Value::Nil);
    // An empty result deletes the destination.
    assert_eq!(q::<i64>(&mut c, &["SORT", "nokey", "STORE", "dest"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "dest"]), 0);
}

#[test]
fn a_stored_result_survives_an_aof_restart() {
    let dir = DataDir(temp_dir("sort-aof"));
    let mut srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    let _: i64 = q(&mut c, &["SADD", "ids", "3", "1", "2"]);
    let _: () = q(&mut c, &["MSET", "w_1", "30", "w_2", "10", "w_3", "20"]);
    let _: i64 = q(&mut c, &["HSET", "u_1", "name", "ann"]);
    let _: i64 = q(&mut c, &["HSET", "u_3", "name", "cy"]);
    let stored = [
        "SORT",
        "ids",
        "BY",
        "w_*",
        "GET",
        "#",
        "GET",
        "u_*->name",
        "STORE",
        "out",
    ];
    assert_eq!(q::<i64>(&mut c, &stored), 6);
    // A set kept in its order is stored sorted ALPHA (deterministic).
    assert_eq!(
        q::<i64>(&mut c, &["SORT", "ids", "BY", "nosort", "STORE", "plain"]),
        3
    );
    let before = strings(&mut c, &["LRANGE", "out", "0", "-1"]);
    assert_eq!(before, ["2", "", "3", "cy", "1", "ann"]);
    drop(c);
    srv.terminate();

    // Logged as received.
    let text = String::from_utf8_lossy(&common::aof_bytes(&dir.0)).into_owned();
    assert!(text.contains("$4\r\nSORT\r\n$3\r\nids\r\n$2\r\nBY\r\n$3\r\nw_*\r\n"));

    let srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    assert_eq!(strings(&mut c, &["LRANGE", "out", "0", "-1"]), before);
    assert_eq!(
        strings(&mut c, &["LRANGE", "plain", "0", "-1"]),
        ["1", "2", "3"]
    );
    assert_eq!(q::<String>(&mut c, &["TYPE", "out"]), "list");
}
