//! Pipelined commands share their shard locks (`commands::LockCache`):
//! these tests run long pipelines on a hot key while other connections run
//! what takes locks differently (multi-key commands, EXEC, scripts,
//! keyspace-wide commands, blocking pops woken by the pipeline) and check
//! that nothing deadlocks and no update is lost.

mod common;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use common::{info, TestServer};
use redis::ConnectionLike;

/// Pipelines sent by the writer, and commands in each.
const BATCHES: usize = 40;
const PER_BATCH: usize = 100;
/// Transactions, scripts and other commands run by the other connections.
const OTHERS: usize = 200;

fn run_bounded(jobs: Vec<Box<dyn FnOnce() + Send>>) {
    let (tx, rx) = mpsc::channel();
    let n = jobs.len();
    for job in jobs {
        let tx = tx.clone();
        thread::spawn(move || {
            job();
            let _ = tx.send(());
        });
    }
    for _ in 0..n {
        rx.recv_timeout(Duration::from_secs(60))
            .expect("a connection did not finish: deadlock or lost reply");
    }
}

#[test]
fn pipelines_on_a_hot_key_alongside_transactions_scripts_and_blocking_pops() {
    let server = TestServer::start(&[]);
    let mut jobs: Vec<Box<dyn FnOnce() + Send>> = Vec::new();

    // The writer: pipelines of ZINCRBY on one board and INCR on a counter,
    // with a multi-key MSET (other shards) and a ZADD to the queue a
    // blocked client waits on, in every batch.
    let mut c = server.conn();
    jobs.push(Box::new(move || {
        for b in 0..BATCHES {
            let mut p = redis::pipe();
            for i in 0..PER_BATCH {
                match i % 10 {
                    3 => p.cmd("MSET").arg("a").arg(b).arg("b").arg(i).ignore(),
                    7 => p
                        .cmd("ZADD")
                        .arg("queue")
                        .arg(i)
                        .arg(format!("{b}:{i}"))
                        .ignore(),
                    _ => p.cmd("ZINCRBY").arg("board").arg(1).arg("m:1").ignore(),
                };
                p.cmd("INCR").arg("hits").ignore();
            }
            let () = p.query(&mut c).unwrap();
        }
    }));

    // Transactions and scripts on the same keys.
    let mut c = server.conn();
    jobs.push(Box::new(move || {
        for _ in 0..OTHERS {
            let (): () = redis::pipe()
                .atomic()
                .cmd("ZINCRBY")
                .arg("board")
                .arg(1)
                .arg("m:1")
                .ignore()
                .cmd("INCR")
                .arg("hits")
                .ignore()
                .query(&mut c)
                .unwrap();
            let _: i64 = redis::cmd("EVAL")
                .arg("redis.call('ZINCRBY', KEYS[1], 1, 'm:1') return redis.call('INCR', KEYS[2])")
                .arg(2)
                .arg("board")
                .arg("hits")
                .query(&mut c)
                .unwrap();
            let _: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
        }
    }));

    // A client blocked on the queue, woken by the writer's ZADDs.
    let mut c = server.conn();
    jobs.push(Box::new(move || {
        let mut popped = 0;
        while popped < 50 {
            let r: Option<(String, String, String)> = redis::cmd("BZPOPMIN")
                .arg("queue")
                .arg(5)
                .query(&mut c)
                .unwrap();
            assert!(r.is_some(), "BZPOPMIN timed out although the writer adds");
            popped += 1;
        }
    }));

    // Readers pipelining on the hot key.
    let mut c = server.conn();
    jobs.push(Box::new(move || {
        for _ in 0..BATCHES {
            let mut p = redis::pipe();
            for _ in 0..PER_BATCH {
                p.cmd("ZSCORE").arg("board").arg("m:1");
            }
            let scores: Vec<Option<f64>> = p.query(&mut c).unwrap();
            assert!(scores.windows(2).all(|w| w[0] <= w[1]), "a score went back");
        }
    }));

    run_bounded(jobs);

    let mut c = server.conn();
    let writer_incrs = BATCHES * PER_BATCH;
    let writer_zincr = BATCHES * PER_BATCH * 8 / 10;
    let hits: usize = redis::cmd("GET").arg("hits").query(&mut c).unwrap();
    assert_eq!(hits, writer_incrs + 2 * OTHERS);
    let score: f64 = redis::cmd("ZSCORE")
        .arg("board")
        .arg("m:1")
        .query(&mut c)
        .unwrap();
    assert_eq!(score as usize, writer_zincr + 2 * OTHERS);
    let queued: usize = redis::cmd("ZCARD").arg("queue").query(&mut c).unwrap();
    assert_eq!(queued, BATCHES * PER_BATCH / 10 - 50);
}

/// Pipelined ZRANK / ZREVRANK calls on one board are answered together
/// (`commands::run`): the replies, the command statistics and the keyspace
/// hits must be those of the same calls sent one at a time.
#[test]
fn pipelined_ranks_match_single_calls_and_count_alike() {
    let server = TestServer::start(&[]);
    let mut c = server.conn();
    let mut p = redis::pipe();
    for i in 0..1000 {
        p.cmd("ZADD")
            .arg("board")
            .arg(i % 37)
            .arg(format!("m{i}"))
            .ignore();
    }
    p.query::<()>(&mut c).expect("load");

    // Calls in runs of 1 to 20, with absent members, a second key and a
    // command between runs.
    let mut calls: Vec<(&str, &str, String)> = Vec::new();
    let mut i = 0;
    for run in 1..=20 {
        let name = if run % 2 == 0 { "ZRANK" } else { "ZREVRANK" };
        let key = if run % 7 == 0 { "other" } else { "board" };
        for _ in 0..run {
            i += 1;
            let member = if i % 9 == 0 {
                format!("x{i}")
            } else {
                format!("m{}", i * 13 % 1000)
            };
            calls.push((name, key, member));
        }
    }
    let single: Vec<Option<i64>> = calls
        .iter()
        .map(|(n, k, m)| redis::cmd(n).arg(k).arg(m).query(&mut c).expect("single"))
        .collect();

    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut c)
        .expect("RESETSTAT");
    let mut p = redis::pipe();
    let mut previous = "";
    for (n, k, m) in &calls {
        if *n != previous {
            p.cmd("PING").ignore();
            previous = n;
        }
        p.cmd(n).arg(k).arg(m);
    }
    let piped: Vec<Option<i64>> = p.query(&mut c).expect("pipeline");
    assert_eq!(piped, single);

    let ranks = calls.iter().filter(|(n, _, _)| *n == "ZRANK").count() as u64;
    let revranks = calls.len() as u64 - ranks;
    let commands = info(&mut c, "commandstats");
    let stat = |cmd: &str| -> u64 {
        commands[&format!("cmdstat_{cmd}")]
            .strip_prefix("calls=")
            .and_then(|v| v.split(',').next()?.parse().ok())
            .expect("calls=N")
    };
    assert_eq!(stat("zrank"), ranks);
    assert_eq!(stat("zrevrank"), revranks);
    let on_board = calls.iter().filter(|(_, k, _)| *k == "board").count() as u64;
    let stats = info(&mut c, "stats");
    let number = |field: &str| -> u64 { stats[field].parse().expect("a number") };
    assert_eq!(number("keyspace_hits"), on_board);
    assert_eq!(number("keyspace_misses"), calls.len() as u64 - on_board);
}

/// The calls of `pipelined_pushes_and_pops_match_single_calls`: runs of
/// LPUSH, RPUSH, LPOP and RPOP on one key (handled together by the
/// server), one that empties its list halfway, some on a string key
/// (WRONGTYPE) and on an absent key, with other commands between runs.
fn list_calls() -> Vec<Vec<String>> {
    let mut calls = Vec::new();
    let mut call = |args: &[&str]| calls.push(args.iter().map(|a| a.to_string()).collect());
    call(&["SET", "s", "x"]);
    for run in 1..=17 {
        let key = match run % 5 {
            0 => "s",
            1 => "other",
            _ => "q",
        };
        for i in 0..run {
            let value = format!("job:{}", run * 100 + i);
            match run % 4 {
                0 => call(&["LPUSH", key, &value]),
                1 => call(&["RPUSH", key, &value]),
                2 => call(&["RPOP", key]),
                _ => call(&["LPOP", key]),
            }
        }
        call(&["LLEN", "q"]);
    }
    // A list emptied in the middle of a run, then popped while absent.
    for i in 0..3 {
        call(&["RPUSH", "e", &i.to_string()]);
    }
    for _ in 0..6 {
        call(&["RPOP", "e"]);
    }
    call(&["EXISTS", "e"]);
    call(&["LRANGE", "q", "0", "-1"]);
    calls
}

#[test]
fn pipelined_pushes_and_pops_match_single_calls() {
    let server = TestServer::start(&[]);
    let mut c = server.conn();
    let calls = list_calls();
    let changes = |c: &mut redis::Connection| -> u64 {
        info(c, "persistence")["rdb_changes_since_last_save"]
            .parse()
            .expect("a number")
    };
    let query = |c: &mut redis::Connection, args: &[String]| -> redis::Value {
        let mut cmd = redis::cmd(&args[0]);
        for a in &args[1..] {
            cmd.arg(a);
        }
        match cmd.query(c) {
            Ok(v) => v,
            Err(e) => redis::Value::SimpleString(format!("error: {e}")),
        }
    };

    let before = changes(&mut c);
    let single: Vec<redis::Value> = calls.iter().map(|a| query(&mut c, a)).collect();
    let single_changes = changes(&mut c) - before;
    let single_lists: Vec<String> = redis::cmd("LRANGE")
        .arg("q")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .expect("LRANGE");

    let _: () = redis::cmd("FLUSHALL").query(&mut c).expect("FLUSHALL");
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut c)
        .expect("RESETSTAT");
    let before = changes(&mut c);
    // Sent as one pipeline; each reply read on its own (an error reply
    // does not end the pipeline).
    let mut p = redis::pipe();
    for args in &calls {
        let cmd = p.cmd(&args[0]);
        for a in &args[1..] {
            cmd.arg(a);
        }
    }
    let piped: Vec<redis::Value> = c
        .req_packed_commands(&p.get_packed_pipeline(), 0, calls.len())
        .expect("pipeline")
        .into_iter()
        .collect();
    let piped_changes = changes(&mut c) - before;
    let piped_lists: Vec<String> = redis::cmd("LRANGE")
        .arg("q")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .expect("LRANGE");

    assert_eq!(piped.len(), single.len());
    for (i, (p, s)) in piped.iter().zip(&single).enumerate() {
        let same = match (p, s) {
            (redis::Value::ServerError(_), redis::Value::SimpleString(e)) => {
                e.contains("WRONGTYPE")
            }
            _ => p == s,
        };
        assert!(same, "call {i} {:?}: piped {p:?}, single {s:?}", calls[i]);
    }
    assert_eq!(piped_lists, single_lists);
    // One change per push and per pop that found an element (the one that
    // empties a list deletes it), and SET's.
    assert_eq!(piped_changes, single_changes);

    let commands = info(&mut c, "commandstats");
    let stat = |cmd: &str, field: &str| -> u64 {
        commands[&format!("cmdstat_{cmd}")]
            .split(',')
            .find_map(|kv| kv.strip_prefix(&format!("{field}=")))
            .and_then(|v| v.parse().ok())
            .expect("field=N")
    };
    for cmd in ["lpush", "rpush", "lpop", "rpop"] {
        let n = calls
            .iter()
            .filter(|a| a[0].eq_ignore_ascii_case(cmd))
            .count() as u64;
        let wrong = calls
            .iter()
            .filter(|a| a[0].eq_ignore_ascii_case(cmd) && a[1] == "s")
            .count() as u64;
        assert_eq!(stat(cmd, "calls"), n, "{cmd} calls");
        assert_eq!(stat(cmd, "failed_calls"), wrong, "{cmd} failed_calls");
    }
}

#[test]
fn pipelined_pushes_wake_a_blocked_pop_and_lose_nothing() {
    let server = TestServer::start(&[]);
    let mut waiter = server.conn();
    let mut c = server.conn();
    let (tx, rx) = mpsc::channel();
    let t = thread::spawn(move || {
        let got: Option<(String, String)> = redis::cmd("BLPOP")
            .arg("q")
            .arg(10)
            .query(&mut waiter)
            .expect("BLPOP");
        let _ = tx.send(got);
    });
    for _ in 0..500 {
        if info(&mut c, "clients")["blocked_clients"] == "1" {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    // With a client blocked on the key the pushes run one at a time (each
    // may wake it), never as one run.
    let mut p = redis::pipe();
    for i in 0..10 {
        p.cmd("LPUSH").arg("q").arg(format!("job:{i}"));
    }
    let lens: Vec<i64> = p.query(&mut c).expect("pipeline");
    assert_eq!(lens.len(), 10);
    let got = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("BLPOP answered")
        .expect("an element");
    t.join().expect("waiter");
    assert_eq!(got.0, "q");
    let mut all: Vec<String> = redis::cmd("LRANGE")
        .arg("q")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .expect("LRANGE");
    all.push(got.1);
    all.sort();
    let mut want: Vec<String> = (0..10).map(|i| format!("job:{i}")).collect();
    want.sort();
    assert_eq!(all, want);
}

/// The calls of `pipelined_calls_on_many_keys_match_single_calls`: a
/// different key at almost every call (the server reads a pipeline's keys
/// ahead, `commands::read_ahead`), hashes and strings read and written,
/// absent keys, WRONGTYPE, a field that is not an integer, an unknown
/// command, a wrong arity, an expired key, SELECT and MULTI/EXEC (with an
/// error queued) in the middle.
fn many_key_calls() -> Vec<Vec<String>> {
    let mut calls = Vec::new();
    let mut call = |args: &[&str]| calls.push(args.iter().map(|a| a.to_string()).collect());
    for i in 0..400usize {
        let p = |k: usize| format!("profile:{k}");
        let s = |k: usize| format!("s:{k}");
        match i % 13 {
            0 => call(&["HGET", &p(i * 7 % 250), "visits"]),
            1 => call(&["HINCRBY", &p(i * 11 % 250), "visits", "3"]),
            2 => call(&["HINCRBY", &p(i % 200), "name", "1"]),
            3 => call(&["GET", &s(i % 250)]),
            4 => call(&["SET", &s(i * 3 % 250), &format!("v{i}")]),
            5 => call(&["HGET", if i % 2 == 0 { "list" } else { "s:1" }, "f"]),
            6 => call(&["HSET", &p(i % 250), &format!("f{i}"), &i.to_string()]),
            7 => call(&["GET", "gone"]),
            8 => call(&["NOSUCH", &p(i), "x"]),
            9 => call(&["HGET", &p(i % 200)]),
            10 => {
                call(&["SELECT", "1"]);
                call(&["HINCRBY", &p(i % 200), "visits", "1"]);
                call(&["HGET", &p(i % 200), "visits"]);
                call(&["SELECT", "0"]);
            }
            11 => {
                call(&["MULTI"]);
                call(&["HINCRBY", &p(i * 5 % 200), "visits", "1"]);
                call(&["GET", &s(i % 250)]);
                call(&["HGET", "list", "x"]);
                call(&["EXEC"]);
            }
            _ => call(&["HGETALL", &p(i * 13 % 250)]),
        }
    }
    calls
}

#[test]
fn pipelined_calls_on_many_keys_match_single_calls() {
    let server = TestServer::start(&[]);
    let mut c = server.conn();
    let calls = many_key_calls();
    let packed = |args: &[String]| {
        let mut cmd = redis::cmd(&args[0]);
        for a in &args[1..] {
            cmd.arg(a);
        }
        cmd.get_packed_command()
    };
    let load = |c: &mut redis::Connection| {
        let _: () = redis::cmd("FLUSHALL").query(c).expect("FLUSHALL");
        let mut p = redis::pipe();
        for i in 0..200 {
            p.cmd("HSET")
                .arg(format!("profile:{i}"))
                .arg("name")
                .arg(format!("n{i}"))
                .arg("visits")
                .arg(i)
                .ignore();
            p.cmd("SET").arg(format!("s:{i}")).arg(i).ignore();
        }
        p.cmd("RPUSH").arg("list").arg("a").ignore();
        p.cmd("PSETEX").arg("gone").arg(1).arg("x").ignore();
        p.query::<()>(c).expect("load");
        thread::sleep(Duration::from_millis(20));
    };
    // Every key of both databases and its value.
    let dump = |c: &mut redis::Connection| -> Vec<(i64, String, redis::Value)> {
        let mut all = Vec::new();
        for db in [0i64, 1] {
            let _: () = redis::cmd("SELECT").arg(db).query(c).expect("SELECT");
            let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
            keys.sort();
            for k in keys {
                let kind: String = redis::cmd("TYPE").arg(&k).query(c).expect("TYPE");
                let name = if kind == "hash" { "HGETALL" } else { "DUMP" };
                let v: redis::Value = redis::cmd(name).arg(&k).query(c).expect("read");
                all.push((db, k, v));
            }
        }
        let _: () = redis::cmd("SELECT").arg(0).query(c).expect("SELECT");
        all
    };

    load(&mut c);
    let single: Vec<redis::Value> = calls
        .iter()
        .map(|a| {
            let mut r = c.req_packed_commands(&packed(a), 0, 1).expect("single");
            r.pop().expect("a reply")
        })
        .collect();
    let single_state = dump(&mut c);

    load(&mut c);
    let all: Vec<u8> = calls.iter().flat_map(|a| packed(a)).collect();
    let piped = c
        .req_packed_commands(&all, 0, calls.len())
        .expect("pipeline");
    assert_eq!(piped.len(), single.len());
    for (i, (p, s)) in piped.iter().zip(&single).enumerate() {
        assert_eq!(p, s, "call {i} {:?}", calls[i]);
    }
    assert_eq!(dump(&mut c), single_state);
    // The errors are there to compare.
    let errors = single
        .iter()
        .filter(|v| matches!(v, redis::Value::ServerError(_)))
        .count();
    assert!(errors > 100, "{errors} errors");
}

/// A pipeline arrives in one read, as Redis reads it (its query buffer
/// takes as much as the socket holds): 16 SETs of 1 KB values are 16.5
/// KB, past the 16 KB a read used to get, so each batch took two reads
/// and two writes of replies. INFO `total_reads_processed` counts the
/// reads (the INFO's own included).
#[test]
fn a_pipeline_of_sixteen_kilobyte_values_arrives_in_one_read() {
    let server = TestServer::start(&[]);
    let mut c = server.conn();
    let value = vec![b'x'; 1000];
    let mut pipe = redis::pipe();
    for i in 0..16 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(&value).ignore();
    }
    let reads = |c: &mut redis::Connection| -> u64 {
        info(c, "stats")["total_reads_processed"]
            .parse()
            .expect("total_reads_processed")
    };
    // The first batches teach the connection how much comes at once.
    for _ in 0..3 {
        let () = pipe.query(&mut c).expect("pipeline");
    }
    let mut counts = Vec::new();
    for _ in 0..8 {
        let before = reads(&mut c);
        let () = pipe.query(&mut c).expect("pipeline");
        // This INFO's own request is one read.
        counts.push(reads(&mut c) - before - 1);
    }
    assert!(
        counts.iter().all(|&n| n >= 1),
        "reads not counted: {counts:?}"
    );
    // A batch split by TCP may take two; most take one.
    assert!(
        counts.iter().sum::<u64>() <= 10,
        "reads per 16.5 KB pipeline: {counts:?}"
    );
}
